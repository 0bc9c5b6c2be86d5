//! The apiserver's release, read from its `/version`, and what orca relies on that only some
//! releases do.

use std::fmt;

/// The oldest and newest Kubernetes minors orca is tested against (`tests/cluster/versions.env`'s
/// `K8S_OLDEST` and `K8S_NEWEST`; a test checks that the docs, the chart and these agree).
pub const SUPPORTED_MINORS: std::ops::RangeInclusive<u32> = 31..=37;

/// An apiserver's release: `v1.33.13`, or a distribution's spelling of it
/// (`v1.33.5-eks-3025e55`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerVersion {
    pub major: u32,
    pub minor: u32,
    /// What the server reports, as it reports it.
    pub git_version: String,
}

/// Why a `/version` answer says no release orca can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the apiserver reports version {git_version:?} (major {major:?}, minor {minor:?}): no Kubernetes release can be read from it"
)]
pub struct UnreadableVersion {
    pub git_version: String,
    pub major: String,
    pub minor: String,
}

impl ServerVersion {
    /// Reads `/version`'s fields. The release comes from `gitVersion` (`v1.33.13`,
    /// `v1.33.5-eks-3025e55`, `v1.31.0+k3s1`); where that is not a release, from `major` and
    /// `minor`, which distributions suffix (`"33+"`).
    ///
    /// # Errors
    /// [`UnreadableVersion`] when neither gives a release.
    pub fn parse(git_version: &str, major: &str, minor: &str) -> Result<Self, UnreadableVersion> {
        let from_git = git_version
            .strip_prefix('v')
            .and_then(|rest| {
                let mut parts = rest.split(['.', '-', '+']);
                Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
            })
            .filter(|&(major, _)| major > 0);
        let digits = |text: &str| {
            text.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<u32>()
                .ok()
        };
        let (major_number, minor_number) = from_git
            .or_else(|| Some((digits(major)?, digits(minor)?)))
            .ok_or_else(|| UnreadableVersion {
                git_version: git_version.to_owned(),
                major: major.to_owned(),
                minor: minor.to_owned(),
            })?;
        Ok(ServerVersion {
            major: major_number,
            minor: minor_number,
            git_version: git_version.to_owned(),
        })
    }

    /// Whether this release passes `feature` through.
    pub fn has(&self, feature: ServerFeature) -> bool {
        (self.major, self.minor) >= (1, feature.since_minor())
    }

    /// Where this release stands against the minors orca is tested on.
    pub fn support(&self) -> Support {
        if self.major != 1 {
            return Support::Untested;
        }
        if self.minor < *SUPPORTED_MINORS.start() {
            Support::TooOld
        } else if self.minor > *SUPPORTED_MINORS.end() {
            Support::Untested
        } else {
            Support::Tested
        }
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.git_version)
    }
}

/// Where a release stands against [`SUPPORTED_MINORS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Inside the range: CI runs orca's end-to-end tests on its oldest and newest minor.
    Tested,
    /// Older than the oldest minor: orca starts, leaves out what the server does not know,
    /// and says so; nothing is promised.
    TooOld,
    /// Newer than the newest minor (or not Kubernetes 1.x): expected to work, not yet tested.
    Untested,
}

/// What orca relies on that an apiserver passes through only from some release on. (Fields
/// the server does not know are a matter of its schema, not of its release:
/// [`super::Schema`] answers those.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerFeature {
    /// `kubectl exec`'s WebSocket passed through to a node that declares
    /// `ExtendWebSocketsToKubelet`; older apiservers speak SPDY to every node, which orca does
    /// not serve.
    WebSocketsToKubelet,
}

impl ServerFeature {
    /// The first Kubernetes 1.x minor that has it.
    pub fn since_minor(self) -> u32 {
        match self {
            ServerFeature::WebSocketsToKubelet => 36,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_read_as_servers_and_distributions_report_them() {
        let cases = [
            // (gitVersion, major, minor) -> (major, minor)
            (("v1.33.13", "1", "33"), Some((1, 33))),
            (("v1.31.14", "1", "31"), Some((1, 31))),
            (("v1.37.2", "1", "37"), Some((1, 37))),
            // EKS: a suffix on gitVersion, a "+" on minor.
            (("v1.33.5-eks-3025e55", "1", "33+"), Some((1, 33))),
            // k3s and RKE2.
            (("v1.31.0+k3s1", "1", "31"), Some((1, 31))),
            // A pre-release.
            (("v1.38.0-alpha.1", "1", "38"), Some((1, 38))),
            // A build without version stamps: major and minor decide, suffix and all.
            (("v0.0.0-master+$Format:%H$", "1", "36+"), Some((1, 36))),
            (("", "1", "32"), Some((1, 32))),
            // Nothing readable.
            (("v0.0.0-master", "", ""), None),
            (("unknown", "one", "x"), None),
        ];
        for ((git, major, minor), expected) in cases {
            let read = ServerVersion::parse(git, major, minor)
                .ok()
                .map(|v| (v.major, v.minor));
            assert_eq!(read, expected, "{git:?} {major:?} {minor:?}");
        }
        let error = ServerVersion::parse("unknown", "one", "x").unwrap_err();
        assert!(error.to_string().contains("\"unknown\""), "{error}");
    }

    #[test]
    fn exec_websockets_reach_the_node_from_1_36() {
        let at = |minor: u32| ServerVersion {
            major: 1,
            minor,
            git_version: format!("v1.{minor}.0"),
        };
        assert!(!at(31).has(ServerFeature::WebSocketsToKubelet));
        assert!(!at(35).has(ServerFeature::WebSocketsToKubelet));
        assert!(at(36).has(ServerFeature::WebSocketsToKubelet));
        assert!(at(37).has(ServerFeature::WebSocketsToKubelet));
    }

    #[test]
    fn support_is_the_tested_range_and_says_which_side_a_release_falls_outside() {
        let at = |major: u32, minor: u32| {
            ServerVersion {
                major,
                minor,
                git_version: String::new(),
            }
            .support()
        };
        assert_eq!(at(1, 30), Support::TooOld);
        assert_eq!(at(1, 31), Support::Tested);
        assert_eq!(at(1, 34), Support::Tested);
        assert_eq!(at(1, 37), Support::Tested);
        assert_eq!(at(1, 38), Support::Untested);
        assert_eq!(at(2, 0), Support::Untested);
    }
}
