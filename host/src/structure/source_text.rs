//! orca's own source read as text, for tests that hold the code to a rule (the IAM list in
//! `provider/aws/permissions`, the import graph in `import_cycles`): which files the compiler
//! builds from `lib.rs` and `main.rs`, and each file's code as the compiler builds it outside
//! tests.
//!
//! # Guarantees
//! - [`code_of`] blanks comments (line, block, nested, doc), the contents of string literals
//!   (plain, byte, C, raw with any number of `#`, across lines) and of char literals; a
//!   lifetime stays. Every newline stays where it was, so byte offsets and line numbers in the
//!   result are those of the file.
//! - [`production_code`] also blanks each item under `#[cfg(test)]` or `#[cfg(any(test, …))]`
//!   (not `cfg(not(test))`), attributes included.
//!
//! # Caveats
//! It reads tokens, not meaning: no macro is expanded and `#[path]` is not read (orca uses
//! none). A `#[cfg(test)]` item ends at its first `;` or at the `}` that closes its first
//! block, whichever comes first (`const` and `static` items end at their `;`), which is every
//! shape orca puts under it.

pub(crate) mod references;
#[cfg(test)]
mod tests;
pub(crate) mod tokens;

use std::fs;
use std::path::{Path, PathBuf};

use tokens::modules;

/// One file the compiler builds.
pub(crate) struct SourceFile {
    /// From `host/src`, with `/`: `pods/view.rs`.
    pub(crate) path: String,
    /// The module the file is, from its crate's root: `["pods", "view"]`; empty for `lib.rs`
    /// and `main.rs`.
    pub(crate) module: Vec<String>,
    /// Whether the file is the binary's (`main.rs`) rather than the library's.
    pub(crate) binary: bool,
    /// As read.
    pub(crate) text: String,
    /// [`production_code`] of `text`.
    pub(crate) code: String,
}

impl SourceFile {
    pub(crate) fn new(path: String, module: Vec<String>, binary: bool, text: String) -> Self {
        let code = production_code(&text);
        SourceFile {
            path,
            module,
            binary,
            text,
            code,
        }
    }
}

