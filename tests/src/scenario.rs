//! The usual end-to-end setup in one call: orca on its own node (Ready), and a namespace for
//! the test's pods.

use std::time::Duration;

use anyhow::Result;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::{OrcaProcess, TestCluster, TestNamespace, test_config, unique_node_name};

pub struct Scenario {
    pub client: kube::Client,
    pub orca: OrcaProcess,
    pub namespace: TestNamespace,
    /// Pods in the test's namespace.
    pub pods: Api<Pod>,
}

impl Scenario {
    /// Starts orca with [`test_config`] on a node named after `test`, waits for it to be Ready,
    /// and creates a namespace `e2e-<test>`.
    pub async fn start(test: &str) -> Result<Scenario> {
        let client = TestCluster::shared().kube_client().await?;
        let node = unique_node_name(test);
        let orca = OrcaProcess::start(&node, |dir| test_config(&node, dir, ""))?;
        orca.wait_ready(Duration::from_secs(10)).await?;
        let namespace = TestNamespace::create(&client, &format!("e2e-{test}")).await?;
        let pods = Api::namespaced(client.clone(), &namespace.name);
        Ok(Scenario {
            client,
            orca,
            namespace,
            pods,
        })
    }

    pub fn node(&self) -> &str {
        &self.orca.node_name
    }

    /// Deletes the namespace; orca is stopped and its node deleted when the scenario drops.
    pub async fn finish(self) -> Result<()> {
        self.namespace.delete().await
    }
}
