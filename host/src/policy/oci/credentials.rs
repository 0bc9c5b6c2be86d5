//! Registry credentials from Docker's config.json format, which a Kubernetes
//! `kubernetes.io/dockerconfigjson` Secret holds under `.dockerconfigjson`: the `auths`, and
//! the credential helpers Docker asks first (`credHelpers` per registry, else `credsStore` for
//! all), as `docker login` leaves them where a keychain or the Amazon ECR credential helper
//! keeps the secrets.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    /// The helper (`docker-credential-<name>`) of every registry without one of its own.
    #[serde(default)]
    creds_store: Option<String>,
    /// Each registry's helper, by host.
    #[serde(default)]
    cred_helpers: BTreeMap<String, String>,
    /// Where the helpers are; `None`: on `PATH`.
    #[serde(skip)]
    helpers_dir: Option<PathBuf>,
}

/// What a credential helper's `get` prints.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct HelperAnswer {
    username: String,
    secret: String,
}

/// The user name a helper gives with an identity token (an OAuth refresh token) for a secret.
const IDENTITY_TOKEN_USER: &str = "<token>";

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
    #[error(
        "running the credential helper {helper} for {registry} (the Docker config's credHelpers or credsStore) failed: {source}; install it on PATH or take it out of the config"
    )]
    HelperNotRun {
        helper: String,
        registry: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the credential helper {helper} gave no credentials for {registry}: {said}")]
    HelperFailed {
        helper: String,
        registry: String,
        said: String,
    },
    #[error(
        "the credential helper {helper} answered for {registry} with what is not its JSON ({{\"Username\":…,\"Secret\":…}}): {source}"
    )]
    HelperAnswer {
        helper: String,
        registry: String,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the credential helper {helper} gave an identity token for {registry}, which this client cannot use: log in with a user name and password (or a registry token)"
    )]
    IdentityToken { helper: String, registry: String },
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

    /// The credentials for `registry` (`host[:port]`), as Docker finds them: from the
    /// registry's credential helper (`credHelpers`), else from `credsStore`'s, else from
    /// `auths`, matching the keys Docker and the kubelet accept (`host`, `https://host`,
    /// `https://host/v1/`); anonymous when none has any.
    ///
    /// # Errors
    /// An entry for the registry that cannot be decoded; a helper that cannot run, fails or
    /// answers with what is not credentials.
    pub fn auth_for(&self, registry: &str) -> Result<RegistryAuth, CredentialsError> {
        let helper = (self.cred_helpers.iter())
            .find_map(|(key, helper)| (host_of(key) == registry).then_some(helper))
            .or(self.creds_store.as_ref())
            .filter(|helper| !helper.is_empty());
        if let Some(helper) = helper {
            return self.ask_helper(helper, registry);
        }
        let entry = (self.auths.iter())
            .find_map(|(key, entry)| (host_of(key) == registry).then_some(entry));
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

    /// Looks for credential helpers in `dir` rather than on `PATH`.
    pub fn with_helpers_in(mut self, dir: &Path) -> DockerConfig {
        self.helpers_dir = Some(dir.to_path_buf());
        self
    }

    /// `docker-credential-<helper> get`, given the registry's server on stdin as Docker gives
    /// it: credentials, or anonymous when the helper has none for it (its "credentials not
    /// found" answer).
    fn ask_helper(&self, helper: &str, registry: &str) -> Result<RegistryAuth, CredentialsError> {
        let program = format!("docker-credential-{helper}");
        let path = match &self.helpers_dir {
            Some(dir) => dir.join(&program),
            None => PathBuf::from(&program),
        };
        let not_run = |source| CredentialsError::HelperNotRun {
            helper: program.clone(),
            registry: registry.to_owned(),
            source,
        };
        let mut child = Command::new(&path)
            .arg("get")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(not_run)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(helper_server(registry).as_bytes())
                .map_err(not_run)?;
        }
        let output = child.wait_with_output().map_err(not_run)?;
        if !output.status.success() {
            let said = [&output.stdout, &output.stderr]
                .map(|text| String::from_utf8_lossy(text).trim().to_owned())
                .into_iter()
                .filter(|text| !text.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            if said.contains("credentials not found") {
                return Ok(RegistryAuth::Anonymous);
            }
            return Err(CredentialsError::HelperFailed {
                helper: program,
                registry: registry.to_owned(),
                said: format!("{} ({said})", output.status),
            });
        }
        let answer: HelperAnswer = serde_json::from_slice(&output.stdout).map_err(|source| {
            CredentialsError::HelperAnswer {
                helper: program.clone(),
                registry: registry.to_owned(),
                source,
            }
        })?;
        if answer.username == IDENTITY_TOKEN_USER {
            return Err(CredentialsError::IdentityToken {
                helper: program,
                registry: registry.to_owned(),
            });
        }
        Ok(RegistryAuth::Basic(answer.username, answer.secret))
    }
}

