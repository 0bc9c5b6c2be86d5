//! A node selector requirement, as the scheduler and the DaemonSet controller evaluate it
//! against a node's labels (`nodeSelectorTerms[].matchExpressions`, and `matchFields` on
//! `metadata.name`). The DaemonSets that land on orca's nodes ([`super::daemonsets`]) and the
//! zones a pod admits (`provider::zones`) both ask it.

use k8s_openapi::api::core::v1::NodeSelectorRequirement;

/// Whether `requirement` holds for a node whose value under its key is `value` (`None`: the
/// node has no such label). `Gt` and `Lt` compare integers: a value or bound that is not one,
/// or more than one bound, holds for nothing; so does an operator the API would refuse.
pub fn holds(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let listed = |value: &str| values.iter().any(|listed| listed == value);
    let number = |text: &str| text.parse::<i64>().ok();
    let compared = |ordering: std::cmp::Ordering| match (value.and_then(number), values) {
        (Some(value), [bound]) => {
            number(bound.as_str()).is_some_and(|bound| value.cmp(&bound) == ordering)
        }
        _ => false,
    };
    match requirement.operator.as_str() {
        "In" => value.is_some_and(listed),
        "NotIn" => !value.is_some_and(listed),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compared(std::cmp::Ordering::Greater),
        "Lt" => compared(std::cmp::Ordering::Less),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_compare_as_numbers_and_not_in_takes_an_absent_label() {
        let labels = std::collections::BTreeMap::from([("gpus", "8"), ("zone", "a")]);
        let requirement = |key: &str, operator: &str, values: &[&str]| NodeSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
        };
        let cases = [
            (requirement("gpus", "Gt", &["4"]), true),
            (requirement("gpus", "Gt", &["10"]), false),
            (requirement("gpus", "Lt", &["10"]), true),
            (requirement("gpus", "Gt", &["four"]), false),
            (requirement("gpus", "Gt", &["1", "2"]), false),
            (requirement("zone", "Gt", &["1"]), false),
            (requirement("missing", "NotIn", &["x"]), true),
            (requirement("zone", "NotIn", &["a"]), false),
            (requirement("missing", "DoesNotExist", &[]), true),
            (requirement("zone", "Sometimes", &["a"]), false),
        ];
        for (requirement, expected) in cases {
            let value = labels.get(requirement.key.as_str()).copied();
            assert_eq!(holds(&requirement, value), expected, "{requirement:?}");
        }
    }
}
