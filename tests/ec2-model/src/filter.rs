//! DescribeInstances filters, as EC2 applies them: filters AND together,
//! the values of one filter OR together, and values may hold the wildcards
//! `*` (any run of characters) and `?` (zero or one character), escaped
//! with `\`.

use crate::error::Ec2Error;
use crate::instance::Instance;

/// One `Name=…,Values=…` filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Filter {
        Filter {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// `tag:<key>` = any of `values`.
    pub fn tag(key: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
        Filter::new(format!("tag:{key}"), values)
    }
}

/// The field of an instance a filter looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    Tag(String),
    State,
    InstanceId,
    ClientToken,
    InstanceType,
}

/// A filter whose name has been understood.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    field: Field,
    values: Vec<String>,
}

/// Understands every filter, or refuses the call as EC2 does.
///
/// # Errors
/// `InvalidParameterValue` for an unknown filter name, a `tag:` filter
/// without a key, or a filter without values.
pub(crate) fn compile(filters: &[Filter]) -> Result<Vec<Compiled>, Ec2Error> {
    filters.iter().map(compile_one).collect()
}

fn compile_one(filter: &Filter) -> Result<Compiled, Ec2Error> {
    let field = match filter.name.as_str() {
        "instance-state-name" => Field::State,
        "instance-id" => Field::InstanceId,
        "client-token" => Field::ClientToken,
        "instance-type" => Field::InstanceType,
        name => match name.strip_prefix("tag:") {
            Some(key) if !key.is_empty() => Field::Tag(key.to_owned()),
            _ => {
                return Err(Ec2Error::invalid_parameter(format!(
                    "The filter '{name}' is invalid"
                )));
            }
        },
    };
    if filter.values.is_empty() {
        return Err(Ec2Error::invalid_parameter(format!(
            "The filter '{}' requires at least one value",
            filter.name
        )));
    }
    Ok(Compiled {
        field,
        values: filter.values.clone(),
    })
}

impl Compiled {
    pub fn matches(&self, instance: &Instance) -> bool {
        let actual = match &self.field {
            Field::Tag(key) => instance.tags.get(key).map(String::as_str),
            Field::State => Some(instance.state.as_str()),
            Field::InstanceId => Some(instance.instance_id.as_str()),
            Field::ClientToken => instance.client_token.as_deref(),
            Field::InstanceType => Some(instance.instance_type.as_str()),
        };
        actual.is_some_and(|actual| self.values.iter().any(|pattern| glob(pattern, actual)))
    }
}

/// A pattern element: a literal character or a wildcard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(char),
    AnyRun,
    ZeroOrOne,
}

fn tokens(pattern: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            // A trailing lone backslash stands for itself.
            '\\' => Token::Literal(chars.next().unwrap_or('\\')),
            '*' => Token::AnyRun,
            '?' => Token::ZeroOrOne,
            other => Token::Literal(other),
        });
    }
    tokens
}

/// EC2's wildcard match, in `O(pattern × text)` time and `O(text)` space so
/// that hostile patterns cannot blow up.
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let pattern = tokens(pattern);
    let text: Vec<char> = text.chars().collect();
    // `row[j]`: the pattern so far matches the first `j` characters of text.
    let mut row = vec![false; text.len() + 1];
    row[0] = true;
    for token in pattern {
        let mut next = vec![false; text.len() + 1];
        for j in 0..=text.len() {
            next[j] = match token {
                Token::Literal(c) => j > 0 && row[j - 1] && text[j - 1] == c,
                Token::AnyRun => row[j] || (j > 0 && next[j - 1]),
                Token::ZeroOrOne => row[j] || (j > 0 && row[j - 1]),
            };
        }
        row = next;
    }
    row[text.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_ec2_documents() {
        assert!(glob("abc", "abc"));
        assert!(!glob("abc", "abcd"));
        assert!(glob("a*", "abcd"));
        assert!(glob("*", ""));
        assert!(glob("a?c", "abc"));
        assert!(glob("a?c", "ac"));
        assert!(!glob("a?c", "abbc"));
        assert!(glob(r"a\*", "a*"));
        assert!(!glob(r"a\*", "ab"));
        assert!(glob("\\", "\\"));
    }

    #[test]
    fn a_hostile_pattern_does_not_take_exponential_time() {
        let pattern = "*a".repeat(200);
        let text = "a".repeat(199);
        assert!(!glob(&pattern, &text));
    }

    #[test]
    fn unknown_filters_and_filters_without_values_are_refused() {
        for filter in [
            Filter::new("instance-state", ["running"]),
            Filter::new("tag:", ["x"]),
            Filter::new("", ["x"]),
            Filter::new("instance-id", Vec::<String>::new()),
        ] {
            let error = compile(&[filter]).err().map(|e| e.code);
            assert_eq!(error.as_deref(), Some("InvalidParameterValue"));
        }
    }
}
