//! deploy/iam's policies enforced by a moto of the test's own: what moto can check of them, and
//! the moto that checks it.
//!
//! # What moto 5.2.5 checks (moto/iam/access_control.py, moto/core/authorization.py)
//! With enforcement on, every request's SigV4 signature is checked against the IAM user's access
//! key, and the user's policies are evaluated for the request's action. But:
//! - **EC2 is authorized against resource `*`**: EC2's responses have no `_determine_resource`,
//!   so moto matches each statement's `Resource` against the string `*`. A statement whose
//!   `Resource` is an ARN (`arn:aws:ec2:…:instance/*`) never matches: it is neutral, and a call
//!   only it would allow is refused. So resource-level scoping of EC2 cannot be checked here.
//! - **Conditions are not evaluated**: moto evaluates a `Condition` only against the context
//!   values it collects from the request, and for an identity policy it collects none; with no
//!   values, every condition holds (`TrustCondition::verify_condition` loops over no values).
//!   Checked against this moto: an `Allow` of `ec2:DescribeSubnets` on `*` with the condition
//!   `StringEquals aws:RequestTag/x = never` allows `DescribeSubnets`. A test that kept the
//!   conditions would pass whatever they say, so the projection drops them.
//! - **SQS is authorized against the queue's ARN** (`sqs/responses.py` `_determine_resource`),
//!   so the interruption queue's statement is checked as written: another queue is refused
//!   `AccessDenied` (the negative test in tests/e2e/iam.rs shows it). But moto authorizes the
//!   batch calls under their own names (`sqs:DeleteMessageBatch`,
//!   `sqs:ChangeMessageVisibilityBatch`), where SQS authorizes them as `sqs:DeleteMessage` and
//!   `sqs:ChangeMessageVisibility` (SQS developer guide, "Amazon SQS API permissions: Actions
//!   and resource reference"): the projection adds those two names to the statement that
//!   allows the single calls.
//! - **CloudWatch Logs is authorized against resource `*`**, as EC2 is (`logs/responses.py` has
//!   no `_determine_resource`): the log group statements are checked for their actions only.
//! - **Systems Manager is authorized against resource `*`**, as EC2 is (`ssm/responses.py` has
//!   no `_determine_resource`): Run Command's statements (the instance by its tags, the
//!   document by ARN) are checked for their actions only.
//! - **CloudWatch is authorized as `monitoring:…`**: moto names an action after the service of
//!   the request's SigV4 credential scope, and CloudWatch signs as `monitoring`, where IAM
//!   names its actions `cloudwatch:…`. Its metric actions have no resource-level permissions
//!   on AWS either (resource `*`): the projection renames each `cloudwatch:` action so moto
//!   checks it, and drops the `cloudwatch:namespace` condition with the others.
//! - `sts:GetCallerIdentity` is always allowed, as on AWS.
//! - `iam:PassRole` is never checked: moto does not authorize the instance profile a
//!   `RunInstances` or a launch template passes. The projection keeps the statement (on `*`),
//!   but nothing here proves it.
//! - Resource-based policies (the queue's, `deploy/iam/interruption-queue.json`) and trust
//!   policies of service principals are not evaluated.
//!
//! So [`moto_projection`] makes of a policy what moto can check: each EC2, IAM, Logs,
//! Systems Manager or CloudWatch statement
//! becomes its actions on `Resource: "*"` with no condition (the actions are checked, the
//! scoping rests on AWS's documentation); each SQS statement is kept whole (actions and queue
//! ARN are checked). A statement for any other service, a `Deny`, `NotAction`, `NotResource`,
//! a `Principal` or an SQS `Condition` is refused: moto's treatment of them is not what this
//! module documents.
//!
//! moto refuses a denied EC2 call with IAM's `AccessDenied`; the harness's wrapper
//! (tests/cluster/moto-server-with-client-tokens.py) answers it as EC2 does,
//! `UnauthorizedOperation` with HTTP 403, answers a refused SQS call in SQS's JSON protocol
//! (moto sends IAM's XML, which the SDK cannot read as an error code), and logs every refusal on
//! moto's stderr ([`IamMoto::refusals`]). It also keeps the raw body for moto's signature check:
//! moto's server re-encodes a form body Python's way (a space as `+`), so a Rust SDK request
//! with a space in a parameter (orca's `CreateLaunchTemplate`) failed `AuthFailure`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use aws_config::BehaviorVersion;
use serde_json::{Value, json};

