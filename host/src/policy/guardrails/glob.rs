//! Globs on instance type names and families: `*` stands for any run of characters (none
//! included), `?` for one, everything else for itself, and a glob matches the whole name.
//! That is all an operator needs to say `p5.*`, `g6e.*`, `*.metal` or `m7i*`, and small
//! enough that a typo cannot mean something unexpected: anything but the characters instance
//! type names are made of is refused.

use std::fmt;

/// What a glob is matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GlobKind {
    /// A whole name, `p5.48xlarge`.
    InstanceType,
    /// The part before the dot, `p5`.
    Family,
}

/// Why a glob was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    #[error("a glob of at least one character, such as p5.* or *.metal")]
    Empty,
    #[error(
        "a glob of lowercase letters, digits, '.', '-', '*' (any run of characters) and '?' (one \
         character), such as p5.* or *.metal; {character:?} is not one"
    )]
    BadCharacter { character: char },
    #[error(
        "a family glob without a dot, such as p5 or g6*: a family is the part of a type's name \
         before the dot (list types under allowInstanceTypes or denyInstanceTypes)"
    )]
    DotInFamily,
}

/// A checked glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    text: String,
}

impl Glob {
    /// # Errors
    /// [`GlobError`] for an empty glob, a character no instance type name has, or a dot in a
    /// family glob.
    pub fn parse(text: &str, kind: GlobKind) -> Result<Glob, GlobError> {
        if text.is_empty() {
            return Err(GlobError::Empty);
        }
        if let Some(character) = text.chars().find(|c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '*' | '?'))
        }) {
            return Err(GlobError::BadCharacter { character });
        }
        if kind == GlobKind::Family && text.contains('.') {
            return Err(GlobError::DotInFamily);
        }
        Ok(Glob {
            text: text.to_owned(),
        })
    }

    /// Whether the glob matches all of `name`.
    pub fn matches(&self, name: &str) -> bool {
        matches(self.text.as_bytes(), name.as_bytes())
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Iterative wildcard matching with one backtrack point (the last `*`): linear in practice,
/// never exponential, whatever the glob.
fn matches(glob: &[u8], name: &[u8]) -> bool {
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some(b'*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                // Let the last `*` take one more character, and try again from there.
                Some((star_g, star_n)) => {
                    g = star_g + 1;
                    n = star_n + 1;
                    star = Some((star_g, star_n + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        for (glob, name, expected) in [
            ("p5.*", "p5.48xlarge", true),
            ("p5.*", "p5e.48xlarge", false),
            ("p5*", "p5e.48xlarge", true),
            ("*.metal", "m7i.metal-24xl", false),
            ("*.metal*", "m7i.metal-24xl", true),
            ("*.metal", "c6i.metal", true),
            ("m7i.large", "m7i.large", true),
            ("m7i.large", "m7i.xlarge", false),
            ("m?i.large", "m7i.large", true),
            ("m?i.large", "m7gi.large", false),
            ("*", "anything.at-all", true),
            (
                "*a*a*a*b",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
            ("g6e", "g6e", true),
            ("g6*", "g6", true),
            ("g6?", "g6", false),
        ] {
            let glob = Glob::parse(glob, GlobKind::InstanceType).unwrap();
            assert_eq!(glob.matches(name), expected, "{glob} against {name}");
        }
    }

    #[test]
    fn globs_that_could_not_mean_a_name_are_refused() {
        for (text, kind, expected) in [
            ("", GlobKind::InstanceType, GlobError::Empty),
            (
                "P5.*",
                GlobKind::InstanceType,
                GlobError::BadCharacter { character: 'P' },
            ),
            (
                "p5.[0-9]*",
                GlobKind::InstanceType,
                GlobError::BadCharacter { character: '[' },
            ),
            (
                "p5 ",
                GlobKind::InstanceType,
                GlobError::BadCharacter { character: ' ' },
            ),
            ("p5.48xlarge", GlobKind::Family, GlobError::DotInFamily),
        ] {
            assert_eq!(Glob::parse(text, kind), Err(expected), "{text:?}");
        }
    }
}
