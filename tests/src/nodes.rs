//! Reading a Node's Ready condition, the question most node tests ask.

use anyhow::Result;
use k8s_openapi::api::core::v1::Node;
use kube::Api;

/// The node's Ready condition as (status, reason); `None` while the node or condition is absent.
pub async fn ready_condition(nodes: &Api<Node>, name: &str) -> Result<Option<(String, String)>> {
    let Some(node) = nodes.get_opt(name).await? else {
        return Ok(None);
    };
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready");
    Ok(ready.map(|c| (c.status, c.reason.unwrap_or_default())))
}
