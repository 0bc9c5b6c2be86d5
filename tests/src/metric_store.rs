//! A CloudWatch endpoint for scale benches: `PutMetricData` and `GetMetricData` in the query
//! protocol aws-sdk-cloudwatch 1.99 speaks, answered from memory, with every call recorded as
//! the recording [`crate::proxy::Proxy`] records them.
//!
//! moto 5.2.5 cannot stand in at a thousand pods: its `GetMetricData` scans every datum it
//! holds for each query (and, with dimensions, across namespaces), so one call of 500
//! queries takes seconds and a read of a thousand pods' figures does not finish within an
//! interval. This store keeps each series' points by time and answers a call in
//! milliseconds, so what a bench measures is orca's side of the read.
//!
//! # What it implements
//! - `PutMetricData`: `Namespace`, and per datum `MetricName`, `Dimensions`, `Timestamp`
//!   (absent: now) and `Value`.
//! - `GetMetricData`: up to 500 `MetricStat` queries (namespace, metric, dimensions, period,
//!   `Maximum`, `Minimum`, `Average`, `Sum` or `SampleCount`) between `StartTime` and
//!   `EndTime`, one point per period that has data, newest first, every result
//!   `Complete`.
//!
//! Anything else (metric math, `Values`/`Counts` data, other actions, a period that is not a
//! positive multiple of 1 s) is refused with HTTP 400 in CloudWatch's error XML, never
//! ignored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use jiff::Timestamp;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::proxy::{Seen, operation, serve};

type Body =
    http_body_util::combinators::UnsyncBoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// CloudWatch's most queries in one `GetMetricData`.
const MAX_QUERIES: usize = 500;

/// A series: namespace, metric name, and its dimensions sorted by name.
type SeriesKey = (String, String, Vec<(String, String)>);

#[derive(Default)]
struct State {
    /// Each series' points, as (second, value).
    series: Mutex<HashMap<SeriesKey, Vec<(i64, f64)>>>,
    seen: Mutex<Vec<Seen>>,
}

/// A running store; it stops when dropped.
pub struct MetricStore {
    url: String,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Drop for MetricStore {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MetricStore {
    /// Listens on a free port of 127.0.0.1.
    ///
    /// # Errors
    /// No port could be bound.
    pub async fn start() -> Result<MetricStore> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the metric store")?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(State::default());
        let served = state.clone();
        let task = serve(listener, move |request| {
            let state = served.clone();
            async move { state.handle(request).await }
        });
        Ok(MetricStore { url, state, task })
    }

    /// The endpoint, for `endpointUrl` and the SDK's `endpoint_url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The calls since `since` whose operation is one of `operations`, in arrival order.
    pub fn calls_since(&self, since: Timestamp, operations: &[&str]) -> Vec<Seen> {
        let seen = self.state.seen.lock().expect("metric store lock");
        seen.iter()
            .filter(|call| call.at >= since)
            .filter(|call| {
                call.operation
                    .as_deref()
                    .is_some_and(|name| operations.contains(&name))
            })
            .cloned()
            .collect()
    }
}

/// One `GetMetricData` query.
#[derive(Debug, Clone, PartialEq)]
struct Query {
    id: String,
    key: SeriesKey,
    period: i64,
    stat: Stat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stat {
    Maximum,
    Minimum,
    Average,
    Sum,
    SampleCount,
}

impl Stat {
    fn parse(text: &str) -> Option<Stat> {
        Some(match text {
            "Maximum" => Stat::Maximum,
            "Minimum" => Stat::Minimum,
            "Average" => Stat::Average,
            "Sum" => Stat::Sum,
            "SampleCount" => Stat::SampleCount,
            _ => return None,
        })
    }

