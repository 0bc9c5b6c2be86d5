//! An EC2 endpoint that lists instances quickly: it answers `DescribeInstances` from the
//! instances a test registers in memory, and passes every other request on, unchanged, to an
//! upstream EC2 (moto). moto 5.2.5 takes over 30 s to list 1,000 instances, past orca's call
//! timeout; this stand-in lets a benchmark run orca over a thousand running pods while every
//! other EC2 call (the ping, the catalogue, console output) is still moto's.
//!
//! orca reaches it as `provider.aws.endpointUrl` (plain HTTP on 127.0.0.1). It speaks EC2's
//! query protocol: a form body with `Action=DescribeInstances`, `Filter.N.Name`,
//! `Filter.N.Value.M`, `InstanceId.N`, `MaxResults` and `NextToken`; the answer is EC2's XML
//! (`DescribeInstancesResponse`, one reservation per instance), which the AWS SDK parses as it
//! parses EC2's own. A filter or parameter it does not support is an EC2-style error, never
//! ignored.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use jiff::Timestamp;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::proxy::{Body, PlainClient, end_to_end, forward_http, operation, serve};

const XMLNS: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";
const OWNER_ID: &str = "123456789012";
const IMAGE_ID: &str = "ami-0123456789abcdef0";

/// One instance the stand-in lists: running since `launch_time`, in the stand-in's zone.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    instance_id: String,
    instance_type: String,
    private_ip: String,
    launch_time: Timestamp,
    tags: BTreeMap<String, String>,
}

/// One filter of a `DescribeInstances`: an instance matches when one of the values does.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Criterion {
    /// `tag:KEY`: the instance has tag `KEY` with one of the values.
    Tag(String, Vec<String>),
    /// `instance-state-name` (every listed instance is `running`).
    State(Vec<String>),
    /// `instance-id`.
    Id(Vec<String>),
}

/// What a `DescribeInstances` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Query {
    criteria: Vec<Criterion>,
    /// `InstanceId.N`: only these, and every one must exist.
    instance_ids: Vec<String>,
    max_results: Option<usize>,
    /// Where the page starts (the `NextToken` of the page before).
    start: usize,
}

/// An answer EC2 would give as an error: HTTP 400 with this code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Refusal {
    code: &'static str,
    message: String,
}

impl Refusal {
    fn invalid(message: String) -> Refusal {
        Refusal {
            code: "InvalidParameterValue",
            message,
        }
    }
}

struct State {
    upstream: String,
    client: PlainClient,
    zone: String,
    instances: Mutex<Vec<Listed>>,
    listings: AtomicUsize,
    requests: AtomicUsize,
    passed: Mutex<BTreeMap<String, usize>>,
}

/// A running stand-in; it stops when dropped.
pub struct Ec2Listing {
    url: String,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl Ec2Listing {
    /// A stand-in on a free port of 127.0.0.1 that passes what it does not answer to the
    /// plain-HTTP EC2 at `upstream` (moto's URL) and places its instances in `zone`.
    ///
    /// # Errors
    /// No port can be bound.
    pub async fn start(upstream: &str, zone: &str) -> Result<Ec2Listing> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the EC2 listing's port on 127.0.0.1")?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(State {
            upstream: upstream.trim_end_matches('/').to_owned(),
            client: HttpClient::builder(TokioExecutor::new()).build_http(),
            zone: zone.to_owned(),
            instances: Mutex::new(Vec::new()),
            listings: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            passed: Mutex::new(BTreeMap::new()),
        });
        let task = serve(listener, {
            let state = state.clone();
            move |request| {
                let state = state.clone();
                async move { state.handle(request).await }
            }
        });
        Ok(Ec2Listing { url, state, task })
    }

    /// Where orca reaches it: `http://127.0.0.1:<port>`, its `provider.aws.endpointUrl`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Lists an instance from now on: `instance_id`, running since now in the stand-in's
    /// zone, of `instance_type`, at `private_ip`, with `tags`.
    pub fn add(
        &self,
        instance_id: &str,
        instance_type: &str,
        private_ip: &str,
        tags: BTreeMap<String, String>,
    ) {
        lock(&self.state.instances).push(Listed {
            instance_id: instance_id.to_owned(),
            instance_type: instance_type.to_owned(),
            private_ip: private_ip.to_owned(),
            launch_time: Timestamp::now(),
            tags,
        });
    }

    /// How many `DescribeInstances` it has answered (errors included; each page is one).
    pub fn listings(&self) -> usize {
        self.state.listings.load(Ordering::Relaxed)
    }

    /// The requests it passed on to the upstream so far, counted by `Action` (`-` for a
    /// request that names none).
    pub fn passed(&self) -> BTreeMap<String, usize> {
        lock(&self.state.passed).clone()
    }
}

