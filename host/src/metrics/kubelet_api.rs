//! The kubelet port's connections: how many are open, and how many orca closed itself and
//! why. A pod holding connections open, or a flood at the cap, shows here before it shows as
//! `kubectl logs` failing.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Why orca closed a kubelet API connection itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionClose {
    /// `kubeletApi.maxConnections` were open: closed as accepted, before its handshake.
    AtCapacity,
    /// The TLS handshake took longer than `kubeletApi.handshakeTimeout`.
    HandshakeTimedOut,
    /// The TLS handshake failed (not TLS, no common version or cipher, a bad certificate).
    HandshakeFailed,
    /// No request in flight for `kubeletApi.idleTimeout`, or request headers slower than
    /// `kubeletApi.headerReadTimeout`.
    Idle,
}

impl ConnectionClose {
    pub const ALL: [ConnectionClose; 4] = [
        ConnectionClose::AtCapacity,
        ConnectionClose::HandshakeTimedOut,
        ConnectionClose::HandshakeFailed,
        ConnectionClose::Idle,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionClose::AtCapacity => "at_capacity",
            ConnectionClose::HandshakeTimedOut => "handshake_timed_out",
            ConnectionClose::HandshakeFailed => "handshake_failed",
            ConnectionClose::Idle => "idle",
        }
    }
}

impl EncodeLabelValue for ConnectionClose {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CloseLabels {
    reason: ConnectionClose,
}

/// `orca_kubelet_api_connections_open` and `orca_kubelet_api_connections_closed_total{reason}`.
pub struct KubeletApiMetrics {
    open: Gauge,
    closed: Family<CloseLabels, Counter>,
}

impl Default for KubeletApiMetrics {
    /// Families not registered anywhere, for a kubelet API started without a metrics registry
    /// (unit tests).
    fn default() -> Self {
        KubeletApiMetrics {
            open: Gauge::default(),
            closed: Family::default(),
        }
    }
}

impl KubeletApiMetrics {
    pub fn register(registry: &mut Registry) -> KubeletApiMetrics {
        let metrics = KubeletApiMetrics::default();
        registry.register(
            "orca_kubelet_api_connections_open",
            "Connections to the kubelet API open now, handshaking or served",
            metrics.open.clone(),
        );
        registry.register(
            "orca_kubelet_api_connections_closed",
            "Kubelet API connections orca closed itself, by reason: at_capacity (refused at \
             accept, kubeletApi.maxConnections open), handshake_timed_out, handshake_failed, \
             idle (no request in flight for kubeletApi.idleTimeout, or headers slower than \
             kubeletApi.headerReadTimeout)",
            metrics.closed.clone(),
        );
        // Every reason from the start, so a rate over it has a zero to start from.
        for reason in ConnectionClose::ALL {
            let _ = metrics.closed.get_or_create(&CloseLabels { reason });
        }
        metrics
    }

    /// A connection was accepted and is held until the returned guard drops.
    pub fn opened(&self) -> OpenConnection {
        self.open.inc();
        OpenConnection(self.open.clone())
    }

    pub fn closed(&self, reason: ConnectionClose) {
        self.closed.get_or_create(&CloseLabels { reason }).inc();
    }
}

/// One open connection in `orca_kubelet_api_connections_open`, for as long as it lives.
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    #[test]
    fn open_connections_are_counted_while_held_and_closes_by_reason() {
        let mut registry = Registry::default();
        let metrics = KubeletApiMetrics::register(&mut registry);
        let first = metrics.opened();
        let second = metrics.opened();
        drop(first);
        metrics.closed(ConnectionClose::AtCapacity);
        metrics.closed(ConnectionClose::Idle);
        metrics.closed(ConnectionClose::Idle);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("orca_kubelet_api_connections_open 1\n"),
            "{text}"
        );
        for line in [
            "orca_kubelet_api_connections_closed_total{reason=\"at_capacity\"} 1\n",
            "orca_kubelet_api_connections_closed_total{reason=\"idle\"} 2\n",
            "orca_kubelet_api_connections_closed_total{reason=\"handshake_failed\"} 0\n",
            "orca_kubelet_api_connections_closed_total{reason=\"handshake_timed_out\"} 0\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
        drop(second);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("orca_kubelet_api_connections_open 0\n"),
            "{text}"
        );
    }
}
