//! An in-memory CloudWatch that answers `GetMetricData` as the service documents it: at most
//! 500 metrics a call (`ValidationError` past that), a metric found only by its namespace,
//! name and exact set of dimensions, its datapoints in `[start, end)` reduced to the `Maximum`
//! of each period (periods counted from `start`), newest first; a refusal can be queued.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use jiff::Timestamp;

use super::{CloudWatchApi, CloudWatchError, DataRequest, MAX_QUERIES_PER_CALL, Series};
use crate::provider::Sample;

struct Datum {
    namespace: String,
    metric: String,
    dimensions: Vec<(String, String)>,
    sample: Sample,
}

#[derive(Default)]
struct State {
    data: Vec<Datum>,
    calls: Vec<DataRequest>,
    refusals: VecDeque<CloudWatchError>,
}

#[derive(Default)]
pub struct FakeCloudWatch {
    state: Mutex<State>,
}

impl FakeCloudWatch {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What an instance's `PutMetricData` does: one datapoint.
    pub fn put(
        &self,
        namespace: &str,
        metric: &str,
        dimensions: &[(&str, &str)],
        at: Timestamp,
        value: f64,
    ) {
        let mut dimensions: Vec<(String, String)> = dimensions
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        dimensions.sort();
        self.state().data.push(Datum {
            namespace: namespace.to_owned(),
            metric: metric.to_owned(),
            dimensions,
            sample: Sample { at, value },
        });
    }

    /// The next call fails with `error`.
    pub fn refuse_next(&self, error: CloudWatchError) {
        self.state().refusals.push_back(error);
    }

    /// Every `GetMetricData` call so far.
    pub fn calls(&self) -> Vec<DataRequest> {
        self.state().calls.clone()
    }
}

#[async_trait]
impl CloudWatchApi for FakeCloudWatch {
    async fn get_metric_data(&self, request: &DataRequest) -> Result<Vec<Series>, CloudWatchError> {
        let mut state = self.state();
        state.calls.push(request.clone());
        if let Some(error) = state.refusals.pop_front() {
            return Err(error);
        }
        if request.queries.len() > MAX_QUERIES_PER_CALL {
            return Err(CloudWatchError::classify(
                "ValidationError",
                "The collection MetricDataQueries must not have a size greater than 500.",
            ));
        }
        if request.start >= request.end {
            return Err(CloudWatchError::classify(
                "ValidationError",
                "The parameter EndTime must be greater than StartTime.",
            ));
        }
        let period = i64::from(request.period_seconds.max(1));
        let series = request
            .queries
            .iter()
            .map(|query| {
                let mut wanted: Vec<(String, String)> = query
                    .dimensions
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect();
                wanted.sort();
                let mut buckets: Vec<(i64, f64)> = Vec::new();
                for datum in state.data.iter().filter(|d| {
                    d.namespace == request.namespace
                        && d.metric == query.metric
                        && d.dimensions == wanted
                        && d.sample.at >= request.start
                        && d.sample.at < request.end
                }) {
                    let offset = datum.sample.at.as_second() - request.start.as_second();
                    let bucket = request.start.as_second() + offset.div_euclid(period) * period;
                    match buckets.iter_mut().find(|(at, _)| *at == bucket) {
                        Some((_, max)) => *max = max.max(datum.sample.value),
                        None => buckets.push((bucket, datum.sample.value)),
                    }
                }
                buckets.sort_by_key(|bucket| std::cmp::Reverse(bucket.0));
                Series {
                    id: query.id.clone(),
                    points: buckets
                        .into_iter()
                        .map(|(at, value)| Sample {
                            at: Timestamp::from_second(at).unwrap_or(request.start),
                            value,
                        })
                        .collect(),
                }
            })
            .collect();
        Ok(series)
    }
}
