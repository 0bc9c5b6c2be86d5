use std::sync::Arc;
use std::time::Duration;

use super::fake::{FakeSsm, in_progress, invocation};
use super::*;

const INSTANCE: &str = "i-0123456789abcdef0";
const TIMEOUT: Duration = Duration::from_secs(600);

fn request(command: &[&str], stdin: Option<&[u8]>) -> ExecRequest {
    ExecRequest {
        container: "main".to_owned(),
        command: command.iter().map(|word| (*word).to_owned()).collect(),
        stdin: stdin.map(<[u8]>::to_vec),
    }
}

#[test]
fn each_argument_reaches_docker_exec_as_one_quoted_word_and_input_is_decoded_into_it() {
    let cases: [(ExecRequest, Result<String, CommandRefusal>); 6] = [
        (
            request(&["nvidia-smi"], None),
            Ok("docker exec orca-main nvidia-smi".to_owned()),
        ),
        (
            request(&["sh", "-c", "echo $HOME; exit 3"], None),
            Ok("docker exec orca-main sh -c 'echo $HOME; exit 3'".to_owned()),
        ),
        (
            request(&["echo", "it's", ""], None),
            Ok(r"docker exec orca-main echo 'it'\''s' ''".to_owned()),
        ),
        (
            request(&["cat"], Some(b"a\nb")),
            Ok("printf %s YQpi | base64 -d | docker exec -i orca-main cat".to_owned()),
        ),
        (request(&[], None), Err(CommandRefusal::Empty)),
        (
            request(&["echo", "a\0b"], None),
            Err(CommandRefusal::NulByte {
                place: "argument 1 of the command".to_owned(),
            }),
        ),
    ];
    for (request, expected) in cases {
        assert_eq!(command_line(&request), expected, "{request:?}");
    }
    let big = vec![b'x'; MAX_STDIN_BYTES + 1];
    assert_eq!(
        command_line(&request(&["cat"], Some(&big))),
        Err(CommandRefusal::InputTooLarge {
            bytes: MAX_STDIN_BYTES + 1
        })
    );
    assert!(command_line(&request(&["cat"], Some(&big[1..]))).is_ok());
}

#[test]
fn an_invocation_is_waited_for_until_it_ends_and_only_a_script_that_ran_gives_an_exit_code() {
    use InvocationStatus as S;
    let ended = |code| {
        Poll::Ended(ExecOutcome {
            stdout: b"out".to_vec(),
            stderr: b"err".to_vec(),
            exit_code: code,
        })
    };
    let cases = [
        (S::Pending, "Pending", -1, Some(Poll::Wait)),
        (S::InProgress, "InProgress", -1, Some(Poll::Wait)),
        (S::Delayed, "Delayed", -1, Some(Poll::Wait)),
        (S::Cancelling, "Cancelling", -1, Some(Poll::Wait)),
        (S::Other("Paused".to_owned()), "", -1, Some(Poll::Wait)),
        (S::Success, "Success", 0, Some(ended(0))),
        (S::Failed, "Failed", 3, Some(ended(3))),
        (S::Failed, "Failed", 127, Some(ended(127))),
        // Not the script's exit code: the agent never ran it.
        (S::Failed, "Undeliverable", -1, None),
        (S::Failed, "Terminated", -1, None),
        (S::Failed, "Failed", -1, None),
        (S::TimedOut, "ExecutionTimedOut", -1, None),
        (S::TimedOut, "DeliveryTimedOut", -1, None),
        (S::Cancelled, "Cancelled", -1, None),
    ];
    for (status, details, code, expected) in cases {
        let answer = poll(
            &invocation(status.clone(), details, code, "out", "err"),
            TIMEOUT,
        );
        match expected {
            Some(expected) => assert_eq!(answer, expected, "{status:?} {details}"),
            None => assert!(
                matches!(&answer, Poll::Failed(error) if error.message.contains(details)),
                "{status:?} {details}: {answer:?}"
            ),
        }
    }
}

#[test]
fn output_at_ssms_limits_says_it_may_be_cut() {
    let long = "x".repeat(STDOUT_LIMIT);
    let Poll::Ended(outcome) = poll(
        &invocation(InvocationStatus::Success, "Success", 0, &long, "warn"),
        TIMEOUT,
    ) else {
        panic!("ended");
    };
    assert_eq!(outcome.stdout.len(), STDOUT_LIMIT);
    let stderr = String::from_utf8(outcome.stderr).unwrap();
    assert!(stderr.starts_with("warn\norca: Systems Manager returns only the first 24000 characters of a command's standard output"), "{stderr}");
    let Poll::Ended(short) = poll(
        &invocation(InvocationStatus::Success, "Success", 0, "ok", "warn"),
        TIMEOUT,
    ) else {
        panic!("ended");
    };
    assert_eq!(short.stderr, b"warn");
}

