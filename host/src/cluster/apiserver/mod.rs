//! What orca knows of the apiserver it writes to: its release ([`ServerVersion`]), the fields
//! its types have ([`Schema`], from its OpenAPI v3 documents), and the fields it refused.
//! Every object orca writes whole with server-side apply (the Node's status, its Lease) and
//! every pod status patch passes through [`ServerSchema::prune`] first, so a field newer than
//! the server (`status.declaredFeatures` before 1.35) is left out rather than refused; and
//! [`ServerSchema::write`] writes again without a field the server refused anyway (a schema
//! that could not be read, or two apiservers of different releases behind one address).
//!
//! It is learned at startup, again when a watch had to list anew (an apiserver restart, which
//! an upgrade is), when the server refuses a field, and every few minutes (the release only;
//! the schema when the release changed).

mod refusal;
mod schema;
mod version;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

pub use refusal::unknown_fields;
pub use schema::{Schema, SchemaUnreadable, remove_field};
pub use version::{SUPPORTED_MINORS, ServerFeature, ServerVersion, Support, UnreadableVersion};

use crate::metrics::ApiserverMetrics;
use crate::support::Backoff;
use crate::support::errors::{error_chain, lock};

/// How often the release is read again when nothing else asked for it.
const RECHECK_INTERVAL: Duration = Duration::from_secs(300);
/// How long one learning may take before it counts as failed.
const LEARN_TIMEOUT: Duration = Duration::from_secs(20);
/// The waits between tries after a failed learning.
const RETRY: Backoff = Backoff::new(Duration::from_secs(1), RECHECK_INTERVAL);
/// The most times one write is sent again, each without the fields the last refusal named.
const MAX_REWRITES: usize = 4;

/// The objects orca writes, by the OpenAPI definition their fields are checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Written {
    Node,
    Lease,
    Pod,
}

impl Written {
    pub fn definition(self) -> &'static str {
        match self {
            Written::Node => "io.k8s.api.core.v1.Node",
            Written::Lease => "io.k8s.api.coordination.v1.Lease",
            Written::Pod => "io.k8s.api.core.v1.Pod",
        }
    }

    /// The OpenAPI v3 document of its group-version.
    fn document(self) -> &'static str {
        match self {
            Written::Node | Written::Pod => "/openapi/v3/api/v1",
            Written::Lease => "/openapi/v3/apis/coordination.k8s.io/v1",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Written::Node => "Node",
            Written::Lease => "Lease",
            Written::Pod => "Pod",
        }
    }

    const ALL: [Written; 3] = [Written::Node, Written::Lease, Written::Pod];
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the apiserver's release or schema could not be read. orca then writes what it would
/// write to the newest release and leaves out, one write at a time, what the server refuses.
#[derive(Debug, thiserror::Error)]
pub enum LearnError {
    #[error("reading the apiserver's /version")]
    VersionUnreadable(#[source] kube::Error),
    #[error(transparent)]
    VersionUnknown(#[from] UnreadableVersion),
    #[error("reading the apiserver's OpenAPI document {document}")]
    DocumentUnreadable {
        document: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("the apiserver answered {status} for its OpenAPI document {document}")]
    DocumentRefused {
        document: &'static str,
        status: hyper::StatusCode,
    },
    #[error(transparent)]
    SchemaUnreadable(#[from] SchemaUnreadable),
    #[error("reading the apiserver's release and schema took over {0:?}")]
    TimedOut(Duration),
}

/// A write the apiserver refused because it does not know a field: orca writes again without
/// it, and says so with this.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the apiserver{} refused {kind} field {field} (it does not know it): written again without it",
    server.as_ref().map(|v| format!(" ({v})")).unwrap_or_default()
)]
pub struct FieldRefused {
    pub kind: Written,
    pub field: String,
    /// The release the server reported last, if it was read.
    pub server: Option<String>,
}

/// What is known now.
#[derive(Default)]
struct Known {
    version: Option<ServerVersion>,
    /// The schema last read, and the release it was read from.
    schema: Option<(String, Arc<Schema>)>,
    /// Fields the server refused since its release was last read: left out until it changes.
    refused: BTreeSet<(Written, String)>,
    /// Fields left out, as the metric and the log have them.
    omitted: BTreeSet<(Written, String)>,
}

/// What orca knows of its apiserver, shared by every part that writes to it.
pub struct ServerSchema {
    client: kube::Client,
    known: Mutex<Known>,
    metrics: Arc<ApiserverMetrics>,
    relearn: Notify,
}

impl ServerSchema {
    pub fn new(client: kube::Client, metrics: Arc<ApiserverMetrics>) -> ServerSchema {
        ServerSchema {
            client,
            known: Mutex::new(Known::default()),
            metrics,
            relearn: Notify::new(),
        }
    }

