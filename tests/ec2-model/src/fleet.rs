//! The CreateFleet request for an EC2 Fleet of type `instant` with a target
//! capacity of one instance, and the checks EC2 makes on it before anything
//! else.

use std::collections::BTreeMap;

use crate::checks;
use crate::error::Ec2Error;
use crate::template::LaunchTemplateRef;
use crate::token::Idempotent;

/// EC2's limit on launch template overrides in one request.
const MAX_POOLS: usize = 300;

/// In which order the fleet tries its pools (see EC2's allocation
/// strategies). Spot and on-demand share the names the model needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationStrategy {
    /// The cheapest pool first.
    LowestPrice,
    /// The cheapest of the pools with capacity (EC2's recommended spot
    /// strategy).
    PriceCapacityOptimized,
    /// A pool with capacity, whatever its price.
    CapacityOptimized,
    /// The pools in the order of their `priority`.
    Prioritized,
}

/// One launch template override: an instance type in a subnet.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetPool {
    pub instance_type: String,
    /// `None` (or an unknown subnet): the default zone, as for RunInstances.
    pub subnet_id: Option<String>,
    /// For [`AllocationStrategy::Prioritized`]: lower is tried first; pools
    /// without one come after every pool with one. EC2 takes whole numbers
    /// from 0.
    pub priority: Option<f64>,
}

/// A request for an instant fleet of one instance.
#[derive(Clone, Debug, PartialEq)]
pub struct CreateFleet {
    /// The idempotency token (up to 64 ASCII characters). An empty token
    /// counts as none.
    pub client_token: Option<String>,
    /// The fleet's market: every pool is spot, or every pool on-demand.
    pub spot: bool,
    pub allocation_strategy: AllocationStrategy,
    /// The launch template overrides, in the caller's order.
    pub pools: Vec<FleetPool>,
    /// The spot max price (USD per hour); ignored for on-demand fleets, but
    /// still compared for idempotency.
    pub max_price: Option<f64>,
    /// TagSpecifications: put on the instance and on the fleet.
    pub tags: BTreeMap<String, String>,
    /// The launch template version the fleet launches from; `None`: one the caller does not
    /// model (the fingerprint stands for it).
    pub launch_template: Option<LaunchTemplateRef>,
    /// An opaque digest of every other parameter (AMI, user data, …),
    /// compared for idempotency as [`crate::RunInstances::fingerprint`] is.
    pub fingerprint: String,
}

impl CreateFleet {
    /// The idempotency token, if one was really given.
    pub(crate) fn token(&self) -> Option<&str> {
        checks::token(self.client_token.as_deref())
    }

    /// The checks EC2 makes before acting: the same as RunInstances' on the
    /// token, the max price and the tags, and the pools'.
    ///
    /// # Errors
    /// `InvalidParameterValue` for no pools, more than 300 pools, a pool
    /// with an empty instance type or a priority that is not a whole number
    /// from 0, a token that is too long or not ASCII, a spot max price that
    /// is not a positive number, or a bad tag; `TagLimitExceeded` for more
    /// than 50 tags.
    pub(crate) fn validate(&self) -> Result<(), Ec2Error> {
        if self.pools.is_empty() {
            return Err(Ec2Error::invalid_parameter(
                "The fleet must have at least one launch template override.",
            ));
        }
        if self.pools.len() > MAX_POOLS {
            return Err(Ec2Error::invalid_parameter(format!(
                "The fleet has {} launch template overrides; the limit is {MAX_POOLS}.",
                self.pools.len()
            )));
        }
        for pool in &self.pools {
            checks::check_instance_type(&pool.instance_type)?;
            if let Some(priority) = pool.priority
                && !(priority.is_finite() && priority >= 0.0 && priority.fract() == 0.0)
            {
                return Err(Ec2Error::invalid_parameter(format!(
                    "Value ({priority}) for parameter Priority is invalid. Valid values are whole numbers starting at 0."
                )));
            }
        }
        checks::check_token(self.token())?;
        checks::check_max_price(self.spot, self.max_price)?;
        checks::check_tags(&self.tags)
    }
}

impl Idempotent for CreateFleet {
    /// Every parameter but the token; numbers by bits, so that a request
    /// always equals itself.
    fn same_parameters(&self, other: &CreateFleet) -> bool {
        self.spot == other.spot
            && self.allocation_strategy == other.allocation_strategy
            && self.pools.len() == other.pools.len()
            && self.pools.iter().zip(&other.pools).all(|(a, b)| {
                a.instance_type == b.instance_type
                    && a.subnet_id == b.subnet_id
                    && checks::same_number(a.priority, b.priority)
            })
            && checks::same_number(self.max_price, other.max_price)
            && self.tags == other.tags
            && self.launch_template == other.launch_template
            && self.fingerprint == other.fingerprint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(instance_type: &str) -> FleetPool {
        FleetPool {
            instance_type: instance_type.to_owned(),
            subnet_id: None,
            priority: None,
        }
    }

    fn request() -> CreateFleet {
        CreateFleet {
            client_token: Some("pod-uid-1".to_owned()),
            spot: true,
            allocation_strategy: AllocationStrategy::LowestPrice,
            pools: vec![pool("m7i.large"), pool("m6i.large")],
            max_price: None,
            tags: BTreeMap::new(),
            launch_template: None,
            fingerprint: "lt-1".to_owned(),
        }
    }

    #[test]
    fn the_token_is_not_a_parameter_but_the_pools_and_their_order_are() {
        let mut other = request();
        other.client_token = None;
        assert!(request().same_parameters(&other));
        other.pools.reverse();
        assert!(!request().same_parameters(&other));
        let mut other = request();
        other.pools[0].priority = Some(1.0);
        assert!(!request().same_parameters(&other));
        let mut other = request();
        other.allocation_strategy = AllocationStrategy::CapacityOptimized;
        assert!(!request().same_parameters(&other));
        let mut nan = request();
        nan.max_price = Some(f64::NAN);
        assert!(nan.same_parameters(&nan.clone()));
    }

    #[test]
    fn garbage_pools_are_refused_with_ec2_codes() {
        let code = |request: CreateFleet| request.validate().err().map(|e| e.code);
        let invalid = Some("InvalidParameterValue".to_owned());
        let mut bad = request();
        bad.pools.clear();
        assert_eq!(code(bad), invalid);
        let mut bad = request();
        bad.pools = vec![pool("m7i.large"); 301];
        assert_eq!(code(bad), invalid);
        let mut bad = request();
        bad.pools.push(pool(" "));
        assert_eq!(code(bad), invalid);
        for priority in [f64::NAN, -1.0, 0.5, f64::INFINITY] {
            let mut bad = request();
            bad.pools[1].priority = Some(priority);
            assert_eq!(code(bad), invalid, "{priority}");
        }
        let mut fine = request();
        fine.pools = vec![pool("m7i.large"); 300];
        fine.pools[0].priority = Some(0.0);
        assert_eq!(fine.validate(), Ok(()));
    }
}
