//! `--flood F`: one spot pod's warning behind F messages that are not its orca's (issue 39,
//! case 7). The queue is one of moto's SQS queues as the docs' stack makes it (30 s
//! visibility timeout, SQS's default; 5-minute retention), read through orca's `SqsQueue`.
//! The flood is a third each: spot warnings from another account, notices about the account's
//! other instances (state changes and spot warnings for instances someone else launched in the
//! EC2 model), and bodies that are no EventBridge event orca reads. The warning for the pod's
//! instance goes in `--warn-after` seconds after the last of them: at once, it waits behind
//! the flood's first receipt; after the visibility timeout, behind whatever the consumer left
//! on the queue the first time.
//!
//! Per round: the time from sending the warning to the pod's `DisruptionTarget` (the pod read
//! every 10 ms), and how many messages the queue still holds then (SQS's approximate counts,
//! visible and in flight).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use aws_sdk_sqs::types::{QueueAttributeName, SendMessageBatchRequestEntry};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca::interruption::{NoticeQueue, SqsQueue};
use orca_e2e::inprocess::InProcessOrca;
use orca_e2e::model_ec2::ModelEc2;
use orca_e2e::notices::{REGION, spot_warning, spot_warning_from, state_change};
use orca_e2e::{TestCluster, TestNamespace, unique_node_name};
use orca_ec2_model::{Behaviour, Ec2Model};

use super::{config, running_pods, warned};

/// An account that is not the harness's: its rules' messages are forgeries here.
const OTHER_ACCOUNT: &str = "210987654321";
/// Instances someone else runs in the account, the flood's second third is about.
const OTHER_INSTANCES: usize = 20;
/// The warning must land within the queue's retention, or it was never going to.
const PATIENCE: Duration = Duration::from_secs(290);

/// Runs `rounds` rounds and prints one row each.
pub async fn run(foreign: usize, warn_after: Duration, rounds: u64) -> Result<()> {
    println!(
        "| messages not orca's | warning sent after | round | to DisruptionTarget | left in the queue then |"
    );
    println!("|---|---|---|---|---|");
    for seed in 1..=rounds {
        let (latency, left) = round(foreign, warn_after, seed).await?;
        println!(
            "| {foreign} | {} s | {seed} | {} ms | {left} |",
            warn_after.as_secs(),
            latency.as_millis()
        );
    }
    Ok(())
}

async fn round(foreign: usize, warn_after: Duration, seed: u64) -> Result<(Duration, u64)> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let namespace = TestNamespace::create(&client, "interruption-flood").await?;
    let node = unique_node_name("iflood");
    let sqs = cluster.sqs_client().await;
    let queue_url = sqs
        .create_queue()
        .queue_name(unique_node_name("flood"))
        .attributes(QueueAttributeName::VisibilityTimeout, "30")
        .attributes(QueueAttributeName::MessageRetentionPeriod, "300")
        .send()
        .await?
        .queue_url()
        .context("queue url")?
        .to_owned();
    let model = Arc::new(Ec2Model::new(seed, Behaviour::calm()));
    let notices: Arc<dyn NoticeQueue> = Arc::new(SqsQueue::with_client(sqs.clone(), &queue_url));
    let orca = InProcessOrca::start(
        &config(&node)?,
        &PathBuf::from(cluster.var("ORCA_KUBECONFIG")),
        Arc::new(ModelEc2::new(model.clone())),
        Some(notices),
    )?;
    let api: Api<Pod> = Api::namespaced(client, &namespace.name);
    let running = running_pods(&api, &node, &["warned".to_owned()]).await?;
    let (_, instance) = running.first().context("the pod's instance")?;
    let others: Vec<String> = (0..OTHER_INSTANCES)
        .map(|n| {
            // Tagged by the controller that launched them: orca tells them from its own at
            // once (one showing only a Name is kept for the visibility grace, as EC2 may show
            // an instance's tags one by one).
            let tags = BTreeMap::from([
                ("Name".to_owned(), format!("batch-worker-{n}")),
                ("ManagedBy".to_owned(), "batch-scheduler".to_owned()),
            ]);
            model.launch_by_someone(Timestamp::now(), "m5.large", &tags)
        })
        .collect();
    for chunk in flood(foreign, &others, Timestamp::now()).chunks(10) {
        let entries = chunk
            .iter()
            .enumerate()
            .map(|(n, body)| {
                SendMessageBatchRequestEntry::builder()
                    .id(n.to_string())
                    .message_body(body)
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        sqs.send_message_batch()
            .queue_url(&queue_url)
            .set_entries(Some(entries))
            .send()
            .await?;
    }
    tokio::time::sleep(warn_after).await;
    let sent = Instant::now();
    sqs.send_message()
        .queue_url(&queue_url)
        .message_body(spot_warning(instance, Timestamp::now()))
        .send()
        .await?;
    let latency = loop {
        if api.get("warned").await.is_ok_and(|pod| warned(&pod)) {
            break sent.elapsed();
        }
        if sent.elapsed() > PATIENCE {
            bail!("the pod had no DisruptionTarget {PATIENCE:?} after its warning");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let left = messages_in(&sqs, &queue_url).await?;
    // Its runtime cannot be waited for from inside this one; nothing is left to finish.
    orca.crash();
    sqs.delete_queue().queue_url(&queue_url).send().await?;
    namespace.delete().await?;
    Ok((latency, left))
}

/// The flood: a third each from another account, about the account's `others`, unreadable.
fn flood(count: usize, others: &[String], at: Timestamp) -> Vec<String> {
    const STATES: [&str; 4] = ["pending", "running", "stopping", "stopped"];
    (0..count)
        .map(|n| {
            let k = n / 3;
            match n % 3 {
                0 => spot_warning_from(OTHER_ACCOUNT, REGION, &format!("i-0{:016x}", n), at),
                1 => {
                    let id = &others[k % others.len()];
                    if k % 2 == 0 {
                        state_change(id, STATES[k / 2 % STATES.len()], at)
                    } else {
                        spot_warning(id, at)
                    }
                }
                _ => match k % 3 {
                    0 => format!("not an event {n}"),
                    1 => serde_json::json!({
                        "source": "aws.s3",
                        "detail-type": "Object Created",
                        "time": at.to_string(),
                        "detail": { "object": { "key": format!("upload-{n}") } },
                    })
                    .to_string(),
                    _ => serde_json::json!({ "hello": n }).to_string(),
                },
            }
        })
        .collect()
}

/// Messages visible and in flight, as SQS counts them.
async fn messages_in(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<u64> {
    let attributes: HashMap<QueueAttributeName, String> = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await?
        .attributes()
        .cloned()
        .unwrap_or_default();
    let count = |name: QueueAttributeName| -> Result<u64> {
        Ok(attributes
            .get(&name)
            .map(|value| value.parse::<u64>())
            .transpose()?
            .unwrap_or_default())
    };
    Ok(count(QueueAttributeName::ApproximateNumberOfMessages)?
        + count(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)?)
}
