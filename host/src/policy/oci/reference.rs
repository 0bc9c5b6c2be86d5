//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:DIGEST`.

use oci_client::Reference;

use super::digest::{ContentDigest, DigestError};

/// A plugin's reference as configured, parsed.
#[derive(Debug, Clone)]
pub struct PluginReference {
    /// As configured, for messages and Events.
    pub text: String,
    pub reference: Reference,
    /// The digest it names, when it names one.
    pub pinned: Option<ContentDigest>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("it does not start with oci://")]
    NotOci,
    #[error("{0}")]
    Unparsable(String),
    #[error("it names no registry host (oci://registry.example.com/team/plugin:v1)")]
    NoRegistry,
    #[error(transparent)]
    Digest(#[from] DigestError),
}

impl PluginReference {
    /// # Errors
    /// [`ReferenceError`] saying what is wrong with `text`.
    pub fn parse(text: &str) -> Result<PluginReference, ReferenceError> {
        let rest = text.strip_prefix("oci://").ok_or(ReferenceError::NotOci)?;
        // Without an explicit registry, the OCI reference grammar would pick Docker Hub: a
        // plugin source names its registry.
        let host = rest.split('/').next().unwrap_or_default();
        if !rest.contains('/') || !(host.contains('.') || host.contains(':') || host == "localhost")
        {
            return Err(ReferenceError::NoRegistry);
        }
        let reference: Reference = rest.parse().map_err(|error: oci_client::ParseError| {
            ReferenceError::Unparsable(error.to_string())
        })?;
        let pinned = reference.digest().map(ContentDigest::parse).transpose()?;
        Ok(PluginReference {
            text: text.to_owned(),
            reference,
            pinned,
        })
    }

    /// Whether it names a digest: its content never changes, so it is pulled once.
    pub fn is_pinned(&self) -> bool {
        self.pinned.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_digests_parse_and_anything_else_is_refused() {
        let tagged = PluginReference::parse("oci://127.0.0.1:5000/team/selector:v1").unwrap();
        assert_eq!(tagged.reference.registry(), "127.0.0.1:5000");
        assert_eq!(tagged.reference.repository(), "team/selector");
        assert_eq!(tagged.reference.tag(), Some("v1"));
        assert!(!tagged.is_pinned());
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned =
            PluginReference::parse(&format!("oci://ghcr.io/team/selector@{digest}")).unwrap();
        assert!(pinned.is_pinned());
        assert_eq!(pinned.reference.digest(), Some(digest.as_str()));
        assert_eq!(pinned.pinned.unwrap().as_str(), digest);
        for bad in [
            "ghcr.io/team/selector:v1",
            "oci://selector:v1",
            "oci://team/selector:v1",
            "oci://ghcr.io/team/selector@sha256:short",
            "oci://ghcr.io/Team/selector:v1",
            // Well-formed, but not a digest orca can check.
            format!("oci://ghcr.io/team/selector@sha512:{}", "a".repeat(128)).as_str(),
        ] {
            assert!(PluginReference::parse(bad).is_err(), "{bad}");
        }
    }
}