use crate::cluster::repo_root;
use crate::http::curl_status;
use crate::orca::free_port;
use crate::wait::poll_until;

/// moto's account: every IAM user made in it belongs to this one.
pub const MOTO_ACCOUNT: &str = "123456789012";

/// What deploy/iam's placeholders stand for in one test.
#[derive(Debug, Clone)]
pub struct Placeholders {
    pub region: String,
    pub account: String,
    /// `node.clusterName`.
    pub cluster: String,
    /// The cluster's kube-system UID.
    pub cluster_id: String,
}

/// deploy/iam/`name` with its placeholders filled in.
///
/// # Errors
/// The file cannot be read or is not JSON, or a placeholder is left over.
pub fn deployed_policy(name: &str, placeholders: &Placeholders) -> Result<Value> {
    let path = repo_root().join("deploy/iam").join(name);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let filled = substitute(&text, placeholders);
    serde_json::from_str(&filled).with_context(|| format!("parsing {}", path.display()))
}

/// The placeholders replaced as whole words; `CLUSTER_ID` before `CLUSTER`, its prefix.
fn substitute(text: &str, placeholders: &Placeholders) -> String {
    let mut text = text.to_owned();
    for (word, value) in [
        ("CLUSTER_ID", &placeholders.cluster_id),
        ("CLUSTER", &placeholders.cluster),
        ("REGION", &placeholders.region),
        ("ACCOUNT", &placeholders.account),
    ] {
        text = text.replace(word, value);
    }
    text
}

/// SQS authorizes a batch call as its single call; moto asks for the batch call's own name.
const SQS_BATCH_NAMES: [(&str, &str); 2] = [
    ("sqs:DeleteMessage", "sqs:DeleteMessageBatch"),
    (
        "sqs:ChangeMessageVisibility",
        "sqs:ChangeMessageVisibilityBatch",
    ),
];

/// What moto can check of `policy` (see the module's documentation).
///
/// # Errors
/// A statement moto's treatment of which is not the one documented above.
pub fn moto_projection(policy: &Value) -> Result<Value> {
    let statements = match &policy["Statement"] {
        Value::Array(statements) => statements.clone(),
        statement @ Value::Object(_) => vec![statement.clone()],
        other => bail!("a policy's Statement is a list or an object, not {other}"),
    };
    let mut projected = Vec::new();
    for statement in &statements {
        let sid = statement["Sid"].as_str().unwrap_or("(no Sid)");
        ensure!(
            statement["Effect"] == "Allow",
            "{sid}: only Allow statements are projected (moto answers a conditional Deny as it \
             answers an Allow)"
        );
        for field in ["NotAction", "NotResource", "Principal"] {
            ensure!(
                statement.get(field).is_none(),
                "{sid}: {field} is not projected"
            );
        }
        ensure!(statement.get("Resource").is_some(), "{sid}: no Resource");
        let actions = strings(&statement["Action"]).with_context(|| format!("{sid}: Action"))?;
        let (sqs, scoped_by_docs): (Vec<String>, Vec<String>) =
            actions.into_iter().partition(|a| a.starts_with("sqs:"));
        if let Some(other) = scoped_by_docs.iter().find(|a| {
            !["ec2:", "iam:", "logs:", "cloudwatch:", "ssm:"]
                .iter()
                .any(|service| a.starts_with(service))
        }) {
            bail!("{sid}: {other}: moto's authorization of this service is not documented here");
        }
        let scoped_by_docs: Vec<String> = scoped_by_docs
            .into_iter()
            .map(|a| match a.strip_prefix("cloudwatch:") {
                Some(action) => format!("monitoring:{action}"),
                None => a,
            })
            .collect();
        if !scoped_by_docs.is_empty() {
            projected.push(json!({
                "Sid": sid,
                "Effect": "Allow",
                "Action": scoped_by_docs,
                "Resource": "*",
            }));
        }
        if !sqs.is_empty() {
            ensure!(
                statement.get("Condition").is_none(),
                "{sid}: moto does not evaluate an SQS statement's Condition"
            );
            let mut actions = sqs.clone();
            for (single, batch) in SQS_BATCH_NAMES {
                if sqs.iter().any(|a| a == single) {
                    actions.push(batch.to_owned());
                }
            }
            projected.push(json!({
                "Sid": sid,
                "Effect": "Allow",
                "Action": actions,
                "Resource": statement["Resource"],
            }));
        }
    }
    Ok(json!({ "Version": "2012-10-17", "Statement": projected }))
}

