//! Registry credentials from Docker's config.json format, which a Kubernetes
//! `kubernetes.io/dockerconfigjson` Secret holds under `.dockerconfigjson`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    /// base64 of `user:password`.
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// Why the registry credentials cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("reading the registry credentials {}: {source}", .path.display())]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the registry credentials {} are not a Docker config.json (.dockerconfigjson): {source}",
        .path.display()
    )]
    ParseFailed {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the credentials for {registry}: `auth` is not base64: {source}")]
    NotBase64 {
        registry: String,
        #[source]
        source: base64::DecodeError,
    },
    #[error("the credentials for {registry}: `auth` is not UTF-8")]
    NotUtf8 { registry: String },
    #[error("the credentials for {registry}: `auth` is not user:password")]
    NotUserPassword { registry: String },
    /// The credentials do not fit in an `Authorization` header.
    #[error("the registry credentials are not printable text")]
    NotPrintable,
}

impl DockerConfig {
    /// # Errors
    /// [`CredentialsError::ReadFailed`] or [`CredentialsError::ParseFailed`], naming the file.
    pub fn read(path: &Path) -> Result<DockerConfig, CredentialsError> {
        let text = std::fs::read(path).map_err(|source| CredentialsError::ReadFailed {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|source| CredentialsError::ParseFailed {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The credentials for `registry` (`host[:port]`), matching the keys Docker and the
    /// kubelet accept (`host`, `https://host`, `https://host/v1/`); anonymous when none match.
    ///
    /// # Errors
    /// An entry for the registry that cannot be decoded.
    pub fn auth_for(&self, registry: &str) -> Result<RegistryAuth, CredentialsError> {
        let entry = self.auths.iter().find_map(|(key, entry)| {
            let host = key
                .trim_start_matches("https://")
                .trim_start_matches("http://")
                .split('/')
                .next()
                .unwrap_or_default();
            (host == registry).then_some(entry)
        });
        let Some(entry) = entry else {
            return Ok(RegistryAuth::Anonymous);
        };
        if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
            return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
        }
        let Some(auth) = &entry.auth else {
            return Ok(RegistryAuth::Anonymous);
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|source| CredentialsError::NotBase64 {
                registry: registry.to_owned(),
                source,
            })?;
        let decoded = String::from_utf8(decoded).map_err(|_| CredentialsError::NotUtf8 {
            registry: registry.to_owned(),
        })?;
        let (user, password) =
            decoded
                .split_once(':')
                .ok_or_else(|| CredentialsError::NotUserPassword {
                    registry: registry.to_owned(),
                })?;
        Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> DockerConfig {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn credentials_match_the_registry_in_every_key_form_docker_writes() {
        // base64("team:s3cret")
        let encoded = "dGVhbTpzM2NyZXQ=";
        for key in [
            "127.0.0.1:5000",
            "https://127.0.0.1:5000",
            "https://127.0.0.1:5000/v1/",
        ] {
            let config = config(&format!(
                r#"{{"auths":{{"{key}":{{"auth":"{encoded}"}}}}}}"#
            ));
            assert_eq!(
                config.auth_for("127.0.0.1:5000").unwrap(),
                RegistryAuth::Basic("team".into(), "s3cret".into()),
                "{key}"
            );
            assert_eq!(
                config.auth_for("127.0.0.1:5001").unwrap(),
                RegistryAuth::Anonymous
            );
        }
        let plain = config(r#"{"auths":{"ghcr.io":{"username":"u","password":"p"}}}"#);
        assert_eq!(
            plain.auth_for("ghcr.io").unwrap(),
            RegistryAuth::Basic("u".into(), "p".into())
        );
        let broken = config(r#"{"auths":{"ghcr.io":{"auth":"not base64!"}}}"#);
        assert!(
            broken
                .auth_for("ghcr.io")
                .unwrap_err()
                .to_string()
                .contains("base64")
        );
    }
}
