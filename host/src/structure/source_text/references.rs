//! What one file's code refers to in its own crate: each `use` (`use crate::a::b;`,
//! `use super::super::x::{Y, z::{self, W as V}};`, `use child::Item;`, `use self::…`) and each
//! path in code (`crate::a::b::f(…)`, `super::x::Y`, `child::f()`, `alias::g()` where a `use`
//! named `alias` a module of the crate), as a path from the crate's root.
//!
//! # Guarantees
//! - A path is resolved in the module it is written in, inline `mod x { … }` included: `self`
//!   is that module, each `super` its parent, a first name that is a child module or a name
//!   that module's `use` brought in stands for what it names; `$crate` is the library's root,
//!   and in `main.rs` so is `orca`.
//! - A path that starts anywhere else (another crate, a local item, `Self`) is not a
//!   reference; nor is the path of a `pub(in …)` visibility, nor a `mod child;` declaration.
//!
//! # Caveats
//! A glob (`use super::*`) refers to the module it names; the names it brings in are not
//! followed. A `use` inside a function counts for its whole module.

use std::collections::HashMap;

use super::tokens::{Lines, Token, modules, tokens};

/// One reference from a file to a module or item of its crate.
#[derive(Debug, PartialEq)]
pub(crate) struct Reference {
    /// 1-based.
    pub(crate) line: usize,
    /// From the library's root, as written after resolving: `["pods", "view", "PodView"]`.
    pub(crate) path: Vec<String>,
}

/// A name a `use` brings into a module's scope, and what it stands for: through these a
/// path to a re-export leads on to the file that defines the item.
#[derive(Debug, PartialEq)]
pub(crate) struct UseName {
    /// From the library's root.
    pub(crate) module: Vec<String>,
    pub(crate) name: String,
    /// From the library's root.
    pub(crate) path: Vec<String>,
}

/// What one file refers to, and the names its `use`s bring in that stand for the crate's own.
#[derive(Debug, Default)]
pub(crate) struct FileReferences {
    /// In the order of their lines.
    pub(crate) references: Vec<Reference>,
    pub(crate) use_names: Vec<UseName>,
}

/// The references in one file's production code. `module` is the file's module from its
/// crate's root; `binary` says the crate is `main.rs`'s, where `crate::` is not the library.
pub(crate) fn references(module: &[String], binary: bool, code: &str) -> FileReferences {
    let tokens = tokens(code);
    let lines = Lines::of(code);
    let declared = modules(code);
    // Inline modules: full path and body, innermost last among those that contain a point.
    let scopes: Vec<(Vec<String>, std::ops::Range<usize>)> = declared
        .iter()
        .filter_map(|declared| {
            let body = declared.body.clone()?;
            Some((full(module, &declared.within, &declared.name), body))
        })
        .collect();
    let scope_at = |at: usize| -> Vec<String> {
        scopes
            .iter()
            .filter(|(_, body)| body.contains(&at))
            .max_by_key(|(path, _)| path.len())
            .map_or_else(|| module.to_vec(), |(path, _)| path.clone())
    };
    let mut names = Names {
        binary,
        scopes: HashMap::new(),
    };
    for declared in &declared {
        let parent = full(module, &declared.within, "");
        let parent = parent[..parent.len() - 1].to_vec();
        names.scopes.entry(parent).or_default().insert(
            declared.name.clone(),
            Named::Module(full(module, &declared.within, &declared.name)),
        );
    }

    // `use` trees: their leaves, and which tokens they span.
    let mut leaves = Vec::new();
    let mut in_use = vec![false; tokens.len()];
    for (i, token) in tokens.iter().enumerate() {
        if token.text != "use" || in_use[i] {
            continue;
        }
        let starts_item = i == 0
            || matches!(
                tokens[i - 1].text.as_str(),
                ";" | "{" | "}" | "]" | ")" | "pub"
            );
        if !starts_item {
            continue;
        }
        let mut parser = UseParser {
            tokens: &tokens,
            at: i + 1,
            leaves: Vec::new(),
        };
        if parser.tree(&[]).is_some() {
            let scope = scope_at(token.at);
            for leaf in parser.leaves {
                if let Some(name) = leaf.name() {
                    names
                        .scopes
                        .entry(scope.clone())
                        .or_default()
                        .insert(name, Named::Use(leaf.segments.clone()));
                }
                leaves.push((scope.clone(), token.at, leaf));
            }
            for used in &mut in_use[i..parser.at] {
                *used = true;
            }
        }
    }

    let mut references = Vec::new();
    let mut use_names = Vec::new();
    for (scope, at, leaf) in &leaves {
        if let Some(path) = names.resolve(scope, &leaf.segments, 0) {
            if let Some(name) = leaf.name()
                && !binary
            {
                use_names.push(UseName {
                    module: scope.clone(),
                    name,
                    path: path.clone(),
                });
            }
            references.push(Reference {
                line: lines.line_of(*at),
                path,
            });
        }
    }
    // Paths in code: a word followed by `::` and a word, not itself after `::`.
    let mut i = 0;
    while i + 2 < tokens.len() {
        let starts_path = !in_use[i]
            && tokens[i].is_word()
            && tokens[i + 1].text == "::"
            && tokens[i + 2].is_word()
            && (i == 0 || tokens[i - 1].text != "::");
        if !starts_path {
            i += 1;
            continue;
        }
        let visibility = i >= 3
            && tokens[i - 1].text == "in"
            && tokens[i - 2].text == "("
            && tokens[i - 3].text == "pub";
        let mut segments = vec![tokens[i].text.clone()];
        let mut j = i + 1;
        while j + 1 < tokens.len() && tokens[j].text == "::" && tokens[j + 1].is_word() {
            segments.push(tokens[j + 1].text.clone());
            j += 2;
        }
        if !visibility && let Some(path) = names.resolve(&scope_at(tokens[i].at), &segments, 0) {
            references.push(Reference {
                line: lines.line_of(tokens[i].at),
                path,
            });
        }
        i = j;
    }
    references.sort_by_key(|reference| reference.line);
    FileReferences {
        references,
        use_names,
    }
}

