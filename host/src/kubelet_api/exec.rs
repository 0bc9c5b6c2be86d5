//! `kubectl exec`: the kubelet's `/exec/{namespace}/{pod}/{container}` over the WebSocket
//! protocol `v5.channel.k8s.io`, which the apiserver (1.36, `ExtendWebSocketsToKubelet`)
//! passes through to a node that declares the feature, as orca's nodes do.
//!
//! Each message is a channel byte and data: 0 stdin, 1 stdout, 2 stderr, 3 the outcome (a
//! `Status`), 4 terminal resizes, and 255 + a channel to close that channel (v5). The command
//! runs to its end through the provider ([`Provider::exec`]); its output is then sent, and
//! its exit code as client-go reads it (`NonZeroExitCode`, cause `ExitCode`).
//!
//! # Caveats
//! - Input (`-i`) is read whole, up to [`MAX_STDIN_BYTES`], until the client closes it, before
//!   the command runs; output arrives when the command has ended.
//! - No terminal (`-t`): it is refused, saying why. SPDY (kubectl before 1.30, or an apiserver
//!   translating) is refused the same way.

use std::sync::Arc;

use axum::Extension;
use axum::extract::State;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::state::{Admitted, ApiState};
use super::target::decoded;
use crate::cluster::apiserver::{ServerFeature, ServerVersion};
use crate::process::served_nodes::FoundPod;
use crate::provider::{ExecOutcome, ExecRequest, MAX_STDIN_BYTES, PodKey, Provider};

/// The one remote-command protocol served.
pub const PROTOCOL: &str = "v5.channel.k8s.io";
const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const CLOSE: u8 = 255;
/// The most output bytes in one message.
const CHUNK: usize = 32 * 1024;

/// What the request asks for (the apiserver's query: `input`, `output`, `error`, `tty`, and
/// `command` once per word).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
    pub command: Vec<String>,
}

/// Reads the query as the kubelet does.
///
/// # Errors
/// No command, or none of stdin, stdout and stderr, as the kubelet refuses them.
pub fn options(query: Option<&str>) -> Result<ExecOptions, String> {
    let mut options = ExecOptions {
        stdin: false,
        stdout: false,
        stderr: false,
        tty: false,
        command: Vec::new(),
    };
    for (key, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        let on = matches!(value.as_ref(), "1" | "true");
        match key.as_ref() {
            "input" | "stdin" => options.stdin = on,
            "output" | "stdout" => options.stdout = on,
            "error" | "stderr" => options.stderr = on,
            "tty" => options.tty = on,
            "command" => options.command.push(value.into_owned()),
            _ => {}
        }
    }
    if options.command.is_empty() {
        return Err("you must specify at least one command for the container".to_owned());
    }
    if !(options.stdin || options.stdout || options.stderr) {
        return Err("you must specify at least 1 of stdin, stdout, stderr".to_owned());
    }
    Ok(options)
}

/// The namespace, pod and container of an exec path (`{ns}/{pod}/{container}`, or with the
/// pod's UID before the container).
fn path_target(path: &str) -> Option<(String, String, String)> {
    let parts: Vec<Option<String>> = path
        .strip_prefix("/exec/")?
        .split('/')
        .map(decoded)
        .collect();
    match parts.as_slice() {
        [Some(namespace), Some(pod), Some(container)]
        | [Some(namespace), Some(pod), Some(_), Some(container)] => {
            Some((namespace.clone(), pod.clone(), container.clone()))
        }
        _ => None,
    }
}

/// The outcome message (channel 3) for a command that ran.
pub fn outcome_status(command: &[String], exit_code: i32) -> serde_json::Value {
    if exit_code == 0 {
        return json!({"metadata": {}, "status": "Success"});
    }
    if !(0..=255).contains(&exit_code) {
        return failure(&format!(
            "the command ended without an exit code (the backend reported {exit_code})"
        ));
    }
    json!({
        "metadata": {},
        "status": "Failure",
        "message": format!(
            "command terminated with non-zero exit code: error executing command {command:?}, exit code {exit_code}"
        ),
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": exit_code.to_string()}]},
    })
}

