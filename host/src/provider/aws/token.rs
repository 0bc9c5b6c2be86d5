//! `ClientToken`s: one per pod, derived from its UID alone, so every `RunInstances` for the
//! pod (a retry after a timeout, a replay after a crash, the next offering after a capacity
//! error, a plan that changed meanwhile) carries the same token. EC2 remembers a token whose
//! request succeeded (for at least 24 hours after the instance terminates) and answers it
//! with that instance (same parameters) or `IdempotentParameterMismatch` (other parameters);
//! a failed request does not use the token up. So the pod gets at most one instance, whatever
//! happens between the calls.

use sha2::{Digest, Sha256};

/// At most 64 ASCII characters, as EC2 requires.
pub fn client_token(pod_uid: &str) -> String {
    let digest = Sha256::digest(format!("orca-launch/{pod_uid}"));
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("orca-{hex}")
}

/// The token of the pod's `n`th fleet request. An instant fleet's token is used up by its
/// first answer, even one that launched nothing (unlike `RunInstances`), so a pod needs a
/// sequence: the same `n` repeats a request whose answer was lost, word for word; the next `n`
/// is taken only after EC2 answered `n` with no instance. Derived from the pod UID alone, so a
/// restart walks the same sequence again: EC2 answers each used token as it did before.
pub fn fleet_token(pod_uid: &str, n: u32) -> String {
    let digest = Sha256::digest(format!("orca-fleet/{pod_uid}/{n}"));
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("orca-f-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_stable_per_pod_and_differs_between_pods() {
        let uid = "4f1c2b9e-0000-4000-8000-000000000001";
        let token = client_token(uid);
        assert_eq!(token, client_token(uid));
        assert!(token.len() <= 64 && token.is_ascii());
        assert_ne!(token, client_token("another-uid"));
    }

    #[test]
    fn fleet_tokens_are_a_sequence_per_pod() {
        let uid = "4f1c2b9e-0000-4000-8000-000000000001";
        let first = fleet_token(uid, 0);
        assert_eq!(first, fleet_token(uid, 0));
        assert!(first.len() <= 64 && first.is_ascii());
        assert_ne!(first, fleet_token(uid, 1));
        assert_ne!(first, fleet_token("another-uid", 0));
        assert_ne!(first, client_token(uid));
    }
}