/// `policy` with `action` taken out of every statement (a statement left with none is dropped).
pub fn without_action(policy: &Value, action: &str) -> Value {
    let mut policy = policy.clone();
    if let Some(statements) = policy["Statement"].as_array_mut() {
        for statement in statements.iter_mut() {
            if let Some(actions) = statement["Action"].as_array_mut() {
                actions.retain(|a| a != action);
            }
        }
        statements.retain(|s| {
            s["Action"]
                .as_array()
                .is_none_or(|actions| !actions.is_empty())
                && s["Action"] != action
        });
    }
    policy
}

/// Every action a policy allows, as written.
pub fn actions(policy: &Value) -> Vec<String> {
    policy["Statement"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| strings(&s["Action"]).ok())
        .flatten()
        .collect()
}

fn strings(value: &Value) -> Result<Vec<String>> {
    match value {
        Value::String(one) => Ok(vec![one.clone()]),
        Value::Array(many) => many
            .iter()
            .map(|v| v.as_str().map(str::to_owned).context("not a string"))
            .collect(),
        other => bail!("a string or a list of strings, not {other}"),
    }
}

/// An IAM user's access key in [`IamMoto`].
#[derive(Debug, Clone)]
pub struct AccessKey {
    pub access_key_id: String,
    pub secret_access_key: String,
}

/// A moto server of the test's own with IAM enforced: its users, each with one policy, and an
/// `admin` allowed everything (the test playing EC2, EventBridge and the operator). Started
/// through the harness's wrapper, so launches are idempotent as on the shared moto. Killed when
/// dropped.
pub struct IamMoto {
    child: Child,
    endpoint: String,
    region: String,
    keys: BTreeMap<String, AccessKey>,
    dir: tempfile::TempDir,
}

/// The user [`IamMoto`] makes for the test itself.
pub const ADMIN: &str = "admin";

