//! `kubectl exec` end to end on the aws provider (issue 44): the real kubectl and apiserver
//! (1.36, passing the WebSocket through to orca, whose node declares
//! `ExtendWebSocketsToKubelet`), the real orca binary, and Systems Manager's Run Command
//! through the real AWS SDK against moto. moto answers every command with no output; the
//! harness's moto wrapper runs each `AWS-RunShellScript` as the SSM agent on a running
//! instance would (the invocation unknown at first, then in progress, then its output and exit
//! code), with `docker exec` a stand-in that runs the command in the instance's directory and
//! sets `ORCA_EXEC_CONTAINER` to the container's name. What no test here shows: a real SSM
//! agent and Docker on a booted instance.

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use orca_e2e::pods::{self, burst_pod, instance_id};
use orca_e2e::{OrcaProcess, TestCluster, TestNamespace, aws_test_config, unique_node_name};

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
