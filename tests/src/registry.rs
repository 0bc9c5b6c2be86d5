//! A real OCI registry (the CNCF distribution registry, `tests/registry`) on loopback, with TLS
//! from its own CA and basic auth, for tests of plugins delivered as OCI artifacts. Stopped
//! when dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, ensure};
use base64::Engine as _;

use crate::cluster::repo_root;

pub struct TestRegistry {
    dir: tempfile::TempDir,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    pub user: String,
    pub password: String,
    /// The CA that signed the registry's certificate (PEM).
    pub ca: PathBuf,
    /// The registry's storage, to tamper with.
    pub storage: PathBuf,
}

impl TestRegistry {
    /// Builds the registry once (cached) and starts one in a new directory.
    pub fn start() -> Result<TestRegistry> {
        let dir = tempfile::Builder::new()
            .prefix("orca-registry-")
            .tempdir()?;
        let output = Command::new(repo_root().join("tests/registry/up"))
            .arg(dir.path())
            .output()
            .context("running tests/registry/up")?;
        ensure!(
            output.status.success(),
            "tests/registry/up failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let env_file = String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_owned();
        let env: BTreeMap<String, String> = std::fs::read_to_string(&env_file)
            .with_context(|| format!("reading {env_file}"))?
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let get = |key: &str| {
            env.get(key)
                .cloned()
                .with_context(|| format!("{env_file} has no {key}"))
        };
        Ok(TestRegistry {
            addr: get("REGISTRY_ADDR")?,
            user: get("REGISTRY_USER")?,
            password: get("REGISTRY_PASSWORD")?,
            ca: get("REGISTRY_CA")?.into(),
            storage: get("REGISTRY_ROOT")?.into(),
            dir,
        })
    }

    /// A Docker config.json (what a `kubernetes.io/dockerconfigjson` Secret holds) with this
    /// registry's credentials, written into the registry's directory.
    pub fn docker_config(&self) -> Result<PathBuf> {
        self.docker_config_for(&self.addr)
    }

    /// A Docker config.json with this registry's credentials for the registry host `addr` (a
    /// proxy in front of this registry), written into the registry's directory.
    pub fn docker_config_for(&self, addr: &str) -> Result<PathBuf> {
        let auth = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", self.user, self.password));
        let path = self
            .dir
            .path()
            .join(format!("dockerconfig-{}.json", addr.replace(':', "-")));
        let json = serde_json::json!({"auths": {format!("https://{addr}"): {"auth": auth}}});
        // Tests sharing the registry write the same file while their orcas read it: written
        // aside and renamed into place, so a reader never sees it empty or half written.
        let mut staged = tempfile::NamedTempFile::new_in(self.dir.path())?;
        std::io::Write::write_all(&mut staged, &serde_json::to_vec(&json)?)?;
        staged.persist(&path)?;
        Ok(path)
    }

    /// The file holding the blob `digest` (`sha256:…`) in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// `curl` against the registry's API with its CA and credentials; the response body.
    pub fn curl(&self, args: &[&str]) -> Result<Vec<u8>> {
        let output = Command::new("curl")
            .args(["-sSf", "--cacert"])
            .arg(&self.ca)
            .args(["-u", &format!("{}:{}", self.user, self.password)])
            .args(args)
            .output()
            .context("running curl")?;
        ensure!(
            output.status.success(),
            "curl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(output.stdout)
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the registry (its directory stays, until dropped).
    pub fn stop(&self) -> Result<()> {
        let status = Command::new(repo_root().join("tests/registry/down"))
            .arg(self.dir.path())
            .status()
            .context("running tests/registry/down")?;
        ensure!(status.success(), "tests/registry/down failed");
        Ok(())
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("tests/registry/down"))
            .arg(self.dir.path())
            .status();
    }
}
