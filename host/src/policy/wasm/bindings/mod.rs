//! Host bindings, one module per `orca:policy` version this host serves (each generated from
//! its frozen folder in `plugin-sdk/wit/`). The newest version's types are the host's own;
//! a plugin built for an older version is called through its own bindings and its values are
//! converted at that boundary, so nothing past `LoadedPlugin` knows which version answered.

pub mod v0_1;
pub mod v0_2;

pub use v0_2::orca::policy::host::{InstanceQuery, LogLevel};
pub use v0_2::orca::policy::types::{
    AnnotationError, Architecture, Candidate, Hook, InstanceType, Market, MarketDecision, Pod,
    PolicyError, Resources, Tag, TagContext, Toleration,
};

/// An `orca:policy` version this host serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum InterfaceVersion {
    /// The first interface.
    V0_1,
    /// `policy-error` gains `declined`.
    V0_2,
}

impl InterfaceVersion {
    /// Oldest first.
    pub const ALL: [InterfaceVersion; 2] = [InterfaceVersion::V0_1, InterfaceVersion::V0_2];
    /// What the SDK in this tree builds against.
    pub const NEWEST: InterfaceVersion = InterfaceVersion::V0_2;

    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceVersion::V0_1 => "0.1.0",
            InterfaceVersion::V0_2 => "0.2.0",
        }
    }

    /// The version whose bindings serve a plugin declaring `declared`, by cargo's semver rule
    /// (below 1.0 the minor must match: 0.1.3 is served by 0.1.0, 0.3.0 by nothing here).
    pub fn serving(declared: &str) -> Option<InterfaceVersion> {
        let mut parts = declared.trim().split('.');
        let major: u64 = parts.next()?.parse().ok()?;
        let minor: u64 = parts.next()?.parse().ok()?;
        // A patch is optional but must be a number when present.
        if let Some(patch) = parts.next() {
            patch.split(['-', '+']).next()?.parse::<u64>().ok()?;
        }
        match (major, minor) {
            (0, 1) => Some(InterfaceVersion::V0_1),
            (0, 2) => Some(InterfaceVersion::V0_2),
            _ => None,
        }
    }

    /// `0.1.0, 0.2.0`, for messages.
    pub fn supported_list() -> String {
        InterfaceVersion::ALL
            .map(InterfaceVersion::as_str)
            .join(", ")
    }
}

impl std::fmt::Display for InterfaceVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    #[test]
    fn declared_versions_are_served_by_cargo_semver() {
        assert_eq!(
            InterfaceVersion::serving("0.1.0"),
            Some(InterfaceVersion::V0_1)
        );
        assert_eq!(
            InterfaceVersion::serving("0.1.3"),
            Some(InterfaceVersion::V0_1)
        );
        assert_eq!(
            InterfaceVersion::serving("0.2.0"),
            Some(InterfaceVersion::V0_2)
        );
        assert_eq!(
            InterfaceVersion::serving("0.2.1-rc.1"),
            Some(InterfaceVersion::V0_2)
        );
        for refused in ["0.3.0", "0.0.9", "1.0.0", "garbage", "0.x", "", "0.2.z"] {
            assert_eq!(InterfaceVersion::serving(refused), None, "{refused:?}");
        }
        assert_eq!(
            InterfaceVersion::NEWEST.as_str(),
            orca_plugin_sdk::INTERFACE_VERSION,
            "the SDK builds against the newest version the host serves"
        );
    }

    /// A released folder never changes (plugin-sdk/wit/README.md): plugins built against it
    /// are in users' hands. A new interface is a new folder, and a new line here.
    #[test]
    fn released_interface_folders_are_frozen() {
        let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugin-sdk/wit");
        for (folder, expected) in FROZEN {
            let mut digest = Sha256::new();
            for file in ["host.wit", "policy.wit", "types.wit"] {
                let text = std::fs::read(wit.join(folder).join(file))
                    .unwrap_or_else(|error| panic!("reading {folder}/{file}: {error}"));
                digest.update(file.as_bytes());
                digest.update(&text);
            }
            let found: String = digest
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                &found, expected,
                "plugin-sdk/wit/{folder} changed: a released interface is frozen; put the change \
                 in a new version's folder"
            );
        }
    }

    const FROZEN: &[(&str, &str)] = &[
        (
            "since_v0.1.0",
            "4d76b52653ae2c7ecf3a52469814690fbc2528b64eb42a508e015ae5dc3f5e5c",
        ),
        (
            "since_v0.2.0",
            "ffcdc70121aa032b945092d47a16423d7fbdb83ea8ae5662e72db40f1c4dce87",
        ),
    ];
}
