//! Content digests as a registry names them (`sha256:<64 lowercase hex>`), checked where they
//! come in: a digest from a manifest, a response header, the configuration or a file on disk
//! becomes a [`ContentDigest`] before anything uses it, so none can name a file path or a URL
//! path of its own choosing.

use std::fmt;
use std::str::FromStr;

use oci_spec::image::{Digest, DigestAlgorithm};

use crate::policy::wasm::sha256_hex;

/// A well-formed sha256 digest: the algorithm `sha256`, `:`, 64 lowercase hex digits.
///
/// # Guarantees
/// Its text holds only `sha256:` and hex digits: safe in a file name and in a URL path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContentDigest(String);

/// Why a digest from outside was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error(
        "{shown} is not a digest ({reason}; a digest is sha256: followed by 64 lowercase hex digits)"
    )]
    Malformed { shown: String, reason: String },
    #[error("{shown} is a {algorithm} digest; orca verifies sha256 digests only")]
    UnsupportedAlgorithm { shown: String, algorithm: String },
}

/// At most this much of a refused digest is quoted in a message: a hostile one can be long.
const SHOWN_CHARS: usize = 160;

fn shown(text: &str) -> String {
    let mut quoted = format!("{:?}", text.chars().take(SHOWN_CHARS).collect::<String>());
    if text.chars().count() > SHOWN_CHARS {
        quoted.push('…');
    }
    quoted
}

impl ContentDigest {
    /// The digest `text` names, by the OCI image spec's grammar, when it is a sha256 one.
    ///
    /// # Errors
    /// [`DigestError`]: not the grammar (a path, `..`, upper case, a wrong length), or another
    /// algorithm.
    pub fn parse(text: &str) -> Result<ContentDigest, DigestError> {
        let digest = Digest::from_str(text).map_err(|error| DigestError::Malformed {
            shown: shown(text),
            reason: error.to_string(),
        })?;
        match digest.algorithm() {
            // The spec's grammar checks a sha256 value is 64 lowercase hex digits.
            DigestAlgorithm::Sha256 => Ok(ContentDigest(digest.to_string())),
            other => Err(DigestError::UnsupportedAlgorithm {
                shown: shown(text),
                algorithm: other.to_string(),
            }),
        }
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> ContentDigest {
        ContentDigest(format!("sha256:{}", sha256_hex(bytes)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `sha256-<hex>`: the digest as a file name.
    pub fn file_stem(&self) -> String {
        self.0.replace(':', "-")
    }
}

impl fmt::Display for ContentDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_sha256_digests_are_accepted() {
        let hex = "a".repeat(64);
        let accepted = [format!("sha256:{hex}"), ContentDigest::of(b"x").to_string()];
        for text in &accepted {
            let digest = ContentDigest::parse(text).unwrap();
            assert_eq!(digest.as_str(), text);
            assert_eq!(digest.file_stem(), text.replace(':', "-"));
        }
        // Issue 40: a layer digest was joined onto the store's path as it came.
        let malformed = [
            String::new(),
            "/etc/passwd".to_owned(),
            "/var/lib/orca/plugins/pulled/components/sha256-x".to_owned(),
            format!("sha256:../../{}", &hex[6..]),
            format!("sha256:{}/..", &hex[3..]),
            format!("sha256/../x:{hex}"),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:{}", &hex[1..]),
            format!("sha256:{hex}a"),
            format!("sha256:{hex}\n"),
            format!(" sha256:{hex}"),
            format!("SHA256:{hex}"),
            "sha256:".to_owned(),
            hex.clone(),
            format!("sha512:{}", "a".repeat(64)),
        ];
        for text in &malformed {
            assert!(
                matches!(
                    ContentDigest::parse(text),
                    Err(DigestError::Malformed { .. })
                ),
                "{text:?}: {:?}",
                ContentDigest::parse(text)
            );
        }
        let other = [
            format!("sha512:{}", "a".repeat(128)),
            format!("sha384:{}", "a".repeat(96)),
            "multihash+base58:QmRZxt2b1FVZPNqd8hsiykDL3TdBDeTSPX9Kv46HmX4Gx8".to_owned(),
        ];
        for text in &other {
            assert!(
                matches!(
                    ContentDigest::parse(text),
                    Err(DigestError::UnsupportedAlgorithm { .. })
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_refused_digest_is_quoted_short_and_escaped() {
        let long = format!("/{}\n", "a/".repeat(1000));
        let message = ContentDigest::parse(&long).unwrap_err().to_string();
        assert!(message.len() < 600, "{message}");
        assert!(!message.contains('\n'), "{message}");
        assert!(message.contains('…'), "{message}");
    }
}
