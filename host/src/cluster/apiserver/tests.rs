use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use prometheus_client::registry::Registry;
use serde_json::{Value, json};

use super::schema::tests::core_v1_of_1_31;
use super::*;

/// What a 1.33 apiserver answered orca's Node status apply (issue 59).
const REFUSAL_OF_1_33: &str = "failed to create typed patch object (/old-sim-node; /v1, Kind=Node): .status.declaredFeatures: field not declared in schema";

/// An apiserver that serves `/version` and the OpenAPI documents, counting each path read.
struct FakeServer {
    version: Mutex<(String, String)>,
    /// The status the OpenAPI documents are answered with.
    documents_status: Mutex<u16>,
    reads: Mutex<BTreeMap<String, usize>>,
}

impl FakeServer {
    fn new(git_version: &str, minor: &str) -> Arc<FakeServer> {
        Arc::new(FakeServer {
            version: Mutex::new((git_version.to_owned(), minor.to_owned())),
            documents_status: Mutex::new(200),
            reads: Mutex::new(BTreeMap::new()),
        })
    }

    fn reads(&self, path: &str) -> usize {
        self.reads.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    fn answer(&self, path: &str) -> (u16, Value) {
        *self
            .reads
            .lock()
            .unwrap()
            .entry(path.to_owned())
            .or_default() += 1;
        let (git_version, minor) = self.version.lock().unwrap().clone();
        let documents = *self.documents_status.lock().unwrap();
        match path {
            "/version" => (
                200,
                json!({"major": "1", "minor": minor, "gitVersion": git_version,
                       "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                       "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64"}),
            ),
            "/openapi/v3/api/v1" if documents == 200 => (200, core_v1_of_1_31()),
            "/openapi/v3/apis/coordination.k8s.io/v1" if documents == 200 => {
                (200, json!({"components": {"schemas": {}}}))
            }
            _ => (
                documents,
                json!({"kind": "Status", "status": "Failure", "code": documents}),
            ),
        }
    }

    fn client(self: &Arc<Self>) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
            let (status, body) = server.answer(request.uri().path());
            std::future::ready(
                hyper::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body.to_string().into_bytes())),
            )
        });
        kube::Client::new(service, "default")
    }
}

fn schema_for(server: &Arc<FakeServer>) -> (ServerSchema, Registry) {
    let mut registry = Registry::default();
    let metrics = Arc::new(ApiserverMetrics::register(&mut registry));
    (ServerSchema::new(server.client(), metrics), registry)
}

fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

fn node_status() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "old-sim-node"},
        "status": {"capacity": {"cpu": "1000"}, "declaredFeatures": ["ExtendWebSocketsToKubelet"]}
    })
}

/// What the apiserver answers with `code` and `message`.
fn answered(code: u16, reason: &str, message: &str) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure(message, reason)
            .with_code(code)
            .boxed(),
    )
}

/// A write to a server that refuses `status.declaredFeatures` as 1.33 does, recording what
/// each try sent.
fn refusing_1_33(
    sent: &Mutex<Vec<Value>>,
    value: Value,
) -> std::future::Ready<Result<(), kube::Error>> {
    let refused = value["status"].get("declaredFeatures").is_some();
    sent.lock().unwrap().push(value);
    std::future::ready(if refused {
        Err(answered(500, "InternalError", REFUSAL_OF_1_33))
    } else {
        Ok(())
    })
}