/// The folder of orca's sources: `host/src`.
pub(crate) fn source_folder() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every file the compiler builds for production, from `lib.rs` and `main.rs` along `mod`
/// declarations (`name.rs` or `name/mod.rs`, beside the file or, for a module declared inside
/// an inline `mod outer { … }`, under `outer/`), leaving out what is under `#[cfg(test)]`.
pub(crate) fn production_files() -> Vec<SourceFile> {
    let src = source_folder();
    let mut pending = vec![
        (src.join("lib.rs"), src.clone(), Vec::new(), false),
        (src.join("main.rs"), src.clone(), Vec::new(), true),
    ];
    let mut files = Vec::new();
    while let Some((file, dir, module, binary)) = pending.pop() {
        let text = fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let relative = file
            .strip_prefix(&src)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        let source = SourceFile::new(relative, module, binary, text);
        for declared in modules(&source.code) {
            if declared.body.is_some() {
                continue;
            }
            let mut dir = dir.clone();
            dir.extend(&declared.within);
            let flat = dir.join(format!("{}.rs", declared.name));
            let nested = dir.join(&declared.name).join("mod.rs");
            let path = if flat.exists() { flat } else { nested };
            assert!(
                path.exists(),
                "module {} of {}: neither {0}.rs nor {0}/mod.rs",
                declared.name,
                file.display()
            );
            let child_dir = dir.join(&declared.name);
            let mut child = source.module.clone();
            child.extend(declared.within.iter().cloned());
            child.push(declared.name);
            pending.push((path, child_dir, child, binary));
        }
        files.push(source);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// `text` without comments and without the contents of string and char literals, each
/// replaced by spaces (newlines kept). A string that names a function for serde
/// (`deserialize_with = "super::quantity_field::string_or_number"`, also `with`,
/// `serialize_with` and `default`) is a path the compiler follows: its contents stay.
pub(crate) fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut code = String::with_capacity(text.len());
    let blank = |code: &mut String, c: char| code.push(if c == '\n' { '\n' } else { ' ' });
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        let previous_is_word = at > 0 && is_word(chars[at - 1]);
        // `b'x'`: a byte literal, its `b` no word before it.
        let byte_prefix = at > 0 && chars[at - 1] == 'b' && (at < 2 || !is_word(chars[at - 2]));
        if c == '/' && next == Some('/') {
            while at < chars.len() && chars[at] != '\n' {
                code.push(' ');
                at += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while at < chars.len() {
                if chars[at] == '/' && chars.get(at + 1) == Some(&'*') {
                    depth += 1;
                    code.push_str("  ");
                    at += 2;
                } else if chars[at] == '*' && chars.get(at + 1) == Some(&'/') {
                    depth -= 1;
                    code.push_str("  ");
                    at += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut code, chars[at]);
                    at += 1;
                }
            }
        } else if let Some(hashes) = raw_string_start(&chars, at).filter(|_| !previous_is_word) {
            // `r#"…"#`, `br"…"`: the prefix, then contents up to `"` and as many `#`.
            while chars[at] != '"' {
                code.push(chars[at]);
                at += 1;
            }
            code.push('"');
            at += 1;
            while at < chars.len() {
                let closes = chars[at] == '"'
                    && (1..=hashes).all(|offset| chars.get(at + offset) == Some(&'#'));
                if closes {
                    code.push('"');
                    code.extend(std::iter::repeat_n('#', hashes));
                    at += 1 + hashes;
                    break;
                }
                blank(&mut code, chars[at]);
                at += 1;
            }
        } else if c == '"' {
            let mut end = at + 1;
            while end < chars.len() && chars[end] != '"' {
                end += if chars[end] == '\\' { 2 } else { 1 };
            }
            let end = end.min(chars.len());
            let inside = &chars[at + 1..end];
            let path = names_a_path_for_serde(&code)
                && !inside.is_empty()
                && inside.iter().all(|&c| is_word(c) || c == ':');
            code.push('"');
            for &inside in inside {
                if path {
                    code.push(inside);
                } else {
                    blank(&mut code, inside);
                }
            }
            if end < chars.len() {
                code.push('"');
            }
            at = end + 1;
        } else if c == '\'' && (!previous_is_word || byte_prefix) {
            // A char literal (`'x'`, `'\n'`, `'\u{1F600}'`) or a lifetime (`'a`), which stays.
            let end = if next == Some('\\') {
                (at + 2..chars.len()).find(|&i| chars[i] == '\'')
            } else if chars.get(at + 2) == Some(&'\'') {
                Some(at + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    code.push('\'');
                    for &inside in &chars[at + 1..end] {
                        blank(&mut code, inside);
                    }
                    code.push('\'');
                    at = end + 1;
                }
                None => {
                    code.push(c);
                    at += 1;
                }
            }
        } else {
            code.push(c);
            at += 1;
        }
    }
    code
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// At `r"`, `r#"`, `br#"`, `cr"`: how many `#` the raw string has.
fn raw_string_start(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at;
    if matches!(chars.get(i), Some('b' | 'c')) {
        i += 1;
    }
    if chars.get(i) != Some(&'r') {
        return None;
    }
    i += 1;
    let hashes = chars[i..].iter().take_while(|&&c| c == '#').count();
    (chars.get(i + hashes) == Some(&'"')).then_some(hashes)
}

/// Whether the code so far ends with a serde attribute's `with =` (or `deserialize_with =`,
/// `serialize_with =`, `default =`): the string that follows names a function.
fn names_a_path_for_serde(code_so_far: &str) -> bool {
    let before = code_so_far.trim_end();
    let Some(before) = before.strip_suffix('=') else {
        return false;
    };
    let key = before.trim_end();
    ["with", "default"].iter().any(|name| {
        key.strip_suffix(name)
            .is_some_and(|rest| rest.ends_with(|c: char| !is_word(c) || c == '_'))
    })
}

/// The code of `text` (see [`code_of`]) with every item under `#[cfg(test)]` (or
/// `cfg(any(test, …))`, not `cfg(not(test))`) blanked, attribute and all.
pub(crate) fn production_code(text: &str) -> String {
    let mut code: Vec<char> = code_of(text).chars().collect();
    let mut at = 0;
    while at < code.len() {
        if code[at] == '#' && code.get(at + 1) == Some(&'[') {
            let end = closing(&code, at + 1).unwrap_or(code.len() - 1);
            let attribute: String = code[at + 2..end]
                .iter()
                .filter(|c| !c.is_whitespace())
                .collect();
            if is_test_only(&attribute) {
                let item_end = item_end(&code, end + 1);
                for c in &mut code[at..item_end] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                at = item_end;
                continue;
            }
            at = end + 1;
            continue;
        }
        at += 1;
    }
    code.into_iter().collect()
}

/// `cfg(test)`, `cfg(any(test,feature="x"))`; not `cfg(not(test))` (whitespace removed).
fn is_test_only(attribute: &str) -> bool {
    let Some(condition) = attribute.strip_prefix("cfg(") else {
        return false;
    };
    let mentions_test = condition
        .split(|c: char| !is_word(c))
        .any(|word| word == "test");
    mentions_test && !condition.contains("not(test")
}

/// The index of the bracket that closes the one at `open` (`(`, `[` or `{`).
fn closing(code: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, &c) in code.iter().enumerate().skip(open) {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where the item that starts at or after `from` (after any further attributes) ends: just
/// past its first `;` outside brackets, or past the `}` that closes its first block; a `const`,
/// `static` or `let` ends at its `;` only.
fn item_end(code: &[char], from: usize) -> usize {
    let mut at = from;
    let mut depth = 0;
    let header_start = from;
    while at < code.len() {
        match code[at] {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '{' if depth == 0 => {
                let header: String = code[header_start..at].iter().collect();
                let value_item = header
                    .split(|c: char| !is_word(c))
                    .any(|word| matches!(word, "const" | "static" | "let"))
                    && !header.split(|c: char| !is_word(c)).any(|word| word == "fn");
                let close = closing(code, at).unwrap_or(code.len() - 1);
                if !value_item {
                    return close + 1;
                }
                at = close;
            }
            ';' if depth == 0 => return at + 1,
            _ => {}
        }
        at += 1;
    }
    code.len()
}