/// The host a config key names: `host`, `https://host` or `https://host/v1/`.
fn host_of(key: &str) -> &str {
    key.trim_start_matches("https://")
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
}

/// The server Docker asks a helper about: Docker Hub's by its legacy address, others by host.
fn helper_server(registry: &str) -> String {
    match registry {
        "docker.io" | "index.docker.io" | "registry-1.docker.io" => {
            "https://index.docker.io/v1/".to_owned()
        }
        host => host.to_owned(),
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

    /// A credential helper as Docker's helpers answer `get`: what it keeps for two registries
    /// and Docker Hub, an identity token for a third, "credentials not found" for the rest.
    fn helpers() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("docker-credential-keeper");
        std::fs::write(
            &script,
            r#"#!/bin/sh
[ "$1" = get ] || exit 2
read -r server || true
case "$server" in
  123.dkr.ecr.us-west-2.amazonaws.com) printf '{"ServerURL":"%s","Username":"AWS","Secret":"ecr-t0ken"}' "$server" ;;
  registry.example) printf '{"Username":"store","Secret":"from-the-store"}' ;;
  https://index.docker.io/v1/) printf '{"Username":"hub","Secret":"hub-pw"}' ;;
  token.example) printf '{"Username":"<token>","Secret":"refresh"}' ;;
  broken.example) printf 'not json' ;;
  locked.example) echo "the keychain is locked" >&2; exit 1 ;;
  *) echo "credentials not found in native keychain"; exit 1 ;;
esac
"#,
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        dir
    }

    #[test]
    fn credential_helpers_answer_first_as_docker_asks_them() {
        let dir = helpers();
        // base64("file:secret")
        let ecr = config(
            r#"{"auths": {"123.dkr.ecr.us-west-2.amazonaws.com": {}, "plain.example": {"auth": "ZmlsZTpzZWNyZXQ="}},
                "credHelpers": {"123.dkr.ecr.us-west-2.amazonaws.com": "keeper"}}"#,
        )
        .with_helpers_in(dir.path());
        assert_eq!(
            ecr.auth_for("123.dkr.ecr.us-west-2.amazonaws.com").unwrap(),
            RegistryAuth::Basic("AWS".into(), "ecr-t0ken".into()),
            "the registry's own helper, over its empty auths entry (docker login leaves one)"
        );
        assert_eq!(
            ecr.auth_for("plain.example").unwrap(),
            RegistryAuth::Basic("file".into(), "secret".into()),
            "no helper for it and no credsStore: auths"
        );

        let store = config(
            r#"{"credsStore": "keeper", "auths": {"plain.example": {"auth": "ZmlsZTpzZWNyZXQ="}}}"#,
        )
        .with_helpers_in(dir.path());
        assert_eq!(
            store.auth_for("registry.example").unwrap(),
            RegistryAuth::Basic("store".into(), "from-the-store".into())
        );
        assert_eq!(
            store.auth_for("index.docker.io").unwrap(),
            RegistryAuth::Basic("hub".into(), "hub-pw".into()),
            "Docker Hub is asked for by its legacy address"
        );
        assert_eq!(
            store.auth_for("plain.example").unwrap(),
            RegistryAuth::Anonymous,
            "with a credsStore, Docker asks the store, not auths: it has none"
        );
    }

    #[test]
    fn a_helper_that_cannot_answer_is_an_error_naming_it() {
        let dir = helpers();
        let store = |name: &str| {
            config(&format!(r#"{{"credsStore": "{name}"}}"#)).with_helpers_in(dir.path())
        };
        let missing = store("absent").auth_for("registry.example").unwrap_err();
        assert!(
            matches!(&missing, CredentialsError::HelperNotRun { helper, .. } if helper == "docker-credential-absent"),
            "{missing}"
        );
        assert!(
            missing.to_string().contains("install it on PATH"),
            "{missing}"
        );
        let token = store("keeper").auth_for("token.example").unwrap_err();
        assert!(
            matches!(token, CredentialsError::IdentityToken { .. }),
            "{token}"
        );
        let locked = store("keeper").auth_for("locked.example").unwrap_err();
        assert!(
            matches!(&locked, CredentialsError::HelperFailed { said, .. } if said.contains("the keychain is locked")),
            "{locked}"
        );
        let broken = store("keeper").auth_for("broken.example").unwrap_err();
        assert!(
            matches!(broken, CredentialsError::HelperAnswer { .. }),
            "{broken}"
        );
    }
}