#[tokio::test]
async fn learning_reads_the_release_and_what_the_schema_lacks_is_left_out() {
    let server = FakeServer::new("v1.31.14", "31");
    let (schema, registry) = schema_for(&server);
    schema.learn().await.unwrap();
    assert_eq!(schema.version().map(|v| v.minor), Some(31));

    let mut status = node_status();
    schema.prune(Written::Node, &mut status);
    assert_eq!(status["status"], json!({"capacity": {"cpu": "1000"}}));
    let text = metrics_text(&registry);
    assert!(
        text.contains(
            "orca_apiserver_fields_omitted{kind=\"Node\",field=\"status.declaredFeatures\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("orca_apiserver_info{version=\"v1.31.14\",support=\"tested\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("orca_apiserver_schema_reads_total{result=\"ok\"} 1"),
        "{text}"
    );

    // The release unchanged: the schema is not read again.
    schema.learn().await.unwrap();
    assert_eq!(server.reads("/version"), 2);
    assert_eq!(server.reads("/openapi/v3/api/v1"), 1);
    assert_eq!(server.reads("/openapi/v3/apis/coordination.k8s.io/v1"), 1);
}

#[tokio::test]
async fn a_refused_field_never_blocks_the_write_and_is_left_out_from_then_on() {
    // The schema could not be read (a proxy in the way refuses /openapi): orca writes what it
    // would write to the newest release.
    let server = FakeServer::new("v1.33.13", "33");
    *server.documents_status.lock().unwrap() = 403;
    let (schema, registry) = schema_for(&server);
    let error = schema.learn().await.unwrap_err();
    assert!(
        matches!(error, LearnError::DocumentRefused { status, .. } if status == 403),
        "{error}"
    );

    let sent = Mutex::new(Vec::new());
    schema
        .write(Written::Node, node_status(), |value| {
            refusing_1_33(&sent, value)
        })
        .await
        .unwrap();
    let tries = std::mem::take(&mut *sent.lock().unwrap());
    assert_eq!(tries.len(), 2, "{tries:?}");
    assert!(tries[0]["status"].get("declaredFeatures").is_some());
    assert_eq!(tries[1]["status"], json!({"capacity": {"cpu": "1000"}}));

    // Every later write leaves it out at once.
    schema
        .write(Written::Node, node_status(), |value| {
            refusing_1_33(&sent, value)
        })
        .await
        .unwrap();
    assert_eq!(sent.lock().unwrap().len(), 1);
    let text = metrics_text(&registry);
    assert!(
        text.contains(
            "orca_apiserver_field_refusals_total{kind=\"Node\",field=\"status.declaredFeatures\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("orca_apiserver_schema_reads_total{result=\"error\"} 1"),
        "{text}"
    );
    // A Lease is another object: the refusal of a Node field leaves it whole.
    let mut lease = json!({"status": {"declaredFeatures": ["x"]}});
    schema.prune(Written::Lease, &mut lease);
    assert!(lease["status"].get("declaredFeatures").is_some());
}

#[test]
fn the_refusal_names_the_field_the_kind_and_the_server() {
    let refusal = FieldRefused {
        kind: Written::Node,
        field: "status.declaredFeatures".to_owned(),
        server: Some("v1.33.13".to_owned()),
    };
    assert_eq!(
        refusal.to_string(),
        "the apiserver (v1.33.13) refused Node field status.declaredFeatures (it does not know it): written again without it"
    );
}

#[tokio::test]
async fn other_refusals_are_the_writes_own_error_and_are_not_retried() {
    let server = FakeServer::new("v1.36.3", "36");
    let (schema, _registry) = schema_for(&server);
    let tries = AtomicUsize::new(0);
    let conflict = schema
        .write(Written::Node, node_status(), |_| {
            tries.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err::<(), _>(answered(
                409,
                "Conflict",
                "the object has been modified",
            )))
        })
        .await
        .unwrap_err();
    assert!(matches!(conflict, kube::Error::Api(status) if status.code == 409));
    assert_eq!(tries.load(Ordering::SeqCst), 1);

    // A refusal naming a field the write does not hold cannot be mended by leaving it out.
    tries.store(0, Ordering::SeqCst);
    let elsewhere = schema
        .write(Written::Node, node_status(), |_| {
            tries.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Err::<(), _>(answered(
                500,
                "InternalError",
                "failed to create typed patch object (/n; /v1, Kind=Node): .spec.elsewhere: field not declared in schema",
            )))
        })
        .await
        .unwrap_err();
    assert!(matches!(elsewhere, kube::Error::Api(status) if status.code == 500));
    assert_eq!(tries.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_server_that_keeps_refusing_new_fields_is_written_again_a_bounded_number_of_times() {
    let server = FakeServer::new("v1.36.3", "36");
    let (schema, _registry) = schema_for(&server);
    let value = json!({"status": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7}});
    let tries = AtomicUsize::new(0);
    let answer = schema
        .write(Written::Node, value, |value| {
            tries.fetch_add(1, Ordering::SeqCst);
            // Refuses the first field left, one at a time.
            let first = value["status"]
                .as_object()
                .and_then(|o| o.keys().next().cloned());
            std::future::ready(match first {
                Some(field) => Err(answered(
                    500,
                    "InternalError",
                    &format!("failed to create typed patch object (/n; /v1, Kind=Node): .status.{field}: field not declared in schema"),
                )),
                None => Ok(()),
            })
        })
        .await;
    assert!(answer.is_err());
    assert_eq!(tries.load(Ordering::SeqCst), MAX_REWRITES + 1);
}

#[tokio::test]
async fn a_new_release_forgets_the_refusals_and_reads_the_schema_again() {
    let server = FakeServer::new("v1.33.13", "33");
    let (schema, registry) = schema_for(&server);
    schema.learn().await.unwrap();
    let _ = schema.refused(Written::Node, "status.declaredFeatures");
    let mut status = node_status();
    schema.prune(Written::Node, &mut status);
    assert!(status["status"].get("declaredFeatures").is_none());

    // The apiserver is upgraded; its new schema (this fake serves one document for every
    // release) still lacks the field, so it stays out, for the schema's sake now.
    *server.version.lock().unwrap() = ("v1.34.4".to_owned(), "34".to_owned());
    schema.learn().await.unwrap();
    assert_eq!(schema.version().map(|v| v.minor), Some(34));
    assert_eq!(server.reads("/openapi/v3/api/v1"), 2);
    let text = metrics_text(&registry);
    assert!(
        text.contains("orca_apiserver_info{version=\"v1.34.4\",support=\"tested\"} 1")
            && !text.contains("v1.33.13"),
        "{text}"
    );
    // The refusal is forgotten: a Lease field refused under the old release is sent again.
    let _ = schema.refused(Written::Lease, "spec.strategy");
    *server.version.lock().unwrap() = ("v1.35.4".to_owned(), "35".to_owned());
    schema.learn().await.unwrap();
    let mut lease = json!({"spec": {"strategy": "OldestEmulationVersion"}});
    schema.prune(Written::Lease, &mut lease);
    assert_eq!(lease["spec"]["strategy"], "OldestEmulationVersion");
}

#[tokio::test]
async fn a_schema_that_cannot_be_read_leaves_the_one_held_and_is_read_once_it_can() {
    let server = FakeServer::new("v1.31.14", "31");
    let (schema, _registry) = schema_for(&server);
    schema.learn().await.unwrap();
    *server.version.lock().unwrap() = ("v1.32.13".to_owned(), "32".to_owned());
    *server.documents_status.lock().unwrap() = 503;
    assert!(schema.learn().await.is_err());
    // The release is known (for what exec says), the schema held is the last one read.
    assert_eq!(schema.version().map(|v| v.minor), Some(32));
    let mut status = node_status();
    schema.prune(Written::Node, &mut status);
    assert!(status["status"].get("declaredFeatures").is_none());
    assert_eq!(server.reads("/openapi/v3/api/v1"), 2);

    // Once the documents answer, the new release's schema is read, and only once.
    *server.documents_status.lock().unwrap() = 200;
    schema.learn().await.unwrap();
    schema.learn().await.unwrap();
    assert_eq!(server.reads("/openapi/v3/api/v1"), 3);
}
