//! `ClientToken`s: the same pod and offering always give the same token, so EC2 answers a
//! retried or replayed `RunInstances` (after a timeout, or a crash before the answer arrived)
//! with the instance it already launched instead of a second one.

use sha2::{Digest, Sha256};

use crate::provider::Offering;

/// At most 64 ASCII characters, as EC2 requires.
pub fn client_token(pod_uid: &str, offering: &Offering) -> String {
    let digest = Sha256::digest(format!(
        "{pod_uid}/{}/{}",
        offering.instance_type,
        offering.market.as_str()
    ));
    let hex: String = digest[..20].iter().map(|b| format!("{b:02x}")).collect();
    format!("orca-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Market;

    fn offering(instance_type: &str, market: Market) -> Offering {
        Offering {
            instance_type: instance_type.to_owned(),
            market,
        }
    }

    #[test]
    fn a_token_is_stable_per_pod_and_offering_and_differs_otherwise() {
        let uid = "4f1c2b9e-0000-4000-8000-000000000001";
        let token = client_token(uid, &offering("m5.large", Market::Spot));
        assert_eq!(
            token,
            client_token(uid, &offering("m5.large", Market::Spot))
        );
        assert!(token.len() <= 64 && token.is_ascii());
        assert_ne!(
            token,
            client_token(uid, &offering("m5.large", Market::OnDemand))
        );
        assert_ne!(
            token,
            client_token(uid, &offering("m6i.large", Market::Spot))
        );
        assert_ne!(
            token,
            client_token("another-uid", &offering("m5.large", Market::Spot))
        );
    }
}