impl IamMoto {
    /// Starts moto on a free port, makes `users` (name → policy) and `admin`, then turns
    /// enforcement on.
    ///
    /// # Errors
    /// moto did not start, or a user could not be made.
    pub async fn start(region: &str, users: &[(&str, Value)]) -> Result<IamMoto> {
        let dir = tempfile::Builder::new()
            .prefix("orca-iam-moto-")
            .tempdir()?;
        let log = std::fs::File::create(dir.path().join("moto.log"))?;
        let port = free_port()?;
        let harness = repo_root().join("tests/cluster");
        let child = Command::new(harness.join("moto-python"))
            .arg(harness.join("moto-server-with-client-tokens.py"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("ORCA_MOTO_CHECKS_SIGNATURES", "1")
            .env("ORCA_MOTO_RUNS_COMMANDS", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting the IAM moto")?;
        let mut moto = IamMoto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            region: region.to_owned(),
            keys: BTreeMap::new(),
            dir,
        };
        let api = format!("{}/moto-api/", moto.endpoint);
        poll_until(
            "the IAM moto answering",
            Duration::from_secs(30),
            Duration::from_millis(200),
            || async { Ok(matches!(curl_status(&api, &[]), Ok((200, _))).then_some(())) },
        )
        .await
        .map_err(|error| anyhow::anyhow!("{error:#}\nmoto's log:\n{}", moto.log()))?;
        let mut spec_users = serde_json::Map::new();
        spec_users.insert(
            ADMIN.to_owned(),
            json!({"Version": "2012-10-17",
                   "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}),
        );
        for (name, policy) in users {
            spec_users.insert((*name).to_owned(), policy.clone());
        }
        let spec = json!({"endpoint": moto.endpoint, "region": region, "users": spec_users});
        let output = make_users(&harness, &spec)?;
        let keys: Value = serde_json::from_slice(&output).context("the users' access keys")?;
        for (name, key) in keys.as_object().context("the users' access keys")? {
            let field = |field: &str| {
                key[field]
                    .as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("{name}'s {field}"))
            };
            let key = AccessKey {
                access_key_id: field("AccessKeyId")?,
                secret_access_key: field("SecretAccessKey")?,
            };
            moto.keys.insert(name.clone(), key);
        }
        Ok(moto)
    }

    /// Where its EC2, SQS, STS and IAM answer.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `user`'s access key.
    ///
    /// # Panics
    /// No such user was made.
    pub fn key(&self, user: &str) -> &AccessKey {
        self.keys
            .get(user)
            .unwrap_or_else(|| panic!("the IAM moto has no user {user}"))
    }

    /// The environment a process uses to call this moto as `user`.
    pub fn env_of(&self, user: &str) -> Vec<(String, String)> {
        let key = self.key(user);
        vec![
            ("AWS_ACCESS_KEY_ID".into(), key.access_key_id.clone()),
            (
                "AWS_SECRET_ACCESS_KEY".into(),
                key.secret_access_key.clone(),
            ),
            ("AWS_ENDPOINT_URL".into(), self.endpoint.clone()),
            ("AWS_REGION".into(), self.region.clone()),
            ("AWS_DEFAULT_REGION".into(), self.region.clone()),
        ]
    }

    /// An SDK config for calling this moto as `user`.
    pub async fn aws_config(&self, user: &str) -> aws_config::SdkConfig {
        let key = self.key(user);
        aws_config::defaults(BehaviorVersion::latest())
            .region(aws_config::Region::new(self.region.clone()))
            .endpoint_url(&self.endpoint)
            .credentials_provider(aws_sdk_ec2::config::Credentials::new(
                &key.access_key_id,
                &key.secret_access_key,
                None,
                None,
                "orca-iam-moto",
            ))
            .load()
            .await
    }

    /// Every request moto refused, as its wrapper logged them ("moto-iam: refused …").
    pub fn refusals(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.starts_with("moto-iam: refused"))
            .map(str::to_owned)
            .collect()
    }

    /// moto's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("moto.log")
    }
}

/// tests/cluster/moto-iam-users.py fed `spec`: its stdout.
fn make_users(harness: &std::path::Path, spec: &Value) -> Result<Vec<u8>> {
    use std::io::Write;
    let mut child = Command::new(harness.join("moto-python"))
        .arg(harness.join("moto-iam-users.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running moto-iam-users.py")?;
    child
        .stdin
        .take()
        .context("its stdin")?
        .write_all(spec.to_string().as_bytes())?;
    let output = child.wait_with_output()?;
    ensure!(
        output.status.success(),
        "moto-iam-users.py failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(output.stdout)
}

impl Drop for IamMoto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placeholders() -> Placeholders {
        Placeholders {
            region: "us-west-2".into(),
            account: MOTO_ACCOUNT.into(),
            cluster: "blue".into(),
            cluster_id: "uid-1".into(),
        }
    }

    #[test]
    fn every_placeholder_of_the_deployed_policies_is_filled() -> Result<()> {
        for name in [
            "orca.json",
            "workload.json",
            "workload-trust.json",
            "orca-trust.json",
            "orca-pod-identity-trust.json",
            "interruption-queue.json",
        ] {
            let text = deployed_policy(name, &placeholders())?.to_string();
            for word in ["REGION", "ACCOUNT", "CLUSTER"] {
                ensure!(!text.contains(word), "{name}: {word} left in {text}");
            }
        }
        let orca = deployed_policy("orca.json", &placeholders())?.to_string();
        ensure!(orca.contains("\"uid-1\"") && orca.contains("orca-blue-interruptions"));
        Ok(())
    }

    #[test]
    fn ec2_statements_become_their_actions_on_any_resource_and_sqs_ones_stay_whole() -> Result<()> {
        let policy = json!({"Statement": [
            {"Sid": "Launch", "Effect": "Allow", "Action": ["ec2:RunInstances", "iam:PassRole"],
             "Resource": "arn:aws:ec2:r:a:instance/*",
             "Condition": {"StringEquals": {"aws:RequestTag/ManagedBy": "ORCA"}}},
            {"Sid": "Queue", "Effect": "Allow",
             "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
             "Resource": "arn:aws:sqs:r:a:q"}
        ]});
        assert_eq!(
            moto_projection(&policy)?,
            json!({"Version": "2012-10-17", "Statement": [
                {"Sid": "Launch", "Effect": "Allow",
                 "Action": ["ec2:RunInstances", "iam:PassRole"], "Resource": "*"},
                {"Sid": "Queue", "Effect": "Allow",
                 "Action": ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:DeleteMessageBatch"],
                 "Resource": "arn:aws:sqs:r:a:q"}
            ]})
        );
        Ok(())
    }

    #[test]
    fn cloudwatch_actions_are_projected_under_the_name_moto_authorizes() -> Result<()> {
        let policy = json!({"Statement": [
            {"Sid": "Publish", "Effect": "Allow", "Action": "cloudwatch:PutMetricData",
             "Resource": "*",
             "Condition": {"StringEquals": {"cloudwatch:namespace": "Orca/Pods"}}}
        ]});
        assert_eq!(
            moto_projection(&policy)?,
            json!({"Version": "2012-10-17", "Statement": [
                {"Sid": "Publish", "Effect": "Allow",
                 "Action": ["monitoring:PutMetricData"], "Resource": "*"}
            ]})
        );
        Ok(())
    }

    #[test]
    fn what_moto_would_treat_otherwise_is_refused_not_projected() {
        for statement in [
            json!({"Effect": "Deny", "Action": "ec2:RunInstances", "Resource": "*"}),
            json!({"Effect": "Allow", "NotAction": "ec2:RunInstances", "Resource": "*"}),
            json!({"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}),
            json!({"Effect": "Allow", "Action": "sqs:ReceiveMessage", "Resource": "*",
                   "Condition": {"Bool": {"aws:SecureTransport": "true"}}}),
        ] {
            let policy = json!({"Statement": [statement]});
            assert!(moto_projection(&policy).is_err(), "{policy}");
        }
    }

    #[test]
    fn an_action_taken_out_leaves_the_rest_of_its_statement() {
        let policy = json!({"Statement": [
            {"Action": ["ec2:DescribeSubnets", "ec2:DescribeInstances"], "Resource": "*"},
            {"Action": ["ec2:DescribeSubnets"], "Resource": "*"},
            {"Action": "ec2:DescribeSubnets", "Resource": "*"}
        ]});
        assert_eq!(
            without_action(&policy, "ec2:DescribeSubnets"),
            json!({"Statement": [{"Action": ["ec2:DescribeInstances"], "Resource": "*"}]})
        );
    }
}