    /// The release last read.
    pub fn version(&self) -> Option<ServerVersion> {
        lock(&self.known).version.clone()
    }

    /// Asks the learning loop to read the release (and, if it changed, the schema) now: a
    /// watch had to list anew, which is what an apiserver restart looks like from here.
    pub fn relearn_soon(&self) {
        self.relearn.notify_one();
    }

    /// Reads the release and, when the schema held is not that release's, the schema. A
    /// release read is kept even when its schema cannot be read; a schema that cannot be read
    /// leaves the one held before.
    ///
    /// # Errors
    /// [`LearnError`]: the release or a document could not be read.
    pub async fn learn(&self) -> Result<(), LearnError> {
        let learned = tokio::time::timeout(LEARN_TIMEOUT, self.read_server())
            .await
            .unwrap_or(Err(LearnError::TimedOut(LEARN_TIMEOUT)));
        self.metrics.read(learned.is_ok());
        learned
    }

    async fn read_server(&self) -> Result<(), LearnError> {
        let info = self
            .client
            .apiserver_version()
            .await
            .map_err(LearnError::VersionUnreadable)?;
        let version = ServerVersion::parse(&info.git_version, &info.major, &info.minor)?;
        if !self.take_version(&version) {
            return Ok(());
        }
        let mut schema = Schema::default();
        let mut documents: Vec<&'static str> = Written::ALL.iter().map(|w| w.document()).collect();
        documents.sort_unstable();
        documents.dedup();
        for document in documents {
            let body = self.document(document).await?;
            schema.read(document, &body)?;
        }
        let mut known = lock(&self.known);
        // Another learning may have read a newer release meanwhile: its schema is not this.
        if known.version.as_ref() == Some(&version) {
            known.schema = Some((version.git_version, Arc::new(schema)));
        }
        Ok(())
    }

    /// Keeps `version` as the server's release; true when the schema held is not its own. A
    /// new release forgets the refusals of the last.
    fn take_version(&self, version: &ServerVersion) -> bool {
        let mut known = lock(&self.known);
        if known.version.as_ref() != Some(version) {
            known.refused.clear();
            known.omitted.clear();
            self.metrics.omitted(std::iter::empty());
            self.metrics
                .server(&version.git_version, support_label(version.support()));
            announce(version);
            known.version = Some(version.clone());
        }
        known
            .schema
            .as_ref()
            .is_none_or(|(of, _)| *of != version.git_version)
    }

    async fn document(&self, document: &'static str) -> Result<bytes::Bytes, LearnError> {
        let unreadable = |source| LearnError::DocumentUnreadable { document, source };
        let request = hyper::Request::get(document)
            .header(hyper::header::ACCEPT, "application/json")
            .body(kube::client::Body::empty())
            .map_err(|error| unreadable(kube::Error::HttpError(error)))?;
        let response = self.client.send(request).await.map_err(unreadable)?;
        let status = response.status();
        if !status.is_success() {
            return Err(LearnError::DocumentRefused { document, status });
        }
        response
            .into_body()
            .collect_bytes()
            .await
            .map_err(unreadable)
    }

