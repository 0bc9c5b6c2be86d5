//! What orca knows of the apiserver it writes to: its release, the fields orca leaves out
//! because the server does not know them, and the writes it refused for a field.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabels {
    /// The release as the server reports it (`v1.33.13`, `v1.33.5-eks-3025e55`).
    pub version: String,
    /// `tested`, `too_old` or `untested`, against the minors orca is tested on.
    pub support: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FieldLabels {
    /// The object written: `Node`, `Lease`, `Pod`.
    pub kind: String,
    /// The field's path in it (`status.declaredFeatures`).
    pub field: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReadLabels {
    /// `ok` or `error`.
    pub result: String,
}

/// The families of [`crate::cluster::apiserver::ServerSchema`].
pub struct ApiserverMetrics {
    server: Family<ServerLabels, Gauge>,
    omitted: Family<FieldLabels, Gauge>,
    refusals: Family<FieldLabels, Counter>,
    reads: Family<ReadLabels, Counter>,
}

impl ApiserverMetrics {
    pub fn register(registry: &mut Registry) -> ApiserverMetrics {
        let metrics = ApiserverMetrics {
            server: Family::default(),
            omitted: Family::default(),
            refusals: Family::default(),
            reads: Family::default(),
        };
        registry.register(
            "orca_apiserver_info",
            "The apiserver orca writes to: 1 for its release as last read",
            metrics.server.clone(),
        );
        registry.register(
            "orca_apiserver_fields_omitted",
            "Fields orca leaves out of what it writes because the apiserver's schema lacks them: 1 while left out",
            metrics.omitted.clone(),
        );
        registry.register(
            "orca_apiserver_field_refusals",
            "Writes the apiserver refused naming a field it does not know (orca wrote again without it)",
            metrics.refusals.clone(),
        );
        registry.register(
            "orca_apiserver_schema_reads",
            "Reads of the apiserver's release and OpenAPI schema, by result",
            metrics.reads.clone(),
        );
        // Both series from the start, so a failure rate has a denominator before any failure.
        for result in ["ok", "error"] {
            drop(metrics.reads.get_or_create(&ReadLabels {
                result: result.to_owned(),
            }));
        }
        metrics
    }

    /// The server now answering is `version`.
    pub fn server(&self, version: &str, support: &str) {
        self.server.clear();
        self.server
            .get_or_create(&ServerLabels {
                version: version.to_owned(),
                support: support.to_owned(),
            })
            .set(1);
    }

    /// Which fields are left out now, replacing the earlier set.
    pub fn omitted<'a>(&self, fields: impl IntoIterator<Item = (&'a str, &'a str)>) {
        self.omitted.clear();
        for (kind, field) in fields {
            self.omitted
                .get_or_create(&FieldLabels {
                    kind: kind.to_owned(),
                    field: field.to_owned(),
                })
                .set(1);
        }
    }

    pub fn refused(&self, kind: &str, field: &str) {
        self.refusals
            .get_or_create(&FieldLabels {
                kind: kind.to_owned(),
                field: field.to_owned(),
            })
            .inc();
    }

    pub fn read(&self, ok: bool) {
        self.reads
            .get_or_create(&ReadLabels {
                result: if ok { "ok" } else { "error" }.to_owned(),
            })
            .inc();
    }
}
