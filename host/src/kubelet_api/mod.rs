//! orca's kubelet API: the HTTPS server on the Node's kubelet port that the apiserver calls
//! for `kubectl logs`, `kubectl exec` (run through the provider, see [`exec`]) and the pods'
//! usage, with the kubelet's authentication and authorization.

pub mod auth;
mod exec;
mod idle;
mod logs;
mod routes;
mod server;
mod state;
mod target;
pub mod tls;
mod unsupported;
mod usage;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{KubeletApiConfig, NodeConfig};
use crate::metrics::KubeletApiMetrics;
use crate::process::pod_usage::PodUsages;
use crate::process::served_nodes::ServedNodes;

pub use state::ApiState;
pub use unsupported::message as unsupported_message;

/// Why the kubelet API could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletApiError {
    #[error("preparing the kubelet API's TLS")]
    TlsFailed(#[source] tls::TlsError),
    #[error(
        "listening on {address} (kubeletApi.bindAddress, unset: the Node's address from \
         node.internalIP or $POD_IP; node.daemonPort)"
    )]
    ListenFailed {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What the kubelet API serves from.
pub struct KubeletApiDeps {
    pub client: kube::Client,
    pub config: KubeletApiConfig,
    /// Every node declared: the serving certificate names them all, and the first is the node
    /// requests about no node's data are authorized on. They share the address and port.
    pub nodes: Vec<NodeConfig>,
    /// The nodes served now, whose pods the API answers for.
    pub served: Arc<ServedNodes>,
    /// Where its connections are counted.
    pub metrics: Arc<KubeletApiMetrics>,
    /// The served pods' usage as last read.
    pub usages: Arc<PodUsages>,
    /// What orca knows of the apiserver: whether it passes exec's WebSocket through.
    pub schema: Arc<crate::cluster::apiserver::ServerSchema>,
}

/// Prepares TLS, binds the port, and serves until `shutdown` in a spawned task.
///
/// # Errors
/// [`KubeletApiError`] when no serving certificate can be had or the port is taken.
pub async fn start(
    deps: KubeletApiDeps,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, KubeletApiError> {
    let first = deps.nodes.first().cloned().unwrap_or_default();
    let address = crate::node::node_address(&first);
    let identity = tls::ServingIdentity {
        node_name: first.name.clone(),
        addresses: vec![address],
        hostnames: deps.nodes.iter().map(|node| node.name.clone()).collect(),
    };
    let tls_config = tls::server_config(
        &deps.config,
        deps.client.clone(),
        identity,
        shutdown.clone(),
    )
    .await
    .map_err(KubeletApiError::TlsFailed)?;
    // Unset, the address the Node advertises: the one the apiserver is told to call.
    let bind = SocketAddr::new(
        deps.config.bind_address.unwrap_or(address),
        first.daemon_port,
    );
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|source| KubeletApiError::ListenFailed {
            address: bind,
            source,
        })?;
    tracing::info!(address = %bind, "kubelet API listening");
    let warnings = state::PodWarnings::new(deps.client.clone());
    let state = Arc::new(ApiState {
        gate: auth::Gate::new(Arc::new(auth::KubeReviews::new(deps.client)), &deps.config),
        schema: deps.schema,
        warnings,
        served: deps.served,
        first_node: first.name,
        follow_poll_interval: deps.config.follow_poll_interval.get(),
        log_polls: Arc::new(logs::LogPolls::new(deps.config.follow_poll_interval.get())),
        usages: deps.usages,
    });
    let listening = server::Listening {
        listener,
        tls: tls_config,
        router: routes::router(state),
        bounds: server::Bounds::of(&deps.config),
        metrics: deps.metrics,
    };
    Ok(tokio::spawn(server::serve(listening, shutdown)))
}
