//! No function longer than [`MAX_LINES`] in the folders a pod's launch goes through (`pods/`,
//! `policy/`, `provider/`), read as [`production_code`](super::source_text::production_code):
//! a function that long decides and acts at once, and is split into a pure decision and a
//! small executor instead.

use super::source_text::production_files;
use super::source_text::tokens::{Lines, closing_brace, tokens};

/// The longest a function may be, its signature and closing brace included.
const MAX_LINES: usize = 80;
/// The folders the rule holds in.
const FOLDERS: [&str; 3] = ["pods/", "policy/", "provider/"];

/// A function found in code, by its name, first line (from 1) and length in lines.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
}

/// Every function with a body in `code` (comments and literals blanked): from its `fn` to the
/// brace that closes its body. A nested function or a closure counts in the function around
/// it too; a declaration without a body (a trait's) is no function here.
fn functions(code: &str) -> Vec<Function> {
    let tokens = tokens(code);
    let lines = Lines::of(code);
    let mut found = Vec::new();
    for (at, token) in tokens.iter().enumerate() {
        if token.text != "fn" {
            continue;
        }
        // `fn(u32) -> u32`, a pointer type, names nothing.
        let Some(name) = tokens.get(at + 1).filter(|name| name.is_word()) else {
            continue;
        };
        // The body: the first `{` outside parentheses and brackets (a `[u8; 4]` parameter
        // holds a `;`), unless a `;` ends the declaration first.
        let mut depth = 0;
        let Some(end) = tokens[at..].iter().position(|token| {
            match token.text.as_str() {
                "(" | "[" => depth += 1,
                ")" | "]" => depth -= 1,
                _ => {}
            }
            depth == 0 && matches!(token.text.as_str(), "{" | ";")
        }) else {
            continue;
        };
        let open = at + end;
        if tokens[open].text == ";" {
            continue;
        }
        let Some(close) = closing_brace(&tokens, open) else {
            continue;
        };
        let first = lines.line_of(token.at);
        found.push(Function {
            name: name.text.clone(),
            line: first,
            lines: lines.line_of(close.at) - first + 1,
        });
    }
    found
}

#[test]
fn functions_are_measured_from_fn_to_their_closing_brace() {
    let code = "trait T {\n    fn declared(&self) -> u8;\n}\n\
                pub(crate) async fn one(x: [u8; 4]) -> Result<(), E>\nwhere\n    E: Sized,\n{\n    let f: fn(u8) -> u8 = id;\n    let c = || {\n        1\n    };\n}\n\
                fn two() {}\n\
                impl S {\n    fn three(&self) {\n        fn inner() {\n        }\n    }\n}\n";
    let found: Vec<(String, usize, usize)> = functions(code)
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect();
    assert_eq!(
        found,
        [
            ("one".to_owned(), 4, 9),
            ("two".to_owned(), 13, 1),
            ("three".to_owned(), 15, 4),
            ("inner".to_owned(), 16, 2),
        ]
    );
}

/// Run with `cargo test -p orca --lib function_length --locked`.
#[test]
fn no_function_in_pods_policy_or_provider_is_over_the_limit() {
    let files = production_files();
    let measured: Vec<_> = files
        .iter()
        .filter(|file| FOLDERS.iter().any(|folder| file.path.starts_with(folder)))
        .collect();
    assert!(measured.len() > 50, "only {} files read", measured.len());
    let long: Vec<String> = measured
        .iter()
        .flat_map(|file| {
            functions(&file.code)
                .into_iter()
                .filter(|function| function.lines > MAX_LINES)
                .map(|function| {
                    format!(
                        "{}:{} {} ({} lines)",
                        file.path, function.line, function.name, function.lines
                    )
                })
        })
        .collect();
    assert!(
        long.is_empty(),
        "functions over {MAX_LINES} lines (split the decision from what acts on it):\n{}",
        long.join("\n")
    );
}
