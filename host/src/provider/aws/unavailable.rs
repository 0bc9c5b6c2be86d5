//! Offerings that recently answered with a capacity error are skipped for a while, so a burst
//! of pods does not ask EC2 the same failing question a thousand times (Karpenter's
//! unavailable-offerings cache). A pod's last offering is asked whatever the cache says (see
//! `AwsProvider::create`): the cache saves requests, it never decides a pod's fate.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::errors::lock;
use crate::provider::{Offering, ProviderError};

pub struct UnavailableOfferings {
    ttl: Duration,
    entries: Mutex<HashMap<Offering, (Instant, ProviderError)>>,
}

impl UnavailableOfferings {
    pub fn new(ttl: Duration) -> UnavailableOfferings {
        UnavailableOfferings {
            ttl,
            entries: Mutex::new(HashMap::new()),
        }
    }

    pub fn mark(&self, offering: &Offering, error: &ProviderError) {
        lock(&self.entries).insert(offering.clone(), (Instant::now(), error.clone()));
    }

    /// The error that made `offering` unavailable, while it still counts.
    pub fn check(&self, offering: &Offering) -> Option<ProviderError> {
        let mut entries = lock(&self.entries);
        let (since, error) = entries.get(offering)?;
        let age = since.elapsed();
        if age >= self.ttl {
            entries.remove(offering);
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
    use crate::plan::Market;

    #[test]
    fn a_marked_offering_is_skipped_until_the_ttl_runs_out() {
        let offering = Offering {
            instance_type: "p5.48xlarge".to_owned(),
            market: Market::Spot,
        };
        let error = ProviderError::capacity("InsufficientInstanceCapacity", "no p5 in us-east-1a");
        let cache = UnavailableOfferings::new(Duration::from_millis(50));
        assert!(cache.check(&offering).is_none());
        cache.mark(&offering, &error);
        let skipped = cache.check(&offering).unwrap();
        assert_eq!(skipped.code, "InsufficientInstanceCapacity");
        assert!(skipped.message.starts_with("no p5 in us-east-1a"));
        let other_market = Offering {
            market: Market::OnDemand,
            ..offering.clone()
        };
        assert!(cache.check(&other_market).is_none());
        std::thread::sleep(Duration::from_millis(60));
        assert!(cache.check(&offering).is_none());
    }
}