    /// Learns until shutdown: at once when asked ([`Self::relearn_soon`]), else every
    /// [`RECHECK_INTERVAL`], sooner after a failure.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut retries = RETRY.delays();
        // Startup read the schema, or failed to: then the first try again comes soon.
        let mut wait = if lock(&self.known).schema.is_some() {
            RECHECK_INTERVAL
        } else {
            retries.next_delay()
        };
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = self.relearn.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
            wait = match self.learn().await {
                Ok(()) => {
                    retries = RETRY.delays();
                    RECHECK_INTERVAL
                }
                Err(error) => {
                    let delay = retries.next_delay();
                    tracing::warn!(error = %error_chain(&error), retry_in = ?delay, "reading the apiserver's release and schema failed; writing as before");
                    delay
                }
            };
        }
    }

    /// Takes out of `value` (an object of kind `kind`, whole or a patch of it) the fields the
    /// server does not know: those its schema lacks and those it refused. The first time a
    /// field is left out it is logged and counted.
    pub fn prune(&self, kind: Written, value: &mut Value) {
        let (schema, refused, server) = {
            let known = lock(&self.known);
            let refused: Vec<String> = known
                .refused
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, field)| field.clone())
                .collect();
            let server = known.version.as_ref().map(|v| v.git_version.clone());
            let schema = known.schema.as_ref().map(|(_, schema)| schema.clone());
            (schema, refused, server)
        };
        let mut dropped = schema
            .map(|schema| schema.prune(kind.definition(), value))
            .unwrap_or_default();
        for field in refused {
            if remove_field(value, &field) {
                dropped.push(field);
            }
        }
        if dropped.is_empty() {
            return;
        }
        let mut known = lock(&self.known);
        let mut new = false;
        for field in dropped {
            if known.omitted.insert((kind, field.clone())) {
                new = true;
                tracing::info!(
                    kind = kind.as_str(),
                    field,
                    server = server.as_deref().unwrap_or("unknown"),
                    "the apiserver does not know this field: orca leaves it out of what it writes"
                );
            }
        }
        if new {
            self.metrics.omitted(
                known
                    .omitted
                    .iter()
                    .map(|(kind, field)| (kind.as_str(), field.as_str())),
            );
        }
    }

    /// Notes that the server refused `field` of `kind`: it is left out from now on (until the
    /// server's release changes), counted, and the release read again soon. Answers the
    /// refusal, for the log.
    pub fn refused(&self, kind: Written, field: &str) -> FieldRefused {
        let server = {
            let mut known = lock(&self.known);
            known.refused.insert((kind, field.to_owned()));
            known.version.as_ref().map(|v| v.git_version.clone())
        };
        self.metrics.refused(kind.as_str(), field);
        self.relearn_soon();
        FieldRefused {
            kind,
            field: field.to_owned(),
            server,
        }
    }

    /// Writes `value` (an object of kind `kind`) with `send`: pruned first, and written again
    /// without the fields the server refuses, each refusal logged as a [`FieldRefused`] and
    /// counted. Answers `send`'s last answer.
    ///
    /// # Errors
    /// `send`'s error when it is not a refusal of fields (or names none that `value` holds).
    pub async fn write<T, F, Fut>(
        &self,
        kind: Written,
        mut value: Value,
        send: F,
    ) -> Result<T, kube::Error>
    where
        F: Fn(Value) -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let mut rewrites = 0;
        loop {
            self.prune(kind, &mut value);
            let error = match send(value.clone()).await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            let kube::Error::Api(status) = &error else {
                return Err(error);
            };
            let fields = unknown_fields(&status.message);
            let held: Vec<String> = fields
                .into_iter()
                .filter(|field| remove_field(&mut value.clone(), field))
                .collect();
            if held.is_empty() || rewrites == MAX_REWRITES {
                return Err(error);
            }
            for field in held {
                let refusal = self.refused(kind, &field);
                tracing::warn!(error = %refusal, apiserver_said = %status.message, "a field was refused");
            }
            rewrites += 1;
        }
    }
}

fn support_label(support: Support) -> &'static str {
    match support {
        Support::Tested => "tested",
        Support::TooOld => "too_old",
        Support::Untested => "untested",
    }
}

/// Logs the release read, and what it means for orca.
fn announce(version: &ServerVersion) {
    let range = format!(
        "1.{}–1.{}",
        SUPPORTED_MINORS.start(),
        SUPPORTED_MINORS.end()
    );
    match version.support() {
        Support::Tested => tracing::info!(%version, tested = %range, "apiserver release read"),
        Support::TooOld => {
            tracing::warn!(%version, tested = %range, "the apiserver is older than every release orca is tested on: fields it does not know are left out, and nothing else is promised")
        }
        Support::Untested => {
            tracing::warn!(%version, tested = %range, "the apiserver is newer than every release orca is tested on")
        }
    }
    if !version.has(ServerFeature::WebSocketsToKubelet) {
        tracing::info!(%version, "this apiserver speaks SPDY to nodes for kubectl exec, which orca does not serve: exec is refused with a message until the apiserver is 1.36 or later (logs, metrics and everything else work)");
    }
}

#[cfg(test)]
mod tests;
