//! A value for a container's environment or command line: text known at launch, with pieces
//! only the instance knows (its IP, its CPU count) filled in on the instance when it boots.

use serde::{Deserialize, Serialize};

/// Text, possibly containing facts only the instance knows.
///
/// A value is a sequence of parts so that `$(VAR)` expansion works across them as the kubelet's
/// does: `ADDR=$(POD_IP):8080` is the instance's IP followed by the text `:8080`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvValue {
    parts: Vec<EnvPart>,
}

/// One piece of an [`EnvValue`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum EnvPart {
    /// Text, passed to the container byte for byte.
    Literal(String),
    /// Filled in on the instance when it boots.
    Instance(InstanceFact),
}

/// What only the instance knows; it is read on the instance at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum InstanceFact {
    /// The instance's private IP (IPv4, else IPv6). Containers use the host's network, so it is
    /// `status.podIP`, `status.podIPs`, `status.hostIP` and `status.hostIPs` alike.
    Ip,
    /// The instance's CPUs, in millicores divided by `divisor_millis` and rounded up: what the
    /// kubelet reports for `limits.cpu` when a container sets no CPU limit (node allocatable).
    Cpu { divisor_millis: u64 },
    /// The instance's memory in bytes divided by `divisor_bytes`, rounded up (unset
    /// `limits.memory`).
    Memory { divisor_bytes: u64 },
    /// The size in bytes of the file system that holds the pod's containers and emptyDir
    /// volumes (the instance store's scratch when the bootstrap set one up, else the root file
    /// system) divided by `divisor_bytes`, rounded up (unset `limits.ephemeral-storage`).
    EphemeralStorage { divisor_bytes: u64 },
}

impl EnvValue {
    /// Plain text.
    pub fn literal(text: impl Into<String>) -> EnvValue {
        let mut value = EnvValue::default();
        value.push_str(&text.into());
        value
    }

    /// A fact the instance fills in.
    pub fn instance(fact: InstanceFact) -> EnvValue {
        EnvValue {
            parts: vec![EnvPart::Instance(fact)],
        }
    }

    /// The parts in order; adjacent text is always merged into one [`EnvPart::Literal`], and
    /// the empty value has no parts.
    pub fn parts(&self) -> &[EnvPart] {
        &self.parts
    }

    /// The text, when the value has no instance facts.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [EnvPart::Literal(text)] => Some(text),
            _ => None,
        }
    }

    pub(crate) fn push_str(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        if let Some(EnvPart::Literal(last)) = self.parts.last_mut() {
            last.push_str(text);
        } else {
            self.parts.push(EnvPart::Literal(text.to_owned()));
        }
    }

    pub(crate) fn append(&mut self, other: &EnvValue) {
        for part in &other.parts {
            match part {
                EnvPart::Literal(text) => self.push_str(text),
                EnvPart::Instance(fact) => self.parts.push(EnvPart::Instance(*fact)),
            }
        }
    }
}

/// Expands `$(VAR)` references as Kubernetes does (`third_party/forked/golang/expansion`):
///
/// - `$(VAR)` becomes VAR's value when `lookup` knows VAR, and stays `$(VAR)` otherwise;
/// - `$$` becomes `$`, so `$$(VAR)` is the text `$(VAR)`;
/// - any other `$`, an unclosed `$(` included, is kept as written.
///
/// Values from `lookup` are inserted as they are, never expanded again.
pub(crate) fn expand<'v>(input: &str, lookup: impl Fn(&str) -> Option<&'v EnvValue>) -> EnvValue {
    let mut out = EnvValue::default();
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(escaped) = after.strip_prefix('$') {
            out.push_str("$");
            rest = escaped;
        } else if let Some(reference) = after.strip_prefix('(') {
            match reference.split_once(')') {
                Some((name, tail)) => {
                    match lookup(name) {
                        Some(value) => out.append(value),
                        None => out.push_str(&format!("$({name})")),
                    }
                    rest = tail;
                }
                None => {
                    out.push_str("$(");
                    rest = reference;
                }
            }
        } else {
            out.push_str("$");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn expand_with(input: &str, vars: &[(&str, EnvValue)]) -> EnvValue {
        let vars: HashMap<&str, EnvValue> = vars.iter().cloned().collect();
        expand(input, |name| vars.get(name))
    }

    fn text(input: &str, vars: &[(&str, &str)]) -> String {
        let vars: Vec<(&str, EnvValue)> = vars
            .iter()
            .map(|(k, v)| (*k, EnvValue::literal(*v)))
            .collect();
        expand_with(input, &vars).as_literal().unwrap().to_owned()
    }

    #[test]
    fn known_references_are_replaced() {
        assert_eq!(text("$(A)-$(B)", &[("A", "x"), ("B", "y")]), "x-y");
        assert_eq!(text("pre$(A)post", &[("A", "x")]), "prexpost");
    }

    #[test]
    fn unknown_references_stay_as_written() {
        assert_eq!(text("$(MISSING)/bin", &[]), "$(MISSING)/bin");
        assert_eq!(text("$()", &[]), "$()");
    }

    #[test]
    fn a_doubled_dollar_escapes_a_reference() {
        assert_eq!(text("$$(A)", &[("A", "x")]), "$(A)");
        assert_eq!(text("$$$(A)", &[("A", "x")]), "$x");
        assert_eq!(text("cost: $$5", &[]), "cost: $5");
    }

    #[test]
    fn other_dollars_are_kept() {
        assert_eq!(text("$HOME ${A} $", &[("A", "x")]), "$HOME ${A} $");
        assert_eq!(text("$(A", &[("A", "x")]), "$(A");
        assert_eq!(text("$(A$(A)", &[("A", "x")]), "$(A$(A)");
        assert_eq!(text("é$é", &[]), "é$é");
    }

    #[test]
    fn expanded_values_are_not_expanded_again() {
        assert_eq!(text("$(A)", &[("A", "$(B)"), ("B", "no")]), "$(B)");
    }

    #[test]
    fn instance_facts_survive_expansion_between_text() {
        let ip = EnvValue::instance(InstanceFact::Ip);
        let value = expand_with("http://$(IP):80$(IP)", &[("IP", ip)]);
        assert_eq!(
            value.parts(),
            [
                EnvPart::Literal("http://".into()),
                EnvPart::Instance(InstanceFact::Ip),
                EnvPart::Literal(":80".into()),
                EnvPart::Instance(InstanceFact::Ip),
            ]
        );
        assert_eq!(value.as_literal(), None);
    }

    #[test]
    fn the_empty_value_is_literal_empty_text() {
        assert_eq!(EnvValue::literal("").as_literal(), Some(""));
        assert!(EnvValue::literal("").parts().is_empty());
    }
}