fn full(module: &[String], within: &[String], name: &str) -> Vec<String> {
    let mut path = module.to_vec();
    path.extend(within.iter().cloned());
    path.push(name.to_owned());
    path
}

/// What a name in a module's scope stands for.
enum Named {
    /// A child module, by its path from the root.
    Module(Vec<String>),
    /// What a `use` leaf named, as written.
    Use(Vec<String>),
}

/// The names each module's `mod` and `use` declarations bring into scope.
struct Names {
    binary: bool,
    scopes: HashMap<Vec<String>, HashMap<String, Named>>,
}

impl Names {
    /// `segments`, written in module `scope`, as a path from the library's root; `None` when
    /// it starts outside the crate.
    fn resolve(&self, scope: &[String], segments: &[String], depth: usize) -> Option<Vec<String>> {
        if depth > 8 {
            return None;
        }
        let (first, rest) = segments.split_first()?;
        let mut base = match first.as_str() {
            "crate" if self.binary => return None,
            "crate" | "$crate" => Vec::new(),
            "orca" if self.binary => Vec::new(),
            "self" => scope.to_vec(),
            "super" => {
                let mut base = scope.to_vec();
                base.pop()?;
                base
            }
            name => match self.scopes.get(scope).and_then(|names| names.get(name))? {
                Named::Module(path) => path.clone(),
                Named::Use(written) => self.resolve(scope, written, depth + 1)?,
            },
        };
        let mut rest = rest.iter().peekable();
        while rest.peek().is_some_and(|segment| *segment == "super") {
            rest.next();
            base.pop()?;
        }
        base.extend(rest.cloned());
        Some(base)
    }
}

/// One leaf of a `use` tree: the path it imports, whole.
struct Leaf {
    segments: Vec<String>,
    alias: Option<String>,
    glob: bool,
}

impl Leaf {
    /// The name it brings into scope, if one.
    fn name(&self) -> Option<String> {
        if self.glob {
            return None;
        }
        match &self.alias {
            Some(alias) if alias == "_" => None,
            Some(alias) => Some(alias.clone()),
            None => self.segments.last().cloned(),
        }
    }
}

struct UseParser<'a> {
    tokens: &'a [Token],
    at: usize,
    leaves: Vec<Leaf>,
}

impl UseParser<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(|token| token.text.as_str())
    }

    /// One tree after `prefix`: `a::b`, `a::b as c`, `a::*`, `a::{…}`, `{…}`; `Some(())` when
    /// it parsed.
    fn tree(&mut self, prefix: &[String]) -> Option<()> {
        let mut segments = prefix.to_vec();
        if self.peek() == Some("::") {
            // `use ::std::…`: another crate.
            return None;
        }
        loop {
            match self.peek()? {
                "{" => {
                    self.at += 1;
                    while self.peek()? != "}" {
                        self.tree(&segments)?;
                        if self.peek()? == "," {
                            self.at += 1;
                        }
                    }
                    self.at += 1;
                    return Some(());
                }
                "*" => {
                    self.at += 1;
                    self.leaves.push(Leaf {
                        segments,
                        alias: None,
                        glob: true,
                    });
                    return Some(());
                }
                word if self.tokens[self.at].is_word() => {
                    if word != "self" || segments.is_empty() {
                        segments.push(word.to_owned());
                    }
                    self.at += 1;
                    if self.peek() == Some("::") {
                        self.at += 1;
                        continue;
                    }
                    let alias = if self.peek() == Some("as") {
                        self.at += 1;
                        let alias = self.peek()?.to_owned();
                        self.at += 1;
                        Some(alias)
                    } else {
                        None
                    };
                    self.leaves.push(Leaf {
                        segments,
                        alias,
                        glob: false,
                    });
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}
