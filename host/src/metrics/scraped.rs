//! Encoding values that are read at scrape time (from a cache or a counter map) rather than
//! recorded into a family as they happen.

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One series per `(label value, number)`, all under the same label name.
pub fn encode_by_label(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric_type: MetricType,
    label: &str,
    values: impl IntoIterator<Item = (String, u64)>,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, metric_type)?;
    for (value, number) in values {
        let labels = vec![(label.to_owned(), value)];
        let series = metric.encode_family(&labels)?;
        match metric_type {
            MetricType::Counter => ConstCounter::new(number).encode(series)?,
            _ => ConstGauge::new(i64::try_from(number).unwrap_or(i64::MAX)).encode(series)?,
        }
    }
    Ok(())
}
