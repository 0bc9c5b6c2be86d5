//! DescribeInstances and DescribeFleets filters, as EC2 applies them:
//! filters AND together, the values of one filter OR together, and values
//! may hold the wildcards `*` (any run of characters) and `?` (zero or one
//! character), escaped with `\`.

use crate::error::Ec2Error;
use crate::fleet_answer::FleetDescription;
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

/// What a describe lists, which decides the filter names it understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Listing {
    /// DescribeInstances: `tag:<key>`, `instance-state-name`, `instance-id`,
    /// `client-token`, `instance-type`.
    Instances,
    /// DescribeFleets: `tag:<key>`, and `fleet-id`, the model's stand-in for
    /// the call's `FleetIds` parameter (exact ids, no wildcards).
    Fleets,
}

/// The field of a listed thing a filter looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    Tag(String),
    State,
    InstanceId,
    ClientToken,
    InstanceType,
    FleetId,
}

/// Something a describe lists and filters.
pub(crate) trait Filterable {
    /// The value of `field`, if it has one.
    fn value(&self, field: &Field) -> Option<&str>;
}

impl Filterable for Instance {
    fn value(&self, field: &Field) -> Option<&str> {
        match field {
            Field::Tag(key) => self.tags.get(key).map(String::as_str),
            Field::State => Some(self.state.as_str()),
            Field::InstanceId => Some(self.instance_id.as_str()),
            Field::ClientToken => self.client_token.as_deref(),
            Field::InstanceType => Some(self.instance_type.as_str()),
            Field::FleetId => None,
        }
    }
}

impl Filterable for FleetDescription {
    fn value(&self, field: &Field) -> Option<&str> {
        match field {
            Field::Tag(key) => self.tags.get(key).map(String::as_str),
            Field::FleetId => Some(self.fleet_id.as_str()),
            _ => None,
        }
    }
}

/// A filter whose name has been understood.
#[derive(Clone, Debug)]
pub(crate) struct Compiled {
    field: Field,
    values: Vec<String>,
}

/// Understands every filter for `listing`, or refuses the call as EC2
/// does.
///
/// # Errors
/// `InvalidParameterValue` for a filter name unknown to `listing`, a `tag:`
/// filter without a key, or a filter without values.
pub(crate) fn compile(filters: &[Filter], listing: Listing) -> Result<Vec<Compiled>, Ec2Error> {
    filters
        .iter()
        .map(|filter| compile_one(filter, listing))
        .collect()
}

fn compile_one(filter: &Filter, listing: Listing) -> Result<Compiled, Ec2Error> {
    let field = match (listing, filter.name.as_str()) {
        (Listing::Instances, "instance-state-name") => Field::State,
        (Listing::Instances, "instance-id") => Field::InstanceId,
        (Listing::Instances, "client-token") => Field::ClientToken,
        (Listing::Instances, "instance-type") => Field::InstanceType,
        (Listing::Fleets, "fleet-id") => Field::FleetId,
        (_, name) => match name.strip_prefix("tag:") {
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
    pub fn matches(&self, item: &impl Filterable) -> bool {
        let Some(actual) = item.value(&self.field) else {
            return false;
        };
        if self.field == Field::FleetId {
            // `FleetIds` names fleets exactly.
            return self.values.iter().any(|id| id == actual);
        }
        self.values.iter().any(|pattern| glob(pattern, actual))
    }

    /// True for a `fleet-id` filter: the only way to name an instant fleet.
    pub fn names_fleets(&self) -> bool {
        self.field == Field::FleetId
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
            let error = compile(&[filter], Listing::Instances).err().map(|e| e.code);
            assert_eq!(error.as_deref(), Some("InvalidParameterValue"));
        }
    }

    #[test]
    fn each_listing_knows_only_its_own_filter_names() {
        let refused = |name: &str, listing| {
            compile(&[Filter::new(name, ["x"])], listing)
                .err()
                .map(|e| e.code)
        };
        let invalid = Some("InvalidParameterValue".to_owned());
        assert_eq!(refused("fleet-id", Listing::Instances), invalid);
        assert_eq!(refused("instance-id", Listing::Fleets), invalid);
        assert_eq!(refused("fleet-state", Listing::Fleets), invalid);
        assert_eq!(refused("tag:pod", Listing::Fleets), None);
        assert_eq!(refused("fleet-id", Listing::Fleets), None);
    }
}
