//! Counting every HTTP request orca makes to EC2, by operation: pages and SDK retries each
//! count, as they do against the account's request limits. An SDK interceptor sees them all.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_ec2::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_ec2::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;

use crate::support::errors::lock;

/// Requests sent to EC2 so far, by operation name (`RunInstances`, `DescribeInstances`, …).
#[derive(Debug, Default)]
pub struct Ec2Calls {
    counts: Mutex<BTreeMap<String, u64>>,
}

impl Ec2Calls {
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        lock(&self.counts).clone()
    }

    pub fn total(&self) -> u64 {
        lock(&self.counts).values().sum()
    }

    fn record(&self, operation: &str) {
        *lock(&self.counts).entry(operation.to_owned()).or_default() += 1;
    }
}

/// The interceptor that feeds [`Ec2Calls`].
#[derive(Debug)]
pub(super) struct CountRequests(pub Arc<Ec2Calls>);

impl Intercept for CountRequests {
    fn name(&self) -> &'static str {
        "OrcaCountRequests"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg
            .load::<Metadata>()
            .map_or("Unknown", |metadata| metadata.name());
        self.0.record(operation);
        Ok(())
    }
}
