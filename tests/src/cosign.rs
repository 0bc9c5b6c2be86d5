//! The real cosign CLI (`tests/registry/build-cosign`, built once from the Go module proxy),
//! pointed at a [`TestRegistry`]: key pairs, signatures and verification made by the tool the
//! ecosystem signs with, so orca's verification is checked against its output and orca's own
//! signatures against its verifier.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use anyhow::{Context, Result, ensure};

use crate::cluster::repo_root;
use crate::registry::TestRegistry;

/// The password of every key pair made here (cosign reads it from `COSIGN_PASSWORD`).
pub const KEY_PASSWORD: &str = "orca-test-key-password";

pub struct Cosign {
    bin: PathBuf,
    /// `HOME` and `DOCKER_CONFIG` for cosign: nothing of the user's is read or written.
    home: PathBuf,
    ca: PathBuf,
}

/// A cosign key pair: `NAME.key` (encrypted with [`KEY_PASSWORD`]) and `NAME.pub`.
pub struct KeyPair {
    pub private: PathBuf,
    pub public: PathBuf,
}

impl Cosign {
    /// Builds cosign once (cached) and sets it up to use `registry` (its CA and credentials).
    pub fn for_registry(registry: &TestRegistry) -> Result<Cosign> {
        let output = Command::new(repo_root().join("tests/registry/build-cosign"))
            .output()
            .context("running tests/registry/build-cosign")?;
        ensure!(
            output.status.success(),
            "tests/registry/build-cosign failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let bin = PathBuf::from(
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .last()
                .unwrap_or_default(),
        );
        let home = registry.dir().join("cosign-home");
        std::fs::create_dir_all(&home)?;
        // cosign finds registry credentials as docker does: `$DOCKER_CONFIG/config.json`.
        std::fs::copy(registry.docker_config()?, home.join("config.json"))?;
        Ok(Cosign {
            bin,
            home,
            ca: registry.ca.clone(),
        })
    }

    fn command(&self) -> Command {
        let mut command = Command::new(&self.bin);
        command
            .env("HOME", &self.home)
            .env("DOCKER_CONFIG", &self.home)
            .env("SSL_CERT_FILE", &self.ca)
            .env("COSIGN_PASSWORD", KEY_PASSWORD)
            .env("COSIGN_YES", "true")
            .current_dir(&self.home);
        command
    }

    fn run(&self, args: &[&str]) -> Result<Output> {
        self.command()
            .args(args)
            .output()
            .with_context(|| format!("running cosign {args:?}"))
    }

    /// `cosign generate-key-pair` into `dir/NAME.key` and `dir/NAME.pub`.
    pub fn generate_key_pair(&self, dir: &Path, name: &str) -> Result<KeyPair> {
        let prefix = dir.join(name);
        let prefix = prefix.to_string_lossy();
        let output = self.run(&["generate-key-pair", "--output-key-prefix", &prefix])?;
        ensure!(
            output.status.success(),
            "cosign generate-key-pair: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(KeyPair {
            private: dir.join(format!("{name}.key")),
            public: dir.join(format!("{name}.pub")),
        })
    }

    /// `cosign sign --key` of `reference` (`REGISTRY/REPOSITORY@sha256:…`, no `oci://`), the
    /// signature kept out of the public transparency log (there is none here).
    pub fn sign(&self, key: &KeyPair, reference: &str) -> Result<()> {
        let key = key.private.to_string_lossy();
        let output = self.run(&["sign", "--key", &key, "--tlog-upload=false", reference])?;
        ensure!(
            output.status.success(),
            "cosign sign {reference}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(())
    }

    /// `cosign verify --key` of `reference`, without the transparency log: its output, for
    /// the caller to judge.
    pub fn verify(&self, public: &Path, reference: &str) -> Result<Output> {
        let public = public.to_string_lossy();
        self.run(&[
            "verify",
            "--key",
            &public,
            "--insecure-ignore-tlog=true",
            reference,
        ])
    }
}