/// The outcome message for a command that did not run; client-go prints `message`.
pub fn failure(message: &str) -> serde_json::Value {
    json!({
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "InternalError",
        "code": 500,
    })
}

/// A refusal before any upgrade: a `Status` body client-go shows, with `code`.
fn refuse(status: StatusCode, message: String) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": if status == StatusCode::NOT_FOUND { "NotFound" } else { "BadRequest" },
        "code": status.as_u16(),
    });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Whether the client offered `v5.channel.k8s.io`.
fn offers_protocol(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|offered| offered.trim() == PROTOCOL)
}

pub async fn exec(
    State(state): State<Arc<ApiState>>,
    uri: Uri,
    headers: HeaderMap,
    admitted: Option<Extension<Admitted>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Some((namespace, name, container)) = path_target(uri.path()) else {
        return refuse(
            StatusCode::NOT_FOUND,
            "exec paths are /exec/{namespace}/{pod}/{container}".to_owned(),
        );
    };
    let admitted_pod =
        admitted.and_then(|Extension(admitted)| admitted.pod_named(&namespace, &name));
    let Some(FoundPod { pod, provider, .. }) = admitted_pod else {
        return refuse(StatusCode::NOT_FOUND, state.not_served(&namespace, &name));
    };
    let in_spec = pod.spec.as_ref().is_some_and(|spec| {
        let init = spec.init_containers.iter().flatten();
        spec.containers
            .iter()
            .chain(init)
            .any(|c| c.name == container)
    });
    if !in_spec {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!("container {container:?} is not valid for pod {name:?}"),
        );
    }
    let options = match options(uri.query()) {
        Ok(options) => options,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message),
    };
    let Some(key) = PodKey::of(&pod) else {
        return refuse(
            StatusCode::NOT_FOUND,
            format!("pod {namespace}/{name} has no UID yet"),
        );
    };
    let upgrade = match upgrade {
        Ok(upgrade) if offers_protocol(&headers) => upgrade,
        _ => {
            let message = refusal_of_other_protocols(&requested(&headers), state.schema.version());
            state
                .warnings
                .warn(&pod, EXEC_REFUSED, "Exec", &message)
                .await;
            return refuse(StatusCode::BAD_REQUEST, message);
        }
    };
    upgrade
        .protocols([PROTOCOL])
        .on_upgrade(move |socket| session(socket, provider, key, container, options))
}

/// The Warning's reason on a pod whose `kubectl exec` the node could not serve.
pub const EXEC_REFUSED: &str = "ExecRefused";

/// What a request for exec over anything but [`PROTOCOL`] is told (and the pod's Warning
/// says): why, given the apiserver's release when it is known. An apiserver before 1.36
/// speaks SPDY to every node, so there the answer is the control plane, not kubectl.
pub fn refusal_of_other_protocols(requested: &str, server: Option<ServerVersion>) -> String {
    match server {
        Some(server) if !server.has(ServerFeature::WebSocketsToKubelet) => format!(
            "kubectl exec needs a Kubernetes control plane of 1.{minor} or later on orca's \
             nodes: this apiserver ({server}) speaks {requested} to nodes, and orca serves exec \
             over WebSockets ({PROTOCOL}) only, which apiservers pass through from 1.{minor} \
             on. Logs, metrics and everything else work on this release",
            minor = ServerFeature::WebSocketsToKubelet.since_minor(),
        ),
        _ => format!(
            "orca serves exec over WebSockets with the {PROTOCOL} protocol (kubectl 1.30 or \
             later, through an apiserver of 1.{minor} or later); this request asked for \
             {requested}",
            minor = ServerFeature::WebSocketsToKubelet.since_minor(),
        ),
    }
}

/// What the refused request asked for, for the message.
fn requested(headers: &HeaderMap) -> String {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|value| value.to_str().ok());
    let protocols = headers
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|value| value.to_str().ok());
    match (upgrade, protocols) {
        (Some(upgrade), Some(protocols)) => format!("{upgrade} with {protocols}"),
        (Some(upgrade), None) => upgrade.to_owned(),
        (None, _) => "no upgrade".to_owned(),
    }
}

