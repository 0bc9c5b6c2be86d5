//! The build-tags chain's answers, merged: every plugin of the chain that answers adds its
//! tags, in chain order, and where two set the same key the one earlier in the chain keeps it
//! (chain order is priority, as it is for the chains where the first answer decides). Each
//! key lost that way is a [`TagConflict`] in the decision record.

use serde::{Deserialize, Serialize};

use super::wasm::Tag;

/// A key two plugins of the chain set: `kept` is the earlier plugin's value, `dropped` the
/// later one's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagConflict {
    pub key: String,
    pub kept: TagSource,
    pub dropped: TagSource,
}

/// One plugin's value of a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TagSource {
    pub plugin: String,
    pub value: String,
}

/// The tags of `answers` (plugin name, its tags; in chain order) merged: first set wins, in the
/// order first set; and the keys a later plugin lost.
pub fn merge(answers: &[(String, Vec<Tag>)]) -> (Vec<Tag>, Vec<TagConflict>) {
    let mut merged: Vec<(Tag, &str)> = Vec::new();
    let mut conflicts = Vec::new();
    for (plugin, tags) in answers {
        for tag in tags {
            match merged.iter().find(|(kept, _)| kept.key == tag.key) {
                Some((kept, by)) => {
                    // The same value twice is agreement, not a conflict.
                    if kept.value != tag.value {
                        conflicts.push(TagConflict {
                            key: tag.key.clone(),
                            kept: TagSource {
                                plugin: (*by).to_owned(),
                                value: kept.value.clone(),
                            },
                            dropped: TagSource {
                                plugin: plugin.clone(),
                                value: tag.value.clone(),
                            },
                        });
                    }
                }
                None => merged.push((tag.clone(), plugin)),
            }
        }
    }
    (merged.into_iter().map(|(tag, _)| tag).collect(), conflicts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(key: &str, value: &str) -> Tag {
        Tag {
            key: key.to_owned(),
            value: value.to_owned(),
        }
    }

    fn answer(plugin: &str, tags: &[(&str, &str)]) -> (String, Vec<Tag>) {
        (
            plugin.to_owned(),
            tags.iter().map(|(k, v)| tag(k, v)).collect(),
        )
    }

    #[test]
    fn each_plugin_adds_its_tags_and_the_earlier_one_keeps_a_key_both_set() {
        struct Case {
            name: &'static str,
            answers: Vec<(String, Vec<Tag>)>,
            merged: Vec<(&'static str, &'static str)>,
            conflicts: Vec<(
                &'static str,
                &'static str,
                &'static str,
                &'static str,
                &'static str,
            )>,
        }
        let cases = [
            Case {
                name: "nothing answered",
                answers: vec![],
                merged: vec![],
                conflicts: vec![],
            },
            Case {
                name: "one plugin: its tags as they were",
                answers: vec![answer("team", &[("team", "ml"), ("cost-centre", "42")])],
                merged: vec![("team", "ml"), ("cost-centre", "42")],
                conflicts: vec![],
            },
            Case {
                // The new user's case: a team tagger before the default one no longer loses
                // the pod's own tags and its Name.
                name: "a team tagger and the default tagger: both sets",
                answers: vec![
                    answer("team-tagger", &[("team", "ml")]),
                    answer(
                        "orca-default-tagger",
                        &[("Name", "default/train"), ("project", "llm")],
                    ),
                ],
                merged: vec![
                    ("team", "ml"),
                    ("Name", "default/train"),
                    ("project", "llm"),
                ],
                conflicts: vec![],
            },
            Case {
                name: "a key both set: the earlier plugin keeps it",
                answers: vec![
                    answer("team-tagger", &[("team", "ml"), ("Name", "ml-job")]),
                    answer(
                        "orca-default-tagger",
                        &[("Name", "default/train"), ("env", "prod")],
                    ),
                ],
                merged: vec![("team", "ml"), ("Name", "ml-job"), ("env", "prod")],
                conflicts: vec![(
                    "Name",
                    "team-tagger",
                    "ml-job",
                    "orca-default-tagger",
                    "default/train",
                )],
            },
            Case {
                name: "the same value from both is agreement",
                answers: vec![
                    answer("a", &[("team", "ml")]),
                    answer("b", &[("team", "ml")]),
                ],
                merged: vec![("team", "ml")],
                conflicts: vec![],
            },
            Case {
                name: "three plugins: the first of them keeps it, each loser recorded",
                answers: vec![
                    answer("a", &[("team", "ml")]),
                    answer("b", &[("team", "infra"), ("b-only", "1")]),
                    answer("c", &[("team", "data"), ("b-only", "2")]),
                ],
                merged: vec![("team", "ml"), ("b-only", "1")],
                conflicts: vec![
                    ("team", "a", "ml", "b", "infra"),
                    ("team", "a", "ml", "c", "data"),
                    ("b-only", "b", "1", "c", "2"),
                ],
            },
            Case {
                name: "keys differ by case: EC2 keys are case-sensitive, so both stay",
                answers: vec![
                    answer("a", &[("Team", "ml")]),
                    answer("b", &[("team", "x")]),
                ],
                merged: vec![("Team", "ml"), ("team", "x")],
                conflicts: vec![],
            },
        ];
        for case in cases {
            let (merged, conflicts) = merge(&case.answers);
            let merged: Vec<(&str, &str)> = merged
                .iter()
                .map(|t| (t.key.as_str(), t.value.as_str()))
                .collect();
            assert_eq!(merged, case.merged, "{}", case.name);
            let conflicts: Vec<(&str, &str, &str, &str, &str)> = conflicts
                .iter()
                .map(|c| {
                    (
                        c.key.as_str(),
                        c.kept.plugin.as_str(),
                        c.kept.value.as_str(),
                        c.dropped.plugin.as_str(),
                        c.dropped.value.as_str(),
                    )
                })
                .collect();
            assert_eq!(conflicts, case.conflicts, "{}", case.name);
        }
    }
}
