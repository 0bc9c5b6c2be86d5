//! What a simulated container does with `kubectl exec`: a few commands a minimal image has,
//! run without side effects, so tests see output, input and exit codes travel as they would.
//!
//! `echo WORDS…`, `cat` (its input), `hostname` (the instance id), `true`, `false`,
//! `exit N`, and `sh -c 'A; B; …'` of those (each split on whitespace; `exit` stops). Anything
//! else is not found (exit code 127), as in a container without it.

use crate::provider::{ExecOutcome, ExecRequest};

/// Runs `request` as the simulated container on `instance_id` would.
pub fn run(instance_id: &str, request: &ExecRequest) -> ExecOutcome {
    let mut outcome = ExecOutcome::default();
    let stdin = request.stdin.as_deref().unwrap_or_default();
    let script: Vec<Vec<&str>> = match request.command.as_slice() {
        [shell, flag, script] if shell_named(shell) && flag == "-c" => script
            .split([';', '\n'])
            .map(|part| part.split_whitespace().collect())
            .filter(|words: &Vec<&str>| !words.is_empty())
            .collect(),
        words => vec![words.iter().map(String::as_str).collect()],
    };
    for words in script {
        match Step::of(&words) {
            Step::Output(text) => {
                outcome.stdout.extend_from_slice(text.as_bytes());
                outcome.exit_code = 0;
            }
            Step::Input => {
                outcome.stdout.extend_from_slice(stdin);
                outcome.exit_code = 0;
            }
            Step::Host => {
                outcome
                    .stdout
                    .extend_from_slice(format!("{instance_id}\n").as_bytes());
                outcome.exit_code = 0;
            }
            Step::Status(code) => outcome.exit_code = code,
            Step::Exit(code) => {
                outcome.exit_code = code;
                break;
            }
            Step::NotFound(name) => {
                outcome
                    .stderr
                    .extend_from_slice(format!("sh: {name}: not found\n").as_bytes());
                outcome.exit_code = 127;
            }
        }
    }
    outcome
}

fn shell_named(word: &str) -> bool {
    matches!(word, "sh" | "bash" | "/bin/sh" | "/bin/bash")
}

/// One simple command.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Output(String),
    Input,
    Host,
    Status(i32),
    Exit(i32),
    NotFound(String),
}

impl Step {
    fn of(words: &[&str]) -> Step {
        match words {
            ["echo", rest @ ..] => Step::Output(format!("{}\n", rest.join(" "))),
            ["cat"] => Step::Input,
            ["hostname"] => Step::Host,
            ["true"] => Step::Status(0),
            ["false"] => Step::Status(1),
            ["exit"] => Step::Exit(0),
            ["exit", code] => Step::Exit(code.parse::<u8>().map_or(2, i32::from)),
            [name, ..] => Step::NotFound((*name).to_owned()),
            [] => Step::Status(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec(command: &[&str], stdin: Option<&str>) -> (String, String, i32) {
        let request = ExecRequest {
            container: "main".to_owned(),
            command: command.iter().map(|w| (*w).to_owned()).collect(),
            stdin: stdin.map(|text| text.as_bytes().to_vec()),
        };
        let outcome = run("i-sim1", &request);
        (
            String::from_utf8(outcome.stdout).unwrap(),
            String::from_utf8(outcome.stderr).unwrap(),
            outcome.exit_code,
        )
    }

    /// A command, its input, and (stdout, stderr, exit code).
    type Case<'a> = (&'a [&'a str], Option<&'a str>, (&'a str, &'a str, i32));

    #[test]
    fn a_simulated_container_answers_as_a_minimal_image_would() {
        let cases: [Case; 8] = [
            (&["echo", "hello", "world"], None, ("hello world\n", "", 0)),
            (&["hostname"], None, ("i-sim1\n", "", 0)),
            (&["cat"], Some("in\nput"), ("in\nput", "", 0)),
            (&["false"], None, ("", "", 1)),
            (
                &["sh", "-c", "echo out; exit 3; echo never"],
                None,
                ("out\n", "", 3),
            ),
            (&["sh", "-c", "cat; true"], Some("x"), ("x", "", 0)),
            (
                &["nvidia-smi"],
                None,
                ("", "sh: nvidia-smi: not found\n", 127),
            ),
            (&["sh", "-c", "exit 300"], None, ("", "", 2)),
        ];
        for (command, stdin, (stdout, stderr, code)) in cases {
            assert_eq!(
                exec(command, stdin),
                (stdout.to_owned(), stderr.to_owned(), code),
                "{command:?}"
            );
        }
    }
}
