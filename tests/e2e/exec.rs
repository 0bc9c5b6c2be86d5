//! `kubectl exec` end to end on the aws provider (issue 44): the real kubectl and apiserver
//! (1.36, passing the WebSocket through to orca, whose node declares
//! `ExtendWebSocketsToKubelet`), the real orca binary, and Systems Manager's Run Command
//! through the real AWS SDK against moto. moto answers every command with no output; the
//! harness's moto wrapper runs each `AWS-RunShellScript` as the SSM agent on a running
//! instance would (the invocation unknown at first, then in progress, then its output and exit
//! code), with `docker exec` a stand-in that runs the command in the instance's directory and
//! sets `ORCA_EXEC_CONTAINER` to the container's name. A raw WebSocket client checks the
//! protocol itself on the simulated provider (framing, input, the outcome, refusals kubectl
//! never asks for). What no test here shows: a real SSM agent and Docker on a booted instance.

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::kubelet_conn::{connector, open};
use orca_e2e::node_reader::NodeReader;
use orca_e2e::pods::{self, burst_pod, instance_id};
use orca_e2e::{
    OrcaProcess, Scenario, TestCluster, TestNamespace, aws_test_config, unique_node_name,
};

fn kubectl(args: &[&str], stdin: Option<&[u8]>) -> Result<std::process::Output> {
    let mut child = TestCluster::shared()
        .kubectl()
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(input) = stdin {
        child.stdin.take().context("stdin")?.write_all(input)?;
    }
    Ok(child.wait_with_output()?)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn kubectl_exec_runs_in_the_pods_container_through_run_command() -> Result<()> {
    let cluster = TestCluster::shared();
    let client = cluster.kube_client().await?;
    let node = unique_node_name("exec");
    let orca = OrcaProcess::start(&node, |_| aws_test_config(&node, ""))?;
    orca.wait_ready(Duration::from_secs(20)).await?;
    let namespace = TestNamespace::create(&client, "e2e-exec").await?;
    let ns = namespace.name.clone();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    pods::create(&pods_api, &burst_pod("trainer", &node, &[])).await?;
    let running =
        pods::wait_for_phase(&pods_api, "trainer", "Running", Duration::from_secs(60)).await?;
    ensure!(
        instance_id(&running).is_some(),
        "the pod names its instance"
    );

    // Output on both streams and the exit code, as kubectl reports a kubelet's.
    let script = "echo out; echo err >&2; echo \"in $ORCA_EXEC_CONTAINER\"; exit 3";
    let failed = kubectl(
        &["exec", "-n", &ns, "trainer", "--", "sh", "-c", script],
        None,
    )?;
    ensure!(failed.status.code() == Some(3), "{failed:?}");
    ensure!(text(&failed.stdout) == "out\nin main\n", "{failed:?}");
    ensure!(text(&failed.stderr).contains("err\n"), "{failed:?}");

    // Arguments arrive as they were given, none interpreted by the instance's shell.
    let words = ["$(hostname)", "it's", "a b", "`id`"];
    let mut args = vec!["exec", "-n", &ns, "trainer", "--", "printf", "[%s]"];
    args.extend(words);
    let echoed = kubectl(&args, None)?;
    ensure!(echoed.status.success(), "{echoed:?}");
    ensure!(
        text(&echoed.stdout) == "[$(hostname)][it's][a b][`id`]",
        "{echoed:?}"
    );

    // Input (-i) reaches the command whole.
    let input = b"line one\nline 'two' $(x)\n";
    let cat = kubectl(
        &["exec", "-i", "-n", &ns, "trainer", "--", "cat"],
        Some(input),
    )?;
    ensure!(cat.status.success(), "{cat:?}");
    ensure!(cat.stdout == input, "{cat:?}");

    // A container the pod does not have is refused before anything runs.
    let wrong = kubectl(
        &["exec", "-n", &ns, "trainer", "-c", "sidecar", "--", "true"],
        None,
    )?;
    ensure!(!wrong.status.success(), "{wrong:?}");
    ensure!(text(&wrong.stderr).contains("sidecar"), "{wrong:?}");

    // A user without pods/exec is refused by the apiserver before orca hears of it.
    let stranger = format!("system:serviceaccount:{ns}:stranger");
    let forbidden = kubectl(
        &[
            "exec", "--as", &stranger, "-n", &ns, "trainer", "--", "true",
        ],
        None,
    )?;
    ensure!(!forbidden.status.success(), "{forbidden:?}");
    ensure!(
        text(&forbidden.stderr).contains("Forbidden")
            || text(&forbidden.stderr).contains("forbidden"),
        "{forbidden:?}"
    );

    drop(orca);
    Ok(())
}

/// One exec over a raw WebSocket to orca's kubelet port, as the apiserver passes kubectl's
/// through: the messages orca sent (channel byte first), until it closed.
async fn raw_exec(
    port: u16,
    bearer: &str,
    path: &str,
    protocol: &str,
    send: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>> {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let stream = open(&connector(&[b"http/1.1"]), port).await?;
    let mut request = format!("wss://localhost:{port}{path}").into_client_request()?;
    request
        .headers_mut()
        .insert("Authorization", format!("Bearer {bearer}").parse()?);
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", protocol.parse()?);
    let (mut socket, response) = tokio_tungstenite::client_async(request, stream).await?;
    ensure!(
        response
            .headers()
            .get("Sec-WebSocket-Protocol")
            .and_then(|v| v.to_str().ok())
            == Some("v5.channel.k8s.io"),
        "{response:?}"
    );
    for message in send {
        socket.send(Message::Binary(message.clone().into())).await?;
    }
    let mut received = Vec::new();
    let read = async {
        while let Some(message) = socket.next().await {
            match message? {
                Message::Binary(data) => received.push(data.to_vec()),
                Message::Close(_) => break,
                _ => {}
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(Duration::from_secs(30), read)
        .await
        .context("orca did not close the exec")??;
    Ok(received)
}

/// The outcome message (channel 3) of an exec, parsed.
fn outcome(received: &[Vec<u8>]) -> Result<serde_json::Value> {
    let last = received.last().context("no message")?;
    ensure!(
        last.first() == Some(&3),
        "the last message is the outcome: {received:?}"
    );
    Ok(serde_json::from_slice(&last[1..])?)
}

#[tokio::test]
async fn the_kubelet_port_speaks_v5_channel_k8s_io_and_refuses_what_run_command_cannot_do()
-> Result<()> {
    let scenario = Scenario::start("exec-raw").await?;
    let ns = scenario.namespace.name.clone();
    let pod = burst_pod(
        "talker",
        scenario.node(),
        &[("simulated.orca.research/run-time", "forever")],
    );
    pods::create(&scenario.pods, &pod).await?;
    pods::wait_for_phase(&scenario.pods, "talker", "Running", Duration::from_secs(60)).await?;
    let reader = NodeReader::create(&ns, &format!("{}-exec", scenario.node()), "nodes/proxy")?;
    let port = scenario.orca.kubelet_port;
    let base = format!("/exec/{ns}/talker/main");
    let v5 = "v5.channel.k8s.io";

    // The first message is an empty one on the lowest output channel; then the output, then
    // the outcome.
    let echo = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=echo&command=hi&output=1&error=1"),
        v5,
        &[],
    )
    .await?;
    ensure!(echo[0] == [1], "{echo:?}");
    ensure!(echo.contains(&b"\x01hi\n".to_vec()), "{echo:?}");
    ensure!(outcome(&echo)?["status"] == "Success", "{echo:?}");

    // Input until the client closes it (v5's close signal), then the command.
    let cat = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=cat&input=1&output=1"),
        &format!("v4.channel.k8s.io, {v5}"),
        &[b"\x00one ".to_vec(), b"\x00two".to_vec(), vec![255, 0]],
    )
    .await?;
    ensure!(cat.contains(&b"\x01one two".to_vec()), "{cat:?}");
    ensure!(outcome(&cat)?["status"] == "Success", "{cat:?}");

    // A non-zero exit, as client-go reads it.
    let exit = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=sh&command=-c&command=exit%205&output=1"),
        v5,
        &[],
    )
    .await?;
    let status = outcome(&exit)?;
    ensure!(
        status["reason"] == "NonZeroExitCode"
            && status["details"]["causes"][0]["reason"] == "ExitCode"
            && status["details"]["causes"][0]["message"] == "5",
        "{status}"
    );

    // A terminal is refused with the reason, and so is input over the bound.
    let tty = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=sh&input=1&output=1&tty=1"),
        v5,
        &[],
    )
    .await?;
    let status = outcome(&tty)?;
    ensure!(
        status["status"] == "Failure"
            && status["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no terminal"),
        "{status}"
    );
    let mut big = vec![0u8];
    big.extend(std::iter::repeat_n(b'x', 25 * 1024));
    let large = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=cat&input=1&output=1"),
        v5,
        &[big],
    )
    .await?;
    let status = outcome(&large)?;
    ensure!(
        status["message"]
            .as_str()
            .unwrap_or_default()
            .contains("24576 bytes"),
        "{status}"
    );

    // A client offering only older protocols is refused before any upgrade, saying why.
    let refused = raw_exec(
        port,
        &reader.token,
        &format!("{base}?command=true&output=1"),
        "v4.channel.k8s.io",
        &[],
    )
    .await;
    let error = format!("{:#}", refused.expect_err("refused"));
    ensure!(error.contains("400"), "{error}");
    drop(reader);
    scenario.finish().await
}
