//! The loops of the process, named: what [`super::tasks::ProcessTasks`] owns and what a
//! failure names.

/// The loops of the process, by what each does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProcessLoop {
    /// `/metrics`, `/healthz` and `/readyz`.
    MetricsServer,
    /// The kubelet HTTPS API (`kubectl logs`).
    KubeletApi,
    /// Terminating instances of this cluster under node names no node here declares.
    StraySweep,
    /// Listing the cluster's instances for the namespaces' caps.
    Census,
    /// Counting and recording what the pods' instances cost.
    Cost,
    /// Refreshing the instance-type catalogue from EC2.
    CatalogueRefresh,
    /// Reading the apiserver's release and schema again.
    ServerSchema,
    /// Reading the served pods' usage from CloudWatch.
    PodUsage,
    /// Loading the embedded plugins that failed to load at startup.
    EmbeddedRetry,
    /// Naming, once, the DaemonSets that place a pod on the nodes.
    DaemonSetCheck,
    /// Pulling the plugins named by OCI reference.
    OciRefresh,
    /// Watching the plugins directory.
    PluginWatch,
    /// Reading EC2's advance warnings from the interruption queue.
    InterruptionQueue,
    /// The watch on the node Leases (replicas sharing the nodes).
    LeaseWatch,
    /// A declared node's pod watch (served here or not).
    PodWatch(String),
    /// Publishing plugin Events on a declared node.
    PluginEvents(String),
    /// Serving a declared node (alone, or in turns under its Lease).
    Serving(String),
}

impl ProcessLoop {
    /// Whether the loop may finish by itself before shutdown with nothing wrong: the embedded
    /// plugins' retry ends once every one has loaded, the DaemonSet check once it has named
    /// them. Every other loop runs until shutdown.
    pub fn may_finish(&self) -> bool {
        matches!(
            self,
            ProcessLoop::EmbeddedRetry | ProcessLoop::DaemonSetCheck
        )
    }
}

impl std::fmt::Display for ProcessLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProcessLoop::MetricsServer => f.write_str("the metrics server"),
            ProcessLoop::KubeletApi => f.write_str("the kubelet API"),
            ProcessLoop::StraySweep => f.write_str("the sweep for instances of undeclared nodes"),
            ProcessLoop::Census => f.write_str("the census of the cluster's instances"),
            ProcessLoop::Cost => f.write_str("the cost of the pods' instances"),
            ProcessLoop::CatalogueRefresh => f.write_str("the catalogue refresh"),
            ProcessLoop::ServerSchema => f.write_str("the apiserver's release and schema"),
            ProcessLoop::PodUsage => f.write_str("the reading of the pods' usage"),
            ProcessLoop::EmbeddedRetry => f.write_str("the embedded plugins' retry"),
            ProcessLoop::DaemonSetCheck => f.write_str("the check of the nodes' DaemonSets"),
            ProcessLoop::OciRefresh => f.write_str("the OCI plugin refresh"),
            ProcessLoop::PluginWatch => f.write_str("the plugins directory watch"),
            ProcessLoop::InterruptionQueue => f.write_str("the interruption queue consumer"),
            ProcessLoop::LeaseWatch => f.write_str("the watch on the node Leases"),
            ProcessLoop::PodWatch(node) => write!(f, "the pod watch of node {node}"),
            ProcessLoop::PluginEvents(node) => write!(f, "the plugin Events of node {node}"),
            ProcessLoop::Serving(node) => write!(f, "serving node {node}"),
        }
    }
}
