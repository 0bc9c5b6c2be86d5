//! Whether a Lease, as the apiserver last showed it, lets this replica serve its node.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;

/// How long before the Lease's expiry (on this replica's clock) the holder stops serving on
/// its own, so that a renewal that never got through cannot leave two replicas serving one
/// node: the other replica takes the Lease only once it has expired on its clock.
pub const STOP_BEFORE_EXPIRY: Duration = Duration::from_secs(2);

/// `identity` holds `lease` at `now`: it is the holder and the last renewal, plus the Lease's
/// duration, less [`STOP_BEFORE_EXPIRY`], is still ahead.
pub fn holds(lease: &Lease, identity: &str, now: Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    if spec.holder_identity.as_deref() != Some(identity) {
        return false;
    }
    let (Some(renewed), Some(seconds)) = (
        spec.renew_time.as_ref().or(spec.acquire_time.as_ref()),
        spec.lease_duration_seconds,
    ) else {
        return false;
    };
    let Ok(seconds) = u64::try_from(seconds) else {
        return false;
    };
    let valid_for = Duration::from_secs(seconds).saturating_sub(STOP_BEFORE_EXPIRY);
    let Ok(valid_for) = jiff::SignedDuration::try_from(valid_for) else {
        return false;
    };
    renewed
        .0
        .checked_add(valid_for)
        .is_ok_and(|until| now < until)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    fn lease(holder: Option<&str>, renewed: Option<Timestamp>, seconds: Option<i32>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: renewed.map(MicroTime),
                lease_duration_seconds: seconds,
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn held_by_us_until_shortly_before_it_expires() {
        let renewed: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let at = |seconds: i64| renewed + jiff::SignedDuration::from_secs(seconds);
        let ours = lease(Some("orca-0"), Some(renewed), Some(10));
        assert!(holds(&ours, "orca-0", at(0)));
        assert!(holds(&ours, "orca-0", at(7)));
        assert!(!holds(&ours, "orca-0", at(8)), "stopped 2 s before expiry");
        assert!(!holds(&ours, "orca-1", at(1)), "another replica's");
    }

    #[test]
    fn an_incomplete_lease_is_not_held() {
        let now: Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        assert!(!holds(&Lease::default(), "orca-0", now));
        assert!(!holds(&lease(None, Some(now), Some(10)), "orca-0", now));
        assert!(!holds(
            &lease(Some("orca-0"), None, Some(10)),
            "orca-0",
            now
        ));
        assert!(!holds(
            &lease(Some("orca-0"), Some(now), None),
            "orca-0",
            now
        ));
        assert!(!holds(
            &lease(Some("orca-0"), Some(now), Some(-5)),
            "orca-0",
            now
        ));
    }
}