#[tokio::test(start_paused = true)]
async fn a_command_is_sent_once_and_polled_through_ssms_delay_until_it_ends() {
    let ssm = Arc::new(FakeSsm::managing(INSTANCE));
    ssm.unseen_for(2);
    ssm.script(vec![
        Ok(in_progress()),
        Ok(in_progress()),
        Ok(invocation(
            InvocationStatus::Failed,
            "Failed",
            3,
            "out\n",
            "err\n",
        )),
    ]);
    let outcome = run(
        ssm.clone(),
        INSTANCE,
        &request(&["sh", "-c", "exit 3"], None),
        TIMEOUT,
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        ExecOutcome {
            stdout: b"out\n".to_vec(),
            stderr: b"err\n".to_vec(),
            exit_code: 3
        }
    );
    let commands = ssm.commands();
    assert_eq!(commands.len(), 1);
    assert_eq!(
        commands[0],
        RunCommand {
            instance_id: INSTANCE.to_owned(),
            commands: vec!["docker exec orca-main sh -c 'exit 3'".to_owned()],
            execution_timeout: TIMEOUT,
            comment: "orca exec in main: sh -c exit 3".to_owned(),
        }
    );
    assert_eq!(ssm.polls(), 5);
    assert!(ssm.cancelled().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_instance_without_the_ssm_agent_is_named_with_what_it_needs() {
    let ssm = Arc::new(FakeSsm::managing("i-other"));
    let error = run(ssm.clone(), INSTANCE, &request(&["true"], None), TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(error.code, "InstanceNotManaged");
    assert!(error.message.contains(INSTANCE), "{error}");
    assert!(error.message.contains("SSM agent"), "{error}");
    assert_eq!(ssm.polls(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_invocation_ssm_never_shows_fails_after_its_grace_and_is_cancelled() {
    let ssm = Arc::new(FakeSsm::managing(INSTANCE));
    ssm.unseen_for(usize::MAX);
    let error = run(ssm.clone(), INSTANCE, &request(&["true"], None), TIMEOUT)
        .await
        .unwrap_err();
    assert_eq!(error.code, "InvocationDoesNotExist");
    // Polled with backoff (at most every 2 s) for about 30 s, not in a hot loop.
    assert!((15..=25).contains(&ssm.polls()), "{}", ssm.polls());
    tokio::task::yield_now().await;
    assert_eq!(ssm.cancelled().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_command_that_never_ends_is_cancelled_past_its_timeout() {
    let ssm = Arc::new(FakeSsm::managing(INSTANCE));
    ssm.script(vec![Ok(in_progress())]);
    let timeout = Duration::from_secs(30);
    let error = run(
        ssm.clone(),
        INSTANCE,
        &request(&["sleep", "inf"], None),
        timeout,
    )
    .await
    .unwrap_err();
    assert_eq!(error.code, "CommandTimedOut");
    tokio::task::yield_now().await;
    assert_eq!(
        ssm.cancelled(),
        vec![("command-1".to_owned(), INSTANCE.to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_stops_waiting_cancels_the_command() {
    let ssm = Arc::new(FakeSsm::managing(INSTANCE));
    ssm.script(vec![Ok(in_progress())]);
    let sleep = request(&["sleep", "inf"], None);
    let running = run(ssm.clone(), INSTANCE, &sleep, TIMEOUT);
    let waited = tokio::time::timeout(Duration::from_secs(5), running).await;
    assert!(waited.is_err(), "still running");
    tokio::task::yield_now().await;
    assert_eq!(
        ssm.cancelled(),
        vec![("command-1".to_owned(), INSTANCE.to_owned())]
    );
}

#[tokio::test(start_paused = true)]
async fn throttling_while_polling_is_waited_out() {
    let ssm = Arc::new(FakeSsm::managing(INSTANCE));
    ssm.script(vec![
        Err(SsmError::classify("ThrottlingException", "Rate exceeded")),
        Ok(invocation(
            InvocationStatus::Success,
            "Success",
            0,
            "ok",
            "",
        )),
    ]);
    let outcome = run(ssm.clone(), INSTANCE, &request(&["true"], None), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(outcome.stdout, b"ok");
}
