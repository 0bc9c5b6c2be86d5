//! A ServiceAccount allowed to `get` some node subresources on every node (`nodes/proxy`,
//! `nodes/metrics`, …), and a token of it: how the tests call orca's kubelet port as a client
//! with exactly those rights (metrics-server holds `nodes/metrics`). The ClusterRole and its
//! binding are cluster-wide, so dropping the reader deletes them.

use anyhow::Result;

use crate::cluster::{TestCluster, kubectl_ok};

pub struct NodeReader {
    /// A bearer token of the ServiceAccount.
    pub token: String,
    /// The ClusterRole and ClusterRoleBinding's name.
    role: String,
}

impl NodeReader {
    /// ServiceAccount `reader` in `namespace`, bound to ClusterRole `role` granting `get` on
    /// `resources` (comma-separated, as `kubectl create clusterrole --resource` takes them).
    ///
    /// # Errors
    /// A kubectl call failed.
    pub fn create(namespace: &str, role: &str, resources: &str) -> Result<NodeReader> {
        kubectl_ok(&[
            "create",
            "clusterrole",
            role,
            "--verb=get",
            &format!("--resource={resources}"),
        ])?;
        // From here on, a failure still deletes the role (and the binding, once made).
        let mut reader = NodeReader {
            token: String::new(),
            role: role.to_owned(),
        };
        kubectl_ok(&[
            "create",
            "clusterrolebinding",
            role,
            &format!("--clusterrole={role}"),
            &format!("--serviceaccount={namespace}:reader"),
        ])?;
        kubectl_ok(&["create", "serviceaccount", "-n", namespace, "reader"])?;
        let token = kubectl_ok(&["create", "token", "-n", namespace, "reader"])?;
        reader.token = token.trim().to_owned();
        Ok(reader)
    }

    /// The `Authorization` header line for curl.
    pub fn bearer(&self) -> String {
        format!("Authorization: Bearer {}", self.token)
    }
}

impl Drop for NodeReader {
    fn drop(&mut self) {
        let _ = TestCluster::shared()
            .kubectl()
            .args([
                "delete",
                "clusterrolebinding,clusterrole",
                &self.role,
                "--ignore-not-found",
            ])
            .output();
    }
}
