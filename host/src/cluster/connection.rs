//! How orca finds its cluster: in-cluster service account first, then `--kubeconfig`, then
//! `~/.kube/config` — the order `docs/src/concepts/architecture.md` gives.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Which source the client configuration came from, for the startup log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionSource {
    InCluster,
    Kubeconfig(PathBuf),
}

/// Why no client configuration could be built.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("reading kubeconfig {path}")]
    KubeconfigUnreadable {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(
        "no cluster to connect to: not running in a cluster, no --kubeconfig given, and {default} does not exist"
    )]
    NothingFound { default: PathBuf },
    #[error("building a Kubernetes client")]
    ClientBuildFailed(#[source] kube::Error),
}

/// Builds a client from the first source that applies.
///
/// # Errors
/// [`ConnectionError`] naming the source that failed.
pub async fn connect(
    explicit_kubeconfig: Option<&Path>,
) -> Result<(kube::Client, ConnectionSource), ConnectionError> {
    let (config, source) = if let Ok(config) = kube::Config::incluster() {
        (config, ConnectionSource::InCluster)
    } else {
        let path = match explicit_kubeconfig {
            Some(path) => path.to_path_buf(),
            None => {
                let default = home_kubeconfig();
                if !default.exists() {
                    return Err(ConnectionError::NothingFound { default });
                }
                default
            }
        };
        (from_file(&path).await?, ConnectionSource::Kubeconfig(path))
    };
    let client =
        crate::cluster::http::client(config).map_err(ConnectionError::ClientBuildFailed)?;
    Ok((client, source))
}

async fn from_file(path: &Path) -> Result<kube::Config, ConnectionError> {
    let unreadable = |source| ConnectionError::KubeconfigUnreadable {
        path: path.to_path_buf(),
        source,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(unreadable)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(unreadable)
}

fn home_kubeconfig() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
        .join(".kube/config")
}