/// One exec, once upgraded.
async fn session(
    mut socket: WebSocket,
    provider: Arc<dyn Provider>,
    pod: PodKey,
    container: String,
    options: ExecOptions,
) {
    // client-go waits for a first message on the lowest channel it reads before it sends.
    let first = match (options.stdout, options.stderr) {
        (true, _) => STDOUT,
        (false, true) => STDERR,
        (false, false) => ERROR,
    };
    if send(&mut socket, first, &[]).await.is_err() {
        return;
    }
    if options.tty {
        let message = "orca runs exec through AWS Systems Manager's Run Command, which has no \
                       terminal: run the command without -t (with -i to send it input)";
        finish(&mut socket, &failure(message)).await;
        return;
    }
    let stdin = if options.stdin {
        match read_stdin(&mut socket).await {
            Input::Closed(bytes) => Some(bytes),
            Input::TooLarge => {
                let message = format!(
                    "the command's input is over {MAX_STDIN_BYTES} bytes, the most orca passes \
                     to a command; copy larger input another way"
                );
                finish(&mut socket, &failure(&message)).await;
                return;
            }
            Input::Gone => return,
        }
    } else {
        None
    };
    let request = ExecRequest {
        container,
        command: options.command.clone(),
        stdin,
    };
    // The command's words may carry secrets: only its program at info.
    let program = request
        .command
        .first()
        .map(String::as_str)
        .unwrap_or_default();
    tracing::info!(%pod, container = %request.container, %program, "exec");
    let result = tokio::select! {
        result = provider.exec(&pod, &request) => result,
        () = client_gone(&mut socket) => {
            tracing::info!(%pod, "exec client went away; the command is cancelled");
            return;
        }
    };
    match result {
        Ok(outcome) => {
            if deliver(&mut socket, &options, &outcome).await.is_err() {
                return;
            }
            finish(
                &mut socket,
                &outcome_status(&request.command, outcome.exit_code),
            )
            .await;
        }
        Err(error) => {
            tracing::info!(%pod, %error, "exec failed");
            finish(&mut socket, &failure(&error.to_string())).await;
        }
    }
}

enum Input {
    Closed(Vec<u8>),
    TooLarge,
    Gone,
}

/// Standard input until the client closes it (v5's close signal).
async fn read_stdin(socket: &mut WebSocket) -> Input {
    let mut input = Vec::new();
    while let Some(Ok(message)) = socket.recv().await {
        let data = match message {
            Message::Binary(data) => data,
            Message::Close(_) => return Input::Gone,
            _ => continue,
        };
        match data.first() {
            Some(&STDIN) => {
                input.extend_from_slice(&data[1..]);
                if input.len() > MAX_STDIN_BYTES {
                    return Input::TooLarge;
                }
            }
            Some(&CLOSE) if data.get(1) == Some(&STDIN) => return Input::Closed(input),
            _ => {}
        }
    }
    Input::Gone
}

/// Returns once the client closes the connection; everything else it sends is dropped.
async fn client_gone(socket: &mut WebSocket) {
    while let Some(Ok(message)) = socket.recv().await {
        if matches!(message, Message::Close(_)) {
            return;
        }
    }
}

async fn deliver(
    socket: &mut WebSocket,
    options: &ExecOptions,
    outcome: &ExecOutcome,
) -> Result<(), axum::Error> {
    for (wanted, channel, data) in [
        (options.stdout, STDOUT, &outcome.stdout),
        (options.stderr, STDERR, &outcome.stderr),
    ] {
        if !wanted {
            continue;
        }
        for chunk in data.chunks(CHUNK) {
            send(socket, channel, chunk).await?;
        }
    }
    Ok(())
}

async fn send(socket: &mut WebSocket, channel: u8, data: &[u8]) -> Result<(), axum::Error> {
    let mut message = Vec::with_capacity(data.len() + 1);
    message.push(channel);
    message.extend_from_slice(data);
    socket.send(Message::Binary(message.into())).await
}