impl Drop for Ec2Listing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl State {
    async fn handle(&self, request: Request<Incoming>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let body = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(error) => {
                return self.refuse(Refusal::invalid(format!("unreadable body: {error}")));
            }
        };
        let action = operation(&parts.headers, &body);
        if action.as_deref() == Some("DescribeInstances") {
            self.listings.fetch_add(1, Ordering::Relaxed);
            let answer = parse(&body).and_then(|query| {
                let instances = lock(&self.instances);
                page(&instances, &query)
                    .map(|(page, next)| self.describe(&page, next.as_deref(), &self.request_id()))
            });
            return match answer {
                Ok(xml) => xml_response(StatusCode::OK, xml),
                Err(refusal) => self.refuse(refusal),
            };
        }
        *lock(&self.passed)
            .entry(action.unwrap_or_else(|| "-".to_owned()))
            .or_default() += 1;
        let path = parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), ToString::to_string);
        let forwarded = forward_http(
            &self.client,
            &self.upstream,
            parts.method,
            &path,
            end_to_end(&parts.headers),
            body,
        )
        .await;
        match forwarded {
            Ok(mut response) => {
                let kept = end_to_end(response.headers());
                *response.headers_mut() = kept;
                response
            }
            Err(error) => {
                let mut response = full(Bytes::from(format!("{error:#}")));
                *response.status_mut() = StatusCode::BAD_GATEWAY;
                response
            }
        }
    }

    fn request_id(&self) -> String {
        let n = self.requests.fetch_add(1, Ordering::Relaxed);
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    fn refuse(&self, refusal: Refusal) -> Response<Body> {
        xml_response(
            StatusCode::BAD_REQUEST,
            error_xml(&refusal, &self.request_id()),
        )
    }

    /// The `DescribeInstancesResponse` of `instances`, one reservation each.
    fn describe(&self, instances: &[Listed], next: Option<&str>, request_id: &str) -> String {
        let mut xml = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstancesResponse xmlns=\"{XMLNS}\"><requestId>{}</requestId><reservationSet>",
            escape(request_id)
        );
        for instance in instances {
            let reservation = instance.instance_id.replacen("i-", "r-", 1);
            // Writing to a String cannot fail.
            let _ = write!(
                xml,
                "<item><reservationId>{}</reservationId><ownerId>{OWNER_ID}</ownerId><groupSet/><instancesSet><item>\
<instanceId>{}</instanceId><imageId>{IMAGE_ID}</imageId>\
<instanceState><code>16</code><name>running</name></instanceState>\
<privateDnsName>ip-{}.ec2.internal</privateDnsName><amiLaunchIndex>0</amiLaunchIndex>\
<instanceType>{}</instanceType><launchTime>{}</launchTime>\
<placement><availabilityZone>{}</availabilityZone><tenancy>default</tenancy></placement>\
<privateIpAddress>{}</privateIpAddress><blockDeviceMapping/><tagSet>",
                escape(&reservation),
                escape(&instance.instance_id),
                escape(&instance.private_ip.replace('.', "-")),
                escape(&instance.instance_type),
                launch_time(instance.launch_time),
                escape(&self.zone),
                escape(&instance.private_ip),
            );
            for (key, value) in &instance.tags {
                let _ = write!(
                    xml,
                    "<item><key>{}</key><value>{}</value></item>",
                    escape(key),
                    escape(value)
                );
            }
            xml.push_str("</tagSet></item></instancesSet></item>");
        }
        xml.push_str("</reservationSet>");
        if let Some(next) = next {
            let _ = write!(xml, "<nextToken>{}</nextToken>", escape(next));
        }
        xml.push_str("</DescribeInstancesResponse>");
        xml
    }
}

