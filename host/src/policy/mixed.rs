//! A decision mixed from two policies: a plugin broke on one hook (it failed, crashed, timed
//! out or answered what orca refused), `onError: fallback` let the next plugin decide that
//! hook, and the same plugin answered another hook. The pod then launches with, say, the
//! default selector's type and the team's market: a plan neither policy made. orca does
//! launch it (the operator asked for the fallback), but never silently: the record holds a
//! [`MixedPolicy`], the `PolicyDecision` Event says so, and `orca plugin eval` exits non-zero.
//!
//! A decline, `unsupported` and `no-match` are not faults (the plugin said the pod is not its
//! to decide: [`FailureKind::is_fault`]), so a plugin that declines one hook and answers
//! another makes no mixed decision.

use serde::{Deserialize, Serialize};

use crate::config::FailureKind;

/// One plugin that answered some hooks and broke on others in the same decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MixedPolicy {
    pub plugin: String,
    /// The hooks it answered (`choose-market`).
    pub answered: Vec<String>,
    /// The hooks it broke on, each with the failure kind (`select-instance (crashed)`), where
    /// another plugin decided.
    pub fell_back: Vec<String>,
}

impl MixedPolicy {
    /// One clause for the decision's summary.
    pub fn describe(&self) -> String {
        format!(
            "mixed policy: {} answered {} but fell back on {}",
            self.plugin,
            self.answered.join(", "),
            self.fell_back.join(", ")
        )
    }
}

/// A hook's plugin, and for one passed over, the failure kind (as records spell it).
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub hook: &'a str,
    pub plugin: &'a str,
    pub kind: &'a str,
}

/// Each plugin among `fallbacks` that broke on a hook while answering another: `answered`
/// is every hook's answering plugin (a merging chain's several plugins each appear; their
/// `kind` is not read).
pub fn find(answered: &[Step<'_>], fallbacks: &[Step<'_>]) -> Vec<MixedPolicy> {
    let mut mixed: Vec<MixedPolicy> = Vec::new();
    for fallback in fallbacks {
        let fault = FailureKind::parse(fallback.kind).is_some_and(FailureKind::is_fault);
        if !fault {
            continue;
        }
        let hooks: Vec<String> = answered
            .iter()
            .filter(|step| step.plugin == fallback.plugin)
            .map(|step| step.hook.to_owned())
            .collect();
        if hooks.is_empty() {
            continue;
        }
        let broke = format!("{} ({})", fallback.hook, fallback.kind);
        match mixed.iter_mut().find(|m| m.plugin == fallback.plugin) {
            Some(entry) => entry.fell_back.push(broke),
            None => mixed.push(MixedPolicy {
                plugin: fallback.plugin.to_owned(),
                answered: hooks,
                fell_back: vec![broke],
            }),
        }
    }
    mixed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered<'a>(hook: &'a str, plugin: &'a str) -> Step<'a> {
        Step {
            hook,
            plugin,
            kind: "",
        }
    }

    fn fallback<'a>(hook: &'a str, plugin: &'a str, kind: &'a str) -> Step<'a> {
        Step { hook, plugin, kind }
    }

    /// (case, who answered select-instance and choose-market, fallbacks, mixed)
    type Case<'a> = (&'a str, [&'a str; 2], Vec<Step<'a>>, Vec<MixedPolicy>);

    #[test]
    fn only_a_plugin_that_broke_on_one_hook_and_answered_another_mixes_policies() {
        let default = "orca-default-selector";
        let market = "orca-default-market";
        let cases: Vec<Case> = vec![
            (
                "team crashed on select-instance, answered the market",
                [default, "team"],
                vec![fallback("select-instance", "team", "crashed")],
                vec![MixedPolicy {
                    plugin: "team".to_owned(),
                    answered: vec!["choose-market".to_owned()],
                    fell_back: vec!["select-instance (crashed)".to_owned()],
                }],
            ),
            (
                "team timed out on the market after answering the type",
                ["team", market],
                vec![fallback("choose-market", "team", "timedOut")],
                vec![MixedPolicy {
                    plugin: "team".to_owned(),
                    answered: vec!["select-instance".to_owned()],
                    fell_back: vec!["choose-market (timedOut)".to_owned()],
                }],
            ),
            (
                "a decline is the plugin's word, not a fault",
                [default, "team"],
                vec![fallback("select-instance", "team", "declined")],
                vec![],
            ),
            (
                "no-match and unsupported are not faults either",
                [default, "team"],
                vec![
                    fallback("select-instance", "team", "noMatch"),
                    fallback("select-instance", "team", "unsupported"),
                ],
                vec![],
            ),
            (
                "a plugin that broke and answered nothing: one policy decided",
                [default, market],
                vec![fallback("select-instance", "team", "crashed")],
                vec![],
            ),
            (
                "a record written before kinds (empty) is not judged",
                [default, "team"],
                vec![fallback("select-instance", "team", "")],
                vec![],
            ),
        ];
        for (name, [select, market_by], fallbacks, expected) in cases {
            let answers = [
                answered("select-instance", select),
                answered("choose-market", market_by),
            ];
            assert_eq!(find(&answers, &fallbacks), expected, "{name}");
        }
    }

    #[test]
    fn a_plugin_broken_on_two_hooks_is_one_entry_naming_both() {
        let answers = [answered("build-tags", "team")];
        let fallbacks = [
            fallback("select-instance", "team", "crashed"),
            fallback("choose-market", "team", "failed"),
        ];
        let mixed = find(&answers, &fallbacks);
        assert_eq!(mixed.len(), 1);
        assert_eq!(
            mixed[0].describe(),
            "mixed policy: team answered build-tags but fell back on select-instance (crashed), \
             choose-market (failed)"
        );
    }
}
