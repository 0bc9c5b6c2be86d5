//! `deploy/` applied to the harness cluster, and orca run with the `orca` ServiceAccount's own
//! credentials: what the kustomize base grants, nothing the harness's admin identity adds.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::TestCluster;
use crate::cluster::{kubectl_ok, repo_root};

pub const NAMESPACE: &str = "orca-system";
pub const SERVICE_ACCOUNT: &str = "orca";

/// The ServiceAccount an install of orca runs as: the kustomize base's `orca-system/orca`, or
/// a chart release's in its own namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    /// The kustomize base's: `orca` in `orca-system`.
    pub fn base() -> ServiceAccount {
        ServiceAccount {
            namespace: NAMESPACE.to_owned(),
            name: SERVICE_ACCOUNT.to_owned(),
        }
    }

    /// The user the apiserver sees for a token of this ServiceAccount.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// `deploy/` as the install guide applies it (`kubectl apply --server-side -k deploy/`), once per test
/// process. The Deployment's pod stays Pending (its image is not on any node here, and the
/// orca nodes' taint keeps it off them); the tests run the orca binary themselves.
/// `--force-conflicts` only takes over fields an earlier client-side apply left behind.
pub fn apply_base() -> Result<()> {
    static APPLIED: OnceLock<Result<(), String>> = OnceLock::new();
    APPLIED
        .get_or_init(|| {
            let deploy = repo_root().join("deploy");
            kubectl_ok(&[
                "apply",
                "--server-side",
                "--force-conflicts",
                "-k",
                &deploy.to_string_lossy(),
            ])
            .map(drop)
            .map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(anyhow::Error::msg)
}

/// A kubeconfig for `account`: the harness apiserver and its CA, and a token minted by the
/// TokenRequest API (as the kubelet projects one into orca's pod).
pub fn service_account_kubeconfig(dir: &Path, account: &ServiceAccount) -> Result<PathBuf> {
    let token = kubectl_ok(&[
        "create",
        "token",
        &account.name,
        "-n",
        &account.namespace,
        "--duration=2h",
    ])?;
    let username = account.username();
    let admin: Value = serde_json::from_str(&kubectl_ok(&[
        "config", "view", "--raw", "--minify", "-o", "json",
    ])?)?;
    let cluster = admin["clusters"][0]["cluster"].clone();
    if cluster["server"].as_str().is_none() {
        bail!("the harness kubeconfig names no server: {admin}");
    }
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "harness", "cluster": cluster}],
        "users": [{"name": username, "user": {"token": token.trim()}}],
        "contexts": [{"name": "orca", "context": {"cluster": "harness", "user": username}}],
        "current-context": "orca",
    });
    let path = dir.join("orca-serviceaccount.kubeconfig");
    std::fs::write(&path, serde_json::to_vec_pretty(&kubeconfig)?)?;
    Ok(path)
}

/// `kubectl auth can-i VERB RESOURCE[.GROUP][/NAME] [--subresource SUB] [-n NAMESPACE]` asked as
/// `account`; `resource` is written `RESOURCE[.GROUP][/SUB]`, `name` the one object asked
/// about (a rule with `resourceNames`).
pub fn service_account_can(
    account: &ServiceAccount,
    verb: &str,
    resource: &str,
    name: Option<&str>,
    namespace: Option<&str>,
) -> Result<bool> {
    let (resource, subresource) = match resource.split_once('/') {
        Some((resource, sub)) => (resource, Some(sub)),
        None => (resource, None),
    };
    // kubectl reads `TYPE/NAME`; a subresource goes in its own flag.
    let target = match name {
        Some(name) => format!("{resource}/{name}"),
        None => resource.to_owned(),
    };
    let user = format!("--as={}", account.username());
    let mut args = vec!["auth", "can-i", verb, target.as_str(), user.as_str()];
    if let Some(subresource) = subresource {
        args.extend(["--subresource", subresource]);
    }
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    let output = TestCluster::shared().kubectl().args(&args).output()?;
    match (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).trim(),
    ) {
        (Some(0), "yes") => Ok(true),
        (Some(1), "no") => Ok(false),
        (code, answer) => bail!(
            "kubectl {} answered {code:?} {answer:?}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ),
    }
}

/// A YAML file of the repository as JSON, to edit and hand on.
pub fn yaml_file(relative: &str) -> Result<Value> {
    let path = repo_root().join(relative);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// `value` as YAML, the way orca's config is written.
pub fn to_yaml(value: &Value) -> Result<String> {
    Ok(serde_saphyr::to_string(value)?)
}

/// The first of rendered `objects` of `kind` whose name starts with `name_prefix` (kustomize
/// appends a hash to a ConfigMap's name; `""` takes any name).
pub fn find_object<'a>(objects: &'a [Value], kind: &str, name_prefix: &str) -> Result<&'a Value> {
    objects
        .iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name_prefix))
        })
        .with_context(|| format!("no {kind} {name_prefix}* rendered"))
}