fn full(body: Bytes) -> Response<Body> {
    Response::new(
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync(),
    )
}

fn xml_response(status: StatusCode, xml: String) -> Response<Body> {
    let mut response = full(Bytes::from(xml));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/xml;charset=UTF-8"),
    );
    response
}

fn error_xml(refusal: &Refusal, request_id: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
        escape(refusal.code),
        escape(&refusal.message),
        escape(request_id)
    )
}

/// EC2's `launchTime`: ISO 8601 in UTC with milliseconds, `2026-11-27T12:00:00.000Z`.
fn launch_time(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `text` safe inside an XML element or attribute.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&apos;"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// The `DescribeInstances` a form body asks for.
///
/// # Errors
/// A filter the stand-in does not support (a name other than `tag:KEY`,
/// `instance-state-name`, `instance-id`; a wildcard value), a parameter it does not know, or a
/// malformed number or token.
fn parse(body: &[u8]) -> Result<Query, Refusal> {
    let mut query = Query::default();
    // Filter.N → (its name, its values by M).
    let mut filters: BTreeMap<usize, (Option<String>, BTreeMap<usize, String>)> = BTreeMap::new();
    let mut ids: BTreeMap<usize, String> = BTreeMap::new();
    let index = |text: &str, key: &str| -> Result<usize, Refusal> {
        text.parse()
            .map_err(|_| Refusal::invalid(format!("{key}: {text:?} is not an index")))
    };
    for (key, value) in form_urlencoded::parse(body) {
        let (key, value) = (key.into_owned(), value.into_owned());
        if let Some(rest) = key.strip_prefix("Filter.") {
            let (n, field) = rest.split_once('.').unwrap_or((rest, ""));
            let filter = filters.entry(index(n, &key)?).or_default();
            if field == "Name" {
                filter.0 = Some(value);
            } else if let Some(m) = field.strip_prefix("Value.") {
                filter.1.insert(index(m, &key)?, value);
            } else {
                return Err(unknown(&key));
            }
        } else if let Some(n) = key.strip_prefix("InstanceId.") {
            ids.insert(index(n, &key)?, value);
        } else {
            match key.as_str() {
                "Action" | "Version" => {}
                "MaxResults" => {
                    let max = value
                        .parse::<usize>()
                        .ok()
                        .filter(|max| (5..=1000).contains(max))
                        .ok_or_else(|| {
                            Refusal::invalid(format!(
                                "MaxResults {value:?}: a number from 5 to 1000 is accepted"
                            ))
                        })?;
                    query.max_results = Some(max);
                }
                "NextToken" => {
                    query.start = value.parse().map_err(|_| Refusal {
                        code: "InvalidParameterValue",
                        message: format!("NextToken {value:?} is not one this endpoint gave"),
                    })?;
                }
                _ => return Err(unknown(&key)),
            }
        }
    }
    for (n, (name, values)) in filters {
        let name = name.ok_or_else(|| Refusal::invalid(format!("Filter.{n} has no Name")))?;
        let values: Vec<String> = values.into_values().collect();
        if let Some(value) = values.iter().find(|v| v.contains(['*', '?'])) {
            return Err(Refusal::invalid(format!(
                "filter {name}: the wildcard value {value:?} is not supported by this stand-in"
            )));
        }
        query.criteria.push(match name.as_str() {
            "instance-state-name" => Criterion::State(values),
            "instance-id" => Criterion::Id(values),
            _ => match name.strip_prefix("tag:") {
                Some(key) if !key.is_empty() => Criterion::Tag(key.to_owned(), values),
                _ => {
                    return Err(Refusal::invalid(format!(
                        "The filter '{name}' is not supported by this stand-in (tag:KEY, \
                         instance-state-name and instance-id are)"
                    )));
                }
            },
        });
    }
    query.instance_ids = ids.into_values().collect();
    if query.max_results.is_some() && !query.instance_ids.is_empty() {
        return Err(Refusal::invalid(
            "MaxResults cannot be combined with InstanceId".to_owned(),
        ));
    }
    Ok(query)
}

fn unknown(key: &str) -> Refusal {
    Refusal {
        code: "UnknownParameter",
        message: format!("The parameter {key} is not recognized by this stand-in"),
    }
}

fn matches(instance: &Listed, criterion: &Criterion) -> bool {
    match criterion {
        Criterion::Tag(key, values) => instance.tags.get(key).is_some_and(|v| values.contains(v)),
        Criterion::State(values) => values.iter().any(|v| v == "running"),
        Criterion::Id(values) => values.contains(&instance.instance_id),
    }
}

/// The page of `instances` that `query` asks for, in the order they were added, and the
/// token of the next page when more remain.
///
/// # Errors
/// An `InstanceId` that is not listed (`InvalidInstanceID.NotFound`, as EC2 answers), or a
/// token past the end.
fn page(instances: &[Listed], query: &Query) -> Result<(Vec<Listed>, Option<String>), Refusal> {
    if let Some(missing) = query
        .instance_ids
        .iter()
        .find(|id| !instances.iter().any(|i| &i.instance_id == *id))
    {
        return Err(Refusal {
            code: "InvalidInstanceID.NotFound",
            message: format!("The instance ID '{missing}' does not exist"),
        });
    }
    let matched: Vec<&Listed> = instances
        .iter()
        .filter(|i| query.instance_ids.is_empty() || query.instance_ids.contains(&i.instance_id))
        .filter(|i| query.criteria.iter().all(|c| matches(i, c)))
        .collect();
    if query.start > matched.len() {
        return Err(Refusal::invalid(format!(
            "NextToken {} is past the {} instances listed",
            query.start,
            matched.len()
        )));
    }
    let end = query
        .max_results
        .map_or(matched.len(), |max| (query.start + max).min(matched.len()));
    let next = (end < matched.len()).then(|| end.to_string());
    Ok((
        matched[query.start..end]
            .iter()
            .map(|i| (*i).clone())
            .collect(),
        next,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(id: &str, node: &str) -> Listed {
        Listed {
            instance_id: id.to_owned(),
            instance_type: "m5.large".to_owned(),
            private_ip: "10.1.0.1".to_owned(),
            launch_time: Timestamp::UNIX_EPOCH,
            tags: BTreeMap::from([
                ("ManagedBy".to_owned(), "ORCA".to_owned()),
                ("orca.research/node".to_owned(), node.to_owned()),
            ]),
        }
    }

    #[test]
    fn filters_ids_and_paging_are_read_from_the_form_body() {
        let body = "Action=DescribeInstances&Version=2016-11-15\
&Filter.1.Name=tag%3AManagedBy&Filter.1.Value.1=ORCA\
&Filter.2.Name=instance-state-name&Filter.2.Value.1=pending&Filter.2.Value.2=running\
&Filter.3.Name=instance-id&Filter.3.Value.1=i-1\
&MaxResults=5&NextToken=10";
        let query = parse(body.as_bytes()).expect("a supported query");
        assert_eq!(
            query.criteria,
            vec![
                Criterion::Tag("ManagedBy".to_owned(), vec!["ORCA".to_owned()]),
                Criterion::State(vec!["pending".to_owned(), "running".to_owned()]),
                Criterion::Id(vec!["i-1".to_owned()]),
            ]
        );
        assert_eq!((query.max_results, query.start), (Some(5), 10));
        let ids = parse(b"Action=DescribeInstances&InstanceId.2=i-b&InstanceId.1=i-a")
            .expect("ids alone");
        assert_eq!(ids.instance_ids, vec!["i-a".to_owned(), "i-b".to_owned()]);
    }

    #[test]
    fn what_the_stand_in_does_not_support_is_refused_not_ignored() {
        let refused = |body: &str| parse(body.as_bytes()).expect_err(body);
        assert_eq!(
            refused("Action=DescribeInstances&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-1").code,
            "InvalidParameterValue"
        );
        assert_eq!(
            refused("Action=DescribeInstances&Filter.1.Name=tag-key&Filter.1.Value.1=a").code,
            "InvalidParameterValue"
        );
        assert_eq!(
            refused("Action=DescribeInstances&Filter.1.Name=tag:A&Filter.1.Value.1=x*").code,
            "InvalidParameterValue"
        );
        assert_eq!(
            refused("Action=DescribeInstances&DryRun=true").code,
            "UnknownParameter"
        );
        assert_eq!(
            refused("Action=DescribeInstances&MaxResults=4").code,
            "InvalidParameterValue"
        );
        assert_eq!(
            refused("Action=DescribeInstances&MaxResults=5&InstanceId.1=i-a").code,
            "InvalidParameterValue"
        );
    }

    #[test]
    fn filters_and_together_and_their_values_or_together() {
        let instances = [
            listed("i-a", "n1"),
            listed("i-b", "n2"),
            listed("i-c", "n1"),
        ];
        let ids = |query: &Query| -> Vec<String> {
            let (page, next) = page(&instances, query).expect("a page");
            assert_eq!(next, None);
            page.into_iter().map(|i| i.instance_id).collect()
        };
        let query = |criteria: Vec<Criterion>| Query {
            criteria,
            ..Query::default()
        };
        let tag = |key: &str, values: &[&str]| {
            Criterion::Tag(
                key.to_owned(),
                values.iter().map(|v| (*v).to_owned()).collect(),
            )
        };
        assert_eq!(
            ids(&query(vec![tag("orca.research/node", &["n1"])])),
            ["i-a", "i-c"]
        );
        assert_eq!(
            ids(&query(vec![tag("orca.research/node", &["n1", "n2"])])),
            ["i-a", "i-b", "i-c"]
        );
        assert_eq!(
            ids(&query(vec![
                tag("ManagedBy", &["ORCA"]),
                Criterion::Id(vec!["i-b".to_owned(), "i-c".to_owned()]),
                tag("orca.research/node", &["n2"]),
            ])),
            ["i-b"]
        );
        assert!(ids(&query(vec![tag("Missing", &["x"])])).is_empty());
        assert!(
            ids(&query(vec![Criterion::State(vec![
                "terminated".to_owned()
            ])]))
            .is_empty()
        );
        assert_eq!(
            ids(&query(vec![Criterion::State(vec!["running".to_owned()])])).len(),
            3
        );
        let unknown = Query {
            instance_ids: vec!["i-zzz".to_owned()],
            ..Query::default()
        };
        assert_eq!(
            page(&instances, &unknown).expect_err("unknown id").code,
            "InvalidInstanceID.NotFound"
        );
    }

    #[test]
    fn pages_of_max_results_cover_every_match_once_and_the_last_has_no_token() {
        let instances: Vec<Listed> = (0..12).map(|i| listed(&format!("i-{i:02}"), "n")).collect();
        let mut query = Query {
            max_results: Some(5),
            ..Query::default()
        };
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        loop {
            let (page, next) = page(&instances, &query).expect("a page");
            sizes.push(page.len());
            seen.extend(page.into_iter().map(|i| i.instance_id));
            match next {
                Some(token) => query.start = token.parse().expect("a numeric token"),
                None => break,
            }
        }
        assert_eq!(sizes, [5, 5, 2]);
        let expected: Vec<String> = instances.iter().map(|i| i.instance_id.clone()).collect();
        assert_eq!(seen, expected);
        query.start = 13;
        assert!(page(&instances, &query).is_err());
    }

    #[test]
    fn values_are_xml_escaped_and_launch_time_has_milliseconds() {
        assert_eq!(
            escape(r#"a<b>&"c"'d'"#),
            "a&lt;b&gt;&amp;&quot;c&quot;&apos;d&apos;"
        );
        let at: Timestamp = "2026-11-27T12:00:01.5Z".parse().expect("a timestamp");
        assert_eq!(launch_time(at), "2026-11-27T12:00:01.500Z");
        let refusal = Refusal::invalid("<bad & worse>".to_owned());
        assert!(error_xml(&refusal, "r").contains("<Message>&lt;bad &amp; worse&gt;</Message>"));
    }

    #[tokio::test]
    async fn the_sdk_reads_every_page_of_a_tag_filtered_listing() -> Result<()> {
        // Nothing listens at the upstream: only DescribeInstances is called.
        let listing = Ec2Listing::start("http://127.0.0.1:9", "us-west-2a").await?;
        for i in 0..12 {
            let node = if i % 4 == 3 { "other" } else { "n1" };
            let mut tags = BTreeMap::from([
                ("orca.research/node".to_owned(), node.to_owned()),
                ("Name".to_owned(), format!("pod <{i}> & co")),
            ]);
            tags.insert("ManagedBy".to_owned(), "ORCA".to_owned());
            listing.add(
                &format!("i-{i:017x}"),
                "m5.large",
                &format!("10.1.0.{}", i + 1),
                tags,
            );
        }
        let config = aws_sdk_ec2::config::Builder::new()
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                "a", "b", None, None, "test",
            ))
            .region(aws_sdk_ec2::config::Region::new("us-west-2"))
            .endpoint_url(listing.url())
            .behavior_version_latest()
            .build();
        let client = aws_sdk_ec2::Client::from_conf(config);
        let filter = aws_sdk_ec2::types::Filter::builder()
            .name("tag:orca.research/node")
            .values("n1")
            .build();
        let mut pages = client
            .describe_instances()
            .filters(filter)
            .max_results(5)
            .into_paginator()
            .send();
        let mut instances = Vec::new();
        let mut page_count = 0;
        while let Some(page) = pages.next().await {
            let page = page.context("a page the SDK parses")?;
            page_count += 1;
            for reservation in page.reservations() {
                assert!(
                    reservation
                        .reservation_id()
                        .is_some_and(|r| r.starts_with("r-"))
                );
                instances.extend(reservation.instances().iter().cloned());
            }
        }
        assert_eq!((page_count, instances.len()), (2, 9));
        assert_eq!(listing.listings(), 2);
        let first = &instances[0];
        assert_eq!(first.instance_id(), Some("i-00000000000000000"));
        assert_eq!(
            first.state().and_then(|s| s.name()),
            Some(&aws_sdk_ec2::types::InstanceStateName::Running)
        );
        assert_eq!(
            first.instance_type(),
            Some(&aws_sdk_ec2::types::InstanceType::M5Large)
        );
        assert_eq!(first.private_ip_address(), Some("10.1.0.1"));
        assert_eq!(
            first.placement().and_then(|p| p.availability_zone()),
            Some("us-west-2a")
        );
        let launched = first.launch_time().context("a launch time")?.secs();
        assert!((Timestamp::now().as_second() - launched).abs() < 60);
        let tags: BTreeMap<&str, &str> = first
            .tags()
            .iter()
            .filter_map(|t| Some((t.key()?, t.value()?)))
            .collect();
        assert_eq!(tags.get("Name"), Some(&"pod <0> & co"));
        assert_eq!(tags.get("ManagedBy"), Some(&"ORCA"));
        assert!(first.block_device_mappings().is_empty());
        // An unsupported filter is the SDK's service error, with EC2's code.
        let refused = client
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder()
                    .name("vpc-id")
                    .values("vpc-1")
                    .build(),
            )
            .send()
            .await
            .expect_err("an unsupported filter");
        assert_eq!(
            aws_sdk_ec2::error::ProvideErrorMetadata::code(&refused),
            Some("InvalidParameterValue")
        );
        assert!(listing.passed().is_empty());
        Ok(())
    }
}