/// The outcome on channel 3, then a normal close.
async fn finish(socket: &mut WebSocket, status: &serde_json::Value) {
    if send(socket, ERROR, status.to_string().as_bytes())
        .await
        .is_ok()
    {
        let _ = socket
            .send(Message::Close(Some(CloseFrame {
                code: close_code::NORMAL,
                reason: "".into(),
            })))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_over_spdy_is_told_what_would_serve_it_given_the_apiservers_release() {
        let at = |git: &str| ServerVersion::parse(git, "", "").ok();
        let old = refusal_of_other_protocols("SPDY/3.1", at("v1.33.13"));
        assert!(
            old.starts_with("kubectl exec needs a Kubernetes control plane of 1.36 or later")
                && old.contains("this apiserver (v1.33.13) speaks SPDY/3.1 to nodes"),
            "{old}"
        );
        // A release that passes the WebSocket through, or none known: the client is the
        // suspect (kubectl before 1.30 speaks SPDY itself).
        for server in [at("v1.36.3"), at("v1.37.2"), None] {
            let told = refusal_of_other_protocols("SPDY/3.1", server.clone());
            assert!(
                told.starts_with("orca serves exec over WebSockets with the v5.channel.k8s.io")
                    && told.ends_with("this request asked for SPDY/3.1"),
                "{server:?}: {told}"
            );
        }
    }

    #[test]
    fn the_apiservers_query_is_read_as_the_kubelet_reads_it() {
        let words = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let cases = [
            (
                "output=1&error=1&command=sh&command=-c&command=echo%20a%3Bexit%203",
                Ok(ExecOptions {
                    stdin: false,
                    stdout: true,
                    stderr: true,
                    tty: false,
                    command: words(&["sh", "-c", "echo a;exit 3"]),
                }),
            ),
            (
                "input=1&output=1&tty=1&command=bash",
                Ok(ExecOptions {
                    stdin: true,
                    stdout: true,
                    stderr: false,
                    tty: true,
                    command: words(&["bash"]),
                }),
            ),
            (
                "stdout=true&command=ls",
                Ok(ExecOptions {
                    stdin: false,
                    stdout: true,
                    stderr: false,
                    tty: false,
                    command: words(&["ls"]),
                }),
            ),
            (
                "output=1",
                Err("you must specify at least one command for the container".to_owned()),
            ),
            (
                "command=ls&output=0",
                Err("you must specify at least 1 of stdin, stdout, stderr".to_owned()),
            ),
        ];
        for (query, expected) in cases {
            assert_eq!(options(Some(query)), expected, "{query}");
        }
        assert!(options(None).is_err());
    }

    #[test]
    fn exec_paths_name_the_pod_and_container_with_or_without_the_uid() {
        let target = |ns: &str, pod: &str, c: &str| Some((ns.into(), pod.into(), c.into()));
        let cases = [
            ("/exec/ns/web-1/main", target("ns", "web-1", "main")),
            ("/exec/ns/web-1/uid-1/main", target("ns", "web-1", "main")),
            ("/exec/ns/web%2D1/main", target("ns", "web-1", "main")),
            ("/exec/ns/web-1", None),
            ("/exec/ns//main", None),
            ("/exec/a/b/c/d/e", None),
        ];
        for (path, expected) in cases {
            assert_eq!(path_target(path), expected, "{path}");
        }
    }

    #[test]
    fn the_outcome_is_what_client_go_turns_into_an_exit_code() {
        let command = vec!["sh".to_owned(), "-c".to_owned(), "exit 3".to_owned()];
        assert_eq!(
            outcome_status(&command, 0),
            json!({"metadata": {}, "status": "Success"})
        );
        let failed = outcome_status(&command, 3);
        assert_eq!(failed["status"], "Failure");
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(
            failed["details"]["causes"],
            json!([{"reason": "ExitCode", "message": "3"}])
        );
        // client-go reads the code as a byte: anything else is reported, not passed on.
        for code in [-1, 256] {
            let odd = outcome_status(&command, code);
            assert_eq!(odd["status"], "Failure");
            assert_ne!(odd["reason"], "NonZeroExitCode");
        }
    }
}
