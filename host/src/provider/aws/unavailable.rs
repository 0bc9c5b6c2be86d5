//! Pools (offering × subnet, so type × market × zone) that recently answered with a capacity
//! error are skipped for a while, so a burst of pods does not ask EC2 the same failing
//! question a thousand times (Karpenter's unavailable-offerings cache). The key is what the
//! error is about: capacity is per type, market and zone; a pod-specific refusal such as
//! `SpotMaxPriceTooLow` (the pod's own max price) is never marked. A pod's last offering is
//! asked whatever the cache says (see `AwsProvider::create`): the cache saves requests, it
//! never decides a pod's fate. Only the `runInstances` walk reads it: a fleet offers every
//! pool, since a request must be one a restarted process can build again (see `fleet.rs`),
//! and the cache lives in memory.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::provider::{Offering, ProviderError};
use crate::support::errors::lock;

/// Codes about the request that met them rather than about capacity others would meet too.
const POD_SPECIFIC: [&str; 1] = ["SpotMaxPriceTooLow"];

/// An offering in one subnet (one zone); `None`: the default subnet.
type Pool = (Offering, Option<String>);

pub struct UnavailableOfferings {
    ttl: Duration,
    entries: Mutex<HashMap<Pool, (Instant, ProviderError)>>,
}

impl UnavailableOfferings {
    pub fn new(ttl: Duration) -> UnavailableOfferings {
        UnavailableOfferings {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// Remembers a capacity refusal of `offering` in `subnet`, unless it was about the pod.
    pub fn mark(&self, offering: &Offering, subnet: Option<&str>, error: &ProviderError) {
        if POD_SPECIFIC.contains(&error.code.as_str()) {
            return;
        }
        let pool = (offering.clone(), subnet.map(str::to_owned));
        lock(&self.entries).insert(pool, (Instant::now(), error.clone()));
    }

    /// The error that made `offering` in `subnet` unavailable, while it still counts.
    pub fn check(&self, offering: &Offering, subnet: Option<&str>) -> Option<ProviderError> {
        let pool = (offering.clone(), subnet.map(str::to_owned));
        let mut entries = lock(&self.entries);
        let (since, error) = entries.get(&pool)?;
        let age = since.elapsed();
        if age >= self.ttl {
            entries.remove(&pool);
            return None;
        }
        Some(ProviderError {
            message: format!(
                "{} (answered {}s ago; skipped for {}s)",
                error.message,
                age.as_secs(),
                self.ttl.as_secs()
            ),
            ..error.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::plan::Market;

    #[test]
    fn a_marked_offering_is_skipped_until_the_ttl_runs_out() {
        let offering = Offering {
            instance_type: "p5.48xlarge".to_owned(),
            market: Market::Spot,
        };
        let error = ProviderError::capacity("InsufficientInstanceCapacity", "no p5 in us-east-1a");
        let cache = UnavailableOfferings::new(Duration::from_millis(50));
        let subnet = Some("subnet-0a0a0a0a");
        assert!(cache.check(&offering, subnet).is_none());
        cache.mark(&offering, subnet, &error);
        let skipped = cache.check(&offering, subnet).unwrap();
        assert_eq!(skipped.code, "InsufficientInstanceCapacity");
        assert!(skipped.message.starts_with("no p5 in us-east-1a"));
        let other_market = Offering {
            market: Market::OnDemand,
            ..offering.clone()
        };
        assert!(cache.check(&other_market, subnet).is_none());
        assert!(
            cache.check(&offering, Some("subnet-0b0b0b0b")).is_none(),
            "another zone has its own capacity"
        );
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.check(&offering, subnet).is_none());
    }

    #[test]
    fn a_refusal_about_the_pods_own_max_price_is_not_shared() {
        let offering = Offering {
            instance_type: "m5.large".to_owned(),
            market: Market::Spot,
        };
        let cache = UnavailableOfferings::new(Duration::from_secs(60));
        let error = ProviderError::capacity("SpotMaxPriceTooLow", "max price 0.01 < 0.04");
        cache.mark(&offering, None, &error);
        assert!(cache.check(&offering, None).is_none());
    }
}