    fn of(self, values: &[f64]) -> f64 {
        let sum: f64 = values.iter().sum();
        match self {
            Stat::Maximum => values.iter().copied().fold(f64::MIN, f64::max),
            Stat::Minimum => values.iter().copied().fold(f64::MAX, f64::min),
            Stat::Average => sum / values.len() as f64,
            Stat::Sum => sum,
            Stat::SampleCount => values.len() as f64,
        }
    }
}

/// A refusal, as CloudWatch words it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    code: &'static str,
    message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

/// The form's parameters, by name (each given once in the query protocol).
fn parameters(body: &[u8]) -> BTreeMap<String, String> {
    form_urlencoded::parse(body)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect()
}

/// The members `prefix.member.1`, `prefix.member.2`, … present, in order.
fn members(form: &BTreeMap<String, String>, prefix: &str) -> Vec<String> {
    (1..)
        .map(|n| format!("{prefix}.member.{n}"))
        .take_while(|member| {
            let start = format!("{member}.");
            form.range(start.clone()..)
                .next()
                .is_some_and(|(key, _)| key.starts_with(&start))
        })
        .collect()
}

fn dimensions(form: &BTreeMap<String, String>, prefix: &str) -> Vec<(String, String)> {
    let mut dimensions: Vec<(String, String)> = members(form, &format!("{prefix}.Dimensions"))
        .into_iter()
        .filter_map(|member| {
            Some((
                form.get(&format!("{member}.Name"))?.clone(),
                form.get(&format!("{member}.Value"))?.clone(),
            ))
        })
        .collect();
    dimensions.sort();
    dimensions
}

fn time(form: &BTreeMap<String, String>, name: &str) -> Result<i64, Refusal> {
    let text = form
        .get(name)
        .ok_or_else(|| refuse("MissingParameter", format!("{name} is required")))?;
    text.parse::<Timestamp>()
        .map(|at| at.as_second())
        .map_err(|e| refuse("InvalidParameterValue", format!("{name} {text:?}: {e}")))
}

/// The queries of a `GetMetricData` form, and its window `[start, end)` in seconds.
fn queries(form: &BTreeMap<String, String>) -> Result<(Vec<Query>, i64, i64), Refusal> {
    let start = time(form, "StartTime")?;
    let end = time(form, "EndTime")?;
    let members = members(form, "MetricDataQueries");
    if members.is_empty() || members.len() > MAX_QUERIES {
        return Err(refuse(
            "InvalidParameterValue",
            format!("1 to {MAX_QUERIES} queries, not {}", members.len()),
        ));
    }
    let mut queries = Vec::new();
    for member in members {
        let get = |name: &str| form.get(&format!("{member}.{name}")).cloned();
        if get("Expression").is_some() {
            return Err(refuse(
                "InvalidParameterValue",
                "metric math is not implemented by this store",
            ));
        }
        let id = get("Id").ok_or_else(|| refuse("MissingParameter", "a query has no Id"))?;
        let stat = get("MetricStat.Stat")
            .and_then(|text| Stat::parse(&text))
            .ok_or_else(|| refuse("InvalidParameterValue", format!("{id}: an unknown Stat")))?;
        let period = get("MetricStat.Period")
            .and_then(|text| text.parse::<i64>().ok())
            .filter(|period| *period > 0)
            .ok_or_else(|| refuse("InvalidParameterValue", format!("{id}: a bad Period")))?;
        let namespace = get("MetricStat.Metric.Namespace")
            .ok_or_else(|| refuse("MissingParameter", format!("{id}: no Namespace")))?;
        let name = get("MetricStat.Metric.MetricName")
            .ok_or_else(|| refuse("MissingParameter", format!("{id}: no MetricName")))?;
        let key = (
            namespace,
            name,
            dimensions(form, &format!("{member}.MetricStat.Metric")),
        );
        queries.push(Query {
            id,
            key,
            period,
            stat,
        });
    }
    Ok((queries, start, end))
}

/// One point per period with data in `[start, end)`, newest first.
fn answer(points: &[(i64, f64)], query: &Query, start: i64, end: i64) -> Vec<(i64, f64)> {
    let mut buckets: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for &(at, value) in points {
        if (start..end).contains(&at) {
            let bucket = at - at.rem_euclid(query.period);
            buckets.entry(bucket).or_default().push(value);
        }
    }
    buckets
        .into_iter()
        .rev()
        .map(|(at, values)| (at, query.stat.of(&values)))
        .collect()
}

/// The data of a `PutMetricData` form: (series, second, value).
fn data(form: &BTreeMap<String, String>, now: i64) -> Result<Vec<(SeriesKey, i64, f64)>, Refusal> {
    let namespace = form
        .get("Namespace")
        .cloned()
        .ok_or_else(|| refuse("MissingParameter", "Namespace is required"))?;
    let mut data = Vec::new();
    for member in members(form, "MetricData") {
        let get = |name: &str| form.get(&format!("{member}.{name}")).cloned();
        if get("Values.member.1").is_some() || get("StatisticValues.Sum").is_some() {
            return Err(refuse(
                "InvalidParameterValue",
                "Values and StatisticValues are not implemented by this store",
            ));
        }
        let name =
            get("MetricName").ok_or_else(|| refuse("MissingParameter", "a datum has no name"))?;
        let value = get("Value")
            .and_then(|text| text.parse::<f64>().ok())
            .ok_or_else(|| refuse("InvalidParameterValue", format!("{name}: a bad Value")))?;
        let at = match get("Timestamp") {
            Some(_) => time(form, &format!("{member}.Timestamp"))?,
            None => now,
        };
        data.push((
            (namespace.clone(), name, dimensions(form, &member)),
            at,
            value,
        ));
    }
    Ok(data)
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn iso(second: i64) -> String {
    Timestamp::from_second(second).map_or_else(
        |_| "1970-01-01T00:00:00Z".to_owned(),
        |at| at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

const XMLNS: &str = "http://monitoring.amazonaws.com/doc/2010-08-01/";

/// One query's answer: its id, its label, and its points (epoch second, value), newest first.
type QueryResult = (String, String, Vec<(i64, f64)>);

fn get_metric_data_xml(results: &[QueryResult]) -> String {
    let mut xml = format!(
        "<GetMetricDataResponse xmlns=\"{XMLNS}\"><GetMetricDataResult><MetricDataResults>"
    );
    for (id, label, points) in results {
        xml.push_str(&format!(
            "<member><Id>{}</Id><Label>{}</Label><Timestamps>",
            escape(id),
            escape(label)
        ));
        for (at, _) in points {
            xml.push_str(&format!("<member>{}</member>", iso(*at)));
        }
        xml.push_str("</Timestamps><Values>");
        for (_, value) in points {
            xml.push_str(&format!("<member>{value}</member>"));
        }
        xml.push_str("</Values><StatusCode>Complete</StatusCode></member>");
    }
    xml.push_str(
        "</MetricDataResults><Messages/></GetMetricDataResult>\
         <ResponseMetadata><RequestId>metric-store</RequestId></ResponseMetadata>\
         </GetMetricDataResponse>",
    );
    xml
}

fn error_xml(refusal: &Refusal) -> String {
    format!(
        "<ErrorResponse xmlns=\"{XMLNS}\"><Error><Type>Sender</Type><Code>{}</Code>\
         <Message>{}</Message></Error><RequestId>metric-store</RequestId></ErrorResponse>",
        refusal.code,
        escape(&refusal.message)
    )
}

fn xml_response(status: StatusCode, xml: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "text/xml")
        .body(
            Full::new(Bytes::from(xml))
                .map_err(|never| match never {})
                .boxed_unsync(),
        )
        .expect("a well-formed response")
}

/// The body as sent, or inflated when its `Content-Encoding` is gzip.
fn inflated(headers: &hyper::HeaderMap, body: Bytes) -> std::io::Result<Bytes> {
    let gzipped = headers
        .get(hyper::header::CONTENT_ENCODING)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.eq_ignore_ascii_case("gzip"));
    if !gzipped {
        return Ok(body);
    }
    let mut inflated = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut inflated)?;
    Ok(Bytes::from(inflated))
}

impl State {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => {
                let refusal = refuse("InvalidRequest", format!("reading the body: {error}"));
                return xml_response(StatusCode::BAD_REQUEST, error_xml(&refusal));
            }
        };
        // The SDK gzips a request body past 10 KiB (`Content-Encoding: gzip`, CloudWatch's
        // request compression); CloudWatch reads it decompressed, so the store does too.
        let body = match inflated(&parts.headers, body) {
            Ok(body) => body,
            Err(error) => {
                let refusal = refuse(
                    "InvalidRequest",
                    format!("inflating the gzip body: {error}"),
                );
                return xml_response(StatusCode::BAD_REQUEST, error_xml(&refusal));
            }
        };
        let action = operation(&parts.headers, &body);
        self.seen.lock().expect("metric store lock").push(Seen {
            at: Timestamp::now(),
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            operation: action.clone(),
            faulted: false,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        let form = parameters(&body);
        let answered = match (parts.method, action.as_deref()) {
            (Method::POST, Some("GetMetricData")) => self.get_metric_data(&form),
            (Method::POST, Some("PutMetricData")) => self.put_metric_data(&form),
            (_, other) => Err(refuse(
                "InvalidAction",
                format!(
                    "{} is not implemented by this store",
                    other.unwrap_or("no action")
                ),
            )),
        };
        match answered {
            Ok(xml) => xml_response(StatusCode::OK, xml),
            Err(refusal) => xml_response(StatusCode::BAD_REQUEST, error_xml(&refusal)),
        }
    }

    fn get_metric_data(&self, form: &BTreeMap<String, String>) -> Result<String, Refusal> {
        let (queries, start, end) = queries(form)?;
        let series = self.series.lock().expect("metric store lock");
        let results: Vec<QueryResult> = queries
            .iter()
            .map(|query| {
                let points = series
                    .get(&query.key)
                    .map_or_else(Vec::new, |points| answer(points, query, start, end));
                (query.id.clone(), query.key.1.clone(), points)
            })
            .collect();
        Ok(get_metric_data_xml(&results))
    }

    fn put_metric_data(&self, form: &BTreeMap<String, String>) -> Result<String, Refusal> {
        let data = data(form, Timestamp::now().as_second())?;
        let mut series = self.series.lock().expect("metric store lock");
        for (key, at, value) in data {
            series.entry(key).or_default().push((at, value));
        }
        Ok(format!(
            "<PutMetricDataResponse xmlns=\"{XMLNS}\"><ResponseMetadata>\
             <RequestId>metric-store</RequestId></ResponseMetadata></PutMetricDataResponse>"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(period: i64, stat: Stat) -> Query {
        Query {
            id: "q0".to_owned(),
            key: ("N".to_owned(), "M".to_owned(), Vec::new()),
            period,
            stat,
        }
    }

    #[test]
    fn points_are_one_per_period_with_data_newest_first_within_the_window() {
        let points = [(100, 1.0), (104, 3.0), (111, 5.0), (95, 9.0), (130, 7.0)];
        assert_eq!(
            answer(&points, &query(10, Stat::Maximum), 100, 130),
            [(110, 5.0), (100, 3.0)]
        );
        assert_eq!(
            answer(&points, &query(10, Stat::Average), 100, 130),
            [(110, 5.0), (100, 2.0)]
        );
        assert_eq!(
            answer(&points, &query(60, Stat::SampleCount), 0, 200),
            [(120, 1.0), (60, 4.0)]
        );
    }

    #[test]
    fn a_get_metric_data_form_is_read_with_sorted_dimensions() {
        let body = "Action=GetMetricData&StartTime=2026-11-27T10%3A00%3A00Z&EndTime=2026-11-27T10%3A01%3A00Z\
            &MetricDataQueries.member.1.Id=q0\
            &MetricDataQueries.member.1.MetricStat.Metric.Namespace=Orca%2FPods\
            &MetricDataQueries.member.1.MetricStat.Metric.MetricName=CpuUsageSeconds\
            &MetricDataQueries.member.1.MetricStat.Metric.Dimensions.member.1.Name=PodUID\
            &MetricDataQueries.member.1.MetricStat.Metric.Dimensions.member.1.Value=u-1\
            &MetricDataQueries.member.1.MetricStat.Metric.Dimensions.member.2.Name=Container\
            &MetricDataQueries.member.1.MetricStat.Metric.Dimensions.member.2.Value=main\
            &MetricDataQueries.member.1.MetricStat.Period=10\
            &MetricDataQueries.member.1.MetricStat.Stat=Maximum";
        let (queries, start, end) = queries(&parameters(body.as_bytes())).unwrap();
        assert_eq!(end - start, 60);
        assert_eq!(
            queries,
            [Query {
                id: "q0".to_owned(),
                key: (
                    "Orca/Pods".to_owned(),
                    "CpuUsageSeconds".to_owned(),
                    vec![
                        ("Container".to_owned(), "main".to_owned()),
                        ("PodUID".to_owned(), "u-1".to_owned())
                    ]
                ),
                period: 10,
                stat: Stat::Maximum,
            }]
        );
        let math = format!("{body}&MetricDataQueries.member.1.Expression=SUM(METRICS())");
        assert_eq!(queries_of(&math).unwrap_err().code, "InvalidParameterValue");
        let no_window = body.replace("StartTime", "Begin");
        assert_eq!(queries_of(&no_window).unwrap_err().code, "MissingParameter");
    }

    fn queries_of(body: &str) -> Result<(Vec<Query>, i64, i64), Refusal> {
        queries(&parameters(body.as_bytes()))
    }

    /// The real SDK's CloudWatch client, pointed at `store`.
    fn sdk_client(store: &MetricStore) -> aws_sdk_cloudwatch::Client {
        let config = aws_sdk_cloudwatch::config::Builder::new()
            .behavior_version_latest()
            .region(aws_sdk_cloudwatch::config::Region::new("us-east-1"))
            .endpoint_url(store.url())
            .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new(
                "a", "b", None, None, "test",
            ))
            .build();
        aws_sdk_cloudwatch::Client::from_conf(config)
    }

    #[tokio::test]
    async fn the_sdk_puts_and_reads_back_through_the_store() {
        use aws_sdk_cloudwatch::primitives::DateTime;
        use aws_sdk_cloudwatch::types::{
            Dimension, Metric, MetricDataQuery, MetricDatum, MetricStat,
        };
        let store = MetricStore::start().await.unwrap();
        let client = sdk_client(&store);
        let now = Timestamp::now().as_second();
        let dimension = Dimension::builder().name("PodUID").value("u&1").build();
        for (offset, value) in [(-25, 1.0), (-24, 2.0), (-5, 4.0)] {
            client
                .put_metric_data()
                .namespace("Bench")
                .metric_data(
                    MetricDatum::builder()
                        .metric_name("Cpu")
                        .dimensions(dimension.clone())
                        .timestamp(DateTime::from_secs(now + offset))
                        .value(value)
                        .build(),
                )
                .send()
                .await
                .unwrap();
        }
        let query = |id: &str, name: &str| {
            MetricDataQuery::builder()
                .id(id)
                .metric_stat(
                    MetricStat::builder()
                        .metric(
                            Metric::builder()
                                .namespace("Bench")
                                .metric_name(name)
                                .dimensions(dimension.clone())
                                .build(),
                        )
                        .period(1)
                        .stat("Maximum")
                        .build(),
                )
                .build()
        };
        let output = client
            .get_metric_data()
            .metric_data_queries(query("q0", "Cpu"))
            .metric_data_queries(query("q1", "Absent"))
            .start_time(DateTime::from_secs(now - 60))
            .end_time(DateTime::from_secs(now + 1))
            .send()
            .await
            .unwrap();
        let results = output.metric_data_results();
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].id(), Some("q0"));
        assert_eq!(results[0].values(), [4.0, 2.0, 1.0]);
        assert_eq!(results[0].timestamps()[0].secs(), now - 5);
        assert!(results[1].values().is_empty());
        let calls = store.calls_since(Timestamp::UNIX_EPOCH, &["GetMetricData"]);
        assert_eq!(calls.len(), 1);
        assert!(calls[0].body.contains("MetricDataQueries.member.2.Id=q1"));
        let refused = client.list_metrics().send().await.unwrap_err();
        assert!(
            format!("{:?}", refused).contains("InvalidAction"),
            "{refused:?}"
        );
    }

    /// The SDK gzips a `PutMetricData` body past 10 KiB, as a bench round of 100 pods sends;
    /// the store first refused it as "no action" (it read the compressed bytes as the form).
    #[tokio::test]
    async fn a_gzipped_put_is_read_as_the_sdk_meant_it() {
        use aws_sdk_cloudwatch::primitives::DateTime;
        use aws_sdk_cloudwatch::types::{
            Dimension, Metric, MetricDataQuery, MetricDatum, MetricStat,
        };
        let store = MetricStore::start().await.unwrap();
        let client = sdk_client(&store);
        let now = Timestamp::now().as_second();
        let datum = |pod: usize| {
            MetricDatum::builder()
                .metric_name("Cpu")
                .dimensions(
                    Dimension::builder()
                        .name("PodUID")
                        .value(format!("pod-{pod}"))
                        .build(),
                )
                .timestamp(DateTime::from_secs(now - 5))
                .value(pod as f64)
                .build()
        };
        client
            .put_metric_data()
            .namespace("Bench")
            .set_metric_data(Some((0..400).map(datum).collect()))
            .send()
            .await
            .unwrap();
        let output = client
            .get_metric_data()
            .metric_data_queries(
                MetricDataQuery::builder()
                    .id("q0")
                    .metric_stat(
                        MetricStat::builder()
                            .metric(
                                Metric::builder()
                                    .namespace("Bench")
                                    .metric_name("Cpu")
                                    .dimensions(
                                        Dimension::builder()
                                            .name("PodUID")
                                            .value("pod-399")
                                            .build(),
                                    )
                                    .build(),
                            )
                            .period(1)
                            .stat("Maximum")
                            .build(),
                    )
                    .build(),
            )
            .start_time(DateTime::from_secs(now - 60))
            .end_time(DateTime::from_secs(now + 1))
            .send()
            .await
            .unwrap();
        assert_eq!(output.metric_data_results()[0].values(), [399.0]);
        let puts = store.calls_since(Timestamp::UNIX_EPOCH, &["PutMetricData"]);
        assert_eq!(puts.len(), 1, "the put was recorded as PutMetricData");
    }
}
