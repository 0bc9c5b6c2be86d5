//! Where each pod's fleet token sequence stands: in this process's memory while it serves the
//! pod, and on the pod itself ([`FLEET_TOKENS_SPENT_ANNOTATION`]) for a restarted process or a
//! replica taking the node over; and where a launch starts from the two (see `fleet.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use std::collections::BTreeMap;

use super::super::api::FleetRequest;
use crate::provider::LaunchProgress;
use crate::support::errors::lock;

/// On the pod: how many of its fleet tokens EC2 has answered with no instance (or a forgotten
/// request's instance never showed within the grace), so that the next new request takes the
/// token after them. A restarted process resumes there (see the module's doc).
pub const FLEET_TOKENS_SPENT_ANNOTATION: &str = "orca.research/fleet-tokens-spent";

/// How many more times a process that does not remember a pod goes round its markets while
/// EC2 answers with nothing (see `launch_by_fleet`): a pod's history holds empty answers only
/// from a launch that then lost an answer, or from a missing template, so two rounds reach
/// its last token; a pod that really meets no capacity costs these requests once per restart.
pub(super) const MAX_REPLAYED_ROUNDS: u32 = 2;

/// Where each pod's token sequence stands, for pods with a launch under way.
#[derive(Default)]
pub(in super::super) struct FleetAttempts {
    by_pod: Mutex<HashMap<String, Attempt>>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Attempt {
    /// The place of the next new request in the pod's token sequence.
    pub next: u32,
    /// A request sent without a definitive answer: the next launch repeats it.
    pub unanswered: Option<FleetRequest>,
    /// Since when the current token has answered `IdempotentParameterMismatch`.
    pub mismatched_since: Option<Instant>,
}

/// Where a launch starts in the pod's token sequence, and how many more rounds of its markets
/// it may replay while EC2 answers with nothing: what this process remembers, unless the pod
/// records that its sequence went further (another process or replica served it since); else
/// the pod's record (a restart, a takeover), from which a pod older than the process may
/// still have used tokens whose answers were never recorded.
pub(super) fn resume(
    remembered: Option<Attempt>,
    recorded: Option<u32>,
    older: bool,
) -> (Attempt, u32) {
    match remembered {
        Some(attempt) if recorded.is_none_or(|recorded| recorded <= attempt.next) => (attempt, 0),
        _ => {
            let attempt = Attempt {
                next: recorded.unwrap_or(0),
                ..Attempt::default()
            };
            (attempt, if older { MAX_REPLAYED_ROUNDS } else { 0 })
        }
    }
}

/// The number of spent tokens the pod records, if it records one orca can read.
pub(super) fn recorded_spent_tokens(annotations: &BTreeMap<String, String>) -> Option<u32> {
    let value = annotations.get(FLEET_TOKENS_SPENT_ANNOTATION)?;
    match value.trim().parse() {
        Ok(spent) => Some(spent),
        Err(_) => {
            tracing::warn!(annotation = FLEET_TOKENS_SPENT_ANNOTATION, value = %value, "the pod's record of its spent fleet tokens is not a whole number from 0; walking its tokens from the first");
            None
        }
    }
}

/// What the pod is to carry after a failed launch: where its sequence stands now.
pub(super) fn progress(attempt: &Attempt) -> Option<LaunchProgress> {
    let progress = LaunchProgress {
        annotation: FLEET_TOKENS_SPENT_ANNOTATION,
        value: attempt.next.to_string(),
    };
    Some(progress)
}

impl FleetAttempts {
    pub(super) fn take(&self, uid: &str) -> Option<Attempt> {
        lock(&self.by_pod).remove(uid)
    }

    pub(super) fn keep(&self, uid: &str, attempt: Attempt) {
        lock(&self.by_pod).insert(uid.to_owned(), attempt);
    }

    /// Drops the attempts of pods not in `present`; answers how many are kept.
    pub(in super::super) fn retain(&self, present: &std::collections::HashSet<String>) -> usize {
        let mut by_pod = lock(&self.by_pod);
        by_pod.retain(|uid, _| present.contains(uid));
        crate::support::heap::shrink_when_sparse(&mut by_pod);
        by_pod.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_resumes_where_this_process_or_the_pods_record_says_the_tokens_stand() {
        let remembered = |next| Attempt {
            next,
            ..Attempt::default()
        };
        let cases = [
            // (remembered, recorded, older) → (next, replayed rounds)
            ("a pod this process serves", Some(3), None, true, (3, 0)),
            ("its record lags behind", Some(3), Some(2), true, (3, 0)),
            (
                "another replica went further",
                Some(3),
                Some(5),
                true,
                (5, MAX_REPLAYED_ROUNDS),
            ),
            (
                "a restart, with a record",
                None,
                Some(4),
                true,
                (4, MAX_REPLAYED_ROUNDS),
            ),
            (
                "a restart, without",
                None,
                None,
                true,
                (0, MAX_REPLAYED_ROUNDS),
            ),
            ("a pod newer than the process", None, None, false, (0, 0)),
        ];
        for (situation, memory, recorded, older, expected) in cases {
            let (attempt, rounds) = resume(memory.map(remembered), recorded, older);
            assert_eq!((attempt.next, rounds), expected, "{situation}");
        }
    }

    #[test]
    fn a_record_orca_cannot_read_counts_as_none() {
        for (value, read) in [
            ("3", Some(3)),
            (" 7 ", Some(7)),
            ("-1", None),
            ("many", None),
        ] {
            let annotations = [(FLEET_TOKENS_SPENT_ANNOTATION.to_owned(), value.to_owned())].into();
            assert_eq!(recorded_spent_tokens(&annotations), read, "{value:?}");
        }
    }
}
