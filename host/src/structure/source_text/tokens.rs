//! Code as tokens, and the modules a file declares.

use std::ops::Range;

/// A token of code: a word (`crate`, `$crate`, `foo_bar`, `1u8`), `::`, or one other char.
#[derive(Debug)]
pub(crate) struct Token {
    pub(crate) text: String,
    /// Byte offset in the code.
    pub(crate) at: usize,
}

impl Token {
    pub(crate) fn is_word(&self) -> bool {
        self.text
            .trim_start_matches('$')
            .starts_with(|c: char| c.is_alphanumeric() || c == '_')
    }
}

/// The tokens of `code` (already without comments and string contents).
pub(crate) fn tokens(code: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let word_start = c.is_alphanumeric()
            || c == '_'
            || c == '$'
                && chars
                    .peek()
                    .is_some_and(|(_, n)| n.is_alphanumeric() || *n == '_');
        if word_start {
            let mut text = c.to_string();
            while let Some(&(_, n)) = chars.peek() {
                if !(n.is_alphanumeric() || n == '_') {
                    break;
                }
                text.push(n);
                chars.next();
            }
            tokens.push(Token { text, at });
        } else if c == ':' && chars.peek().is_some_and(|(_, n)| *n == ':') {
            chars.next();
            tokens.push(Token {
                text: "::".to_owned(),
                at,
            });
        } else {
            tokens.push(Token {
                text: c.to_string(),
                at,
            });
        }
    }
    tokens
}

/// A module declared in a file: `mod name;` or an inline `mod name { … }`.
#[derive(Debug, PartialEq)]
pub(crate) struct DeclaredModule {
    pub(crate) name: String,
    /// The inline modules it is declared inside, outermost first.
    pub(crate) within: Vec<String>,
    /// An inline module's body, as a byte range of the code (inside its braces).
    pub(crate) body: Option<Range<usize>>,
}

/// The modules declared in `code` (production code of one file), in the order they appear.
pub(crate) fn modules(code: &str) -> Vec<DeclaredModule> {
    let tokens = tokens(code);
    let mut declared = Vec::new();
    // The inline modules open at this point: name and where the body ends.
    let mut open: Vec<(String, usize)> = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        while open.last().is_some_and(|(_, end)| token.at >= *end) {
            open.pop();
        }
        if token.text != "mod" {
            continue;
        }
        let (Some(name), Some(after)) = (tokens.get(i + 1), tokens.get(i + 2)) else {
            continue;
        };
        if !name.is_word() {
            continue;
        }
        let within = open.iter().map(|(name, _)| name.clone()).collect();
        match after.text.as_str() {
            ";" => declared.push(DeclaredModule {
                name: name.text.clone(),
                within,
                body: None,
            }),
            "{" => {
                let close = closing_brace(&tokens, i + 2).map_or(code.len(), |close| close.at);
                declared.push(DeclaredModule {
                    name: name.text.clone(),
                    within,
                    body: Some(after.at + 1..close),
                });
                open.push((name.text.clone(), close));
            }
            _ => {}
        }
    }
    declared
}

/// The `}` that closes the `{` at token `open`.
pub(crate) fn closing_brace(tokens: &[Token], open: usize) -> Option<&Token> {
    let mut depth = 0;
    for token in &tokens[open..] {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth -= 1;
                if depth == 0 {
                    return Some(token);
                }
            }
            _ => {}
        }
    }
    None
}

/// Line numbers of byte offsets.
pub(crate) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(crate) fn of(code: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(code.match_indices('\n').map(|(at, _)| at + 1));
        Lines { starts }
    }

    pub(crate) fn line_of(&self, at: usize) -> usize {
        self.starts.partition_point(|start| *start <= at)
    }
}
