//! EC2 calls: each `Ec2Api` call by operation and result code with its latency (retries
//! included), and the HTTP requests beneath them (pages and retries each count, as they do
//! against the account's request limits).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::scraped::encode_by_label;
use crate::provider::aws::Ec2Calls;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Ec2CallLabels {
    pub operation: String,
    /// `ok`, or EC2's error code (`InsufficientInstanceCapacity`, …), or `RequestFailed` when
    /// no answer came.
    pub code: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    pub operation: String,
}

pub struct Ec2Metrics {
    calls: Family<Ec2CallLabels, Counter>,
    durations: Family<OperationLabels, Histogram>,
}

impl Ec2Metrics {
    pub fn register(registry: &mut Registry) -> Ec2Metrics {
        let calls = Family::default();
        let durations: Family<OperationLabels, Histogram> = Family::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ])
        });
        registry.register(
            "orca_ec2_calls",
            "EC2 API calls by operation and result code (ok or EC2's error code)",
            calls.clone(),
        );
        registry.register(
            "orca_ec2_call_duration_seconds",
            "Time of one EC2 API call by operation, SDK retries and pages included",
            durations.clone(),
        );
        Ec2Metrics { calls, durations }
    }

    pub fn record(&self, operation: &str, code: &str, elapsed: Duration) {
        self.calls
            .get_or_create(&Ec2CallLabels {
                operation: operation.to_owned(),
                code: code.to_owned(),
            })
            .inc();
        self.durations
            .get_or_create(&OperationLabels {
                operation: operation.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }
}

/// The SDK interceptor's counts, read at scrape time.
#[derive(Debug)]
pub(super) struct Ec2Requests(pub Arc<Ec2Calls>);

impl Collector for Ec2Requests {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_by_label(
            &mut encoder,
            "orca_ec2_requests",
            "HTTP requests sent to EC2 by operation, pages and SDK retries included",
            MetricType::Counter,
            "operation",
            self.0.snapshot(),
        )
    }
}
