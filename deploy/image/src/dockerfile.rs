//! The final stage of `deploy/Dockerfile`, read as the image's recipe: its base, what it copies
//! where, and the image settings (USER, EXPOSE, ENTRYPOINT, CMD, ENV, WORKDIR). Reading the
//! recipe rather than restating it keeps this builder and the Dockerfile from drifting apart.
//!
//! Only what can be done without running anything in the image is accepted: a `RUN`, a shell
//! form `ENTRYPOINT`, or any other instruction in the final stage is refused by name.

use std::path::{Path, PathBuf};

/// Why the Dockerfile's final stage cannot be built here.
#[derive(Debug, thiserror::Error)]
pub enum DockerfileError {
    #[error("reading {}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} has no FROM", .0.display())]
    NoStage(PathBuf),
    #[error(
        "line {line}: {instruction} in the final stage needs a container engine (this builder only copies files and sets image settings: COPY, USER, EXPOSE, ENTRYPOINT, CMD, ENV, WORKDIR)"
    )]
    NeedsEngine { line: usize, instruction: String },
    #[error("line {line}: {instruction}: {problem}")]
    Malformed {
        line: usize,
        instruction: String,
        problem: String,
    },
}

/// One `COPY` of the final stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    /// `--from=STAGE`: a build stage's file system; `None`: the build context.
    pub from: Option<String>,
    /// The file copied, as written (absolute in a stage, relative to the context otherwise).
    pub source: String,
    /// Where it goes in the image (a trailing `/` puts it under that directory).
    pub destination: String,
    /// The instruction as written, for the layer's history.
    pub text: String,
}

impl Copy {
    /// The absolute path in the image.
    pub fn target(&self) -> String {
        if self.destination.ends_with('/') {
            let name = Path::new(&self.source)
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default();
            format!("{}{name}", self.destination)
        } else {
            self.destination.clone()
        }
    }
}

/// The final stage: its base image, its copies in order, and the settings it gives the image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalStage {
    pub base: String,
    pub copies: Vec<Copy>,
    pub user: Option<String>,
    pub exposed_ports: Vec<String>,
    pub entrypoint: Option<Vec<String>>,
    pub cmd: Option<Vec<String>>,
    pub env: Vec<(String, String)>,
    pub workdir: Option<String>,
}

impl FinalStage {
    /// Reads the final stage of the Dockerfile at `path`.
    ///
    /// # Errors
    /// [`DockerfileError`]: unreadable, no stage, or an instruction this builder cannot carry out.
    pub fn read(path: &Path) -> Result<FinalStage, DockerfileError> {
        let text = std::fs::read_to_string(path).map_err(|source| DockerfileError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        FinalStage::parse(&text)?.ok_or_else(|| DockerfileError::NoStage(path.to_owned()))
    }

    /// The final stage of a Dockerfile's text; `None` when it has no `FROM`.
    ///
    /// # Errors
    /// [`DockerfileError::NeedsEngine`] or [`DockerfileError::Malformed`], with the line.
    pub fn parse(text: &str) -> Result<Option<FinalStage>, DockerfileError> {
        let all = instructions(text);
        // Earlier stages run on an engine (or deploy/check-build-stage); only the last one's
        // instructions make the image.
        let Some(last_from) = all
            .iter()
            .rposition(|(_, instruction, _)| instruction.eq_ignore_ascii_case("FROM"))
        else {
            return Ok(None);
        };
        let mut stage = FinalStage {
            base: all[last_from]
                .2
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned(),
            ..FinalStage::default()
        };
        for (line, instruction, arguments) in &all[last_from + 1..] {
            stage.apply(*line, &instruction.to_ascii_uppercase(), arguments)?;
        }
        Ok(Some(stage))
    }

    fn apply(
        &mut self,
        line: usize,
        keyword: &str,
        arguments: &str,
    ) -> Result<(), DockerfileError> {
        let malformed = |problem: &str| DockerfileError::Malformed {
            line,
            instruction: keyword.to_owned(),
            problem: problem.to_owned(),
        };
        match keyword {
            "COPY" => self
                .copies
                .push(parse_copy(arguments).map_err(|p| malformed(&p))?),
            "USER" => self.user = Some(arguments.trim().to_owned()),
            "EXPOSE" => self
                .exposed_ports
                .extend(arguments.split_whitespace().map(|port| {
                    if port.contains('/') {
                        port.to_owned()
                    } else {
                        format!("{port}/tcp")
                    }
                })),
            "ENTRYPOINT" => {
                self.entrypoint = Some(exec_form(arguments).map_err(|p| malformed(&p))?)
            }
            "CMD" => self.cmd = Some(exec_form(arguments).map_err(|p| malformed(&p))?),
            "WORKDIR" => self.workdir = Some(arguments.trim().to_owned()),
            "ENV" => {
                for pair in arguments.split_whitespace() {
                    let (key, value) = pair
                        .split_once('=')
                        .filter(|(_, value)| !value.contains(['"', '\'']))
                        .ok_or_else(|| malformed("only unquoted KEY=value pairs are read"))?;
                    self.env.push((key.to_owned(), value.to_owned()));
                }
            }
            _ => {
                return Err(DockerfileError::NeedsEngine {
                    line,
                    instruction: keyword.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// `(line, instruction, arguments)` of each instruction: continuation lines joined, comments
/// and parser directives skipped.
fn instructions(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (index, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if pending.is_none() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((index + 1, String::new()));
        if trimmed.starts_with('#') {
            // A comment inside a continued instruction is dropped, as BuildKit does.
            pending = Some((start, joined));
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(trimmed);
                let (instruction, arguments) = joined
                    .split_once(char::is_whitespace)
                    .unwrap_or((&joined, ""));
                out.push((start, instruction.to_owned(), arguments.trim().to_owned()));
            }
        }
    }
    out
}

fn parse_copy(arguments: &str) -> Result<Copy, String> {
    let mut from = None;
    let mut paths = Vec::new();
    for word in arguments.split_whitespace() {
        if let Some(stage) = word.strip_prefix("--from=") {
            from = Some(stage.to_owned());
        } else if word.starts_with("--") {
            return Err(format!("the option {word} is not supported (only --from)"));
        } else {
            paths.push(word.to_owned());
        }
    }
    match paths.as_slice() {
        [source, destination] => Ok(Copy {
            from,
            source: source.clone(),
            destination: destination.clone(),
            text: format!("COPY {arguments}"),
        }),
        _ => Err("one source and one destination are supported".to_owned()),
    }
}

/// The JSON (exec) form; the shell form would need `/bin/sh`, which distroless has not.
fn exec_form(arguments: &str) -> Result<Vec<String>, String> {
    serde_json::from_str(arguments)
        .map_err(|_| format!("{arguments} is not the JSON form [\"…\"] (the image has no shell)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOCKERFILE: &str = r#"# syntax=docker/dockerfile:1
FROM docker.io/library/rust:1.95-bookworm AS build
RUN cargo build \
 && install -D target/release/orca /out/orca
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/orca /usr/local/bin/orca
# a comment
COPY config.yaml /etc/orca/
USER 65532:65532
EXPOSE 10250 10255/udp
ENV A=1 B=two
ENTRYPOINT ["/usr/local/bin/orca"]
CMD ["--config", \
     "/etc/orca/config.yaml"]
"#;

    #[test]
    fn the_final_stage_is_read_and_earlier_stages_are_left_to_their_engine() {
        let stage = FinalStage::parse(DOCKERFILE).unwrap().unwrap();
        assert_eq!(stage.base, "gcr.io/distroless/cc-debian12:nonroot");
        assert_eq!(stage.copies.len(), 2);
        assert_eq!(stage.copies[0].from.as_deref(), Some("build"));
        assert_eq!(stage.copies[0].target(), "/usr/local/bin/orca");
        assert_eq!(stage.copies[1].from, None);
        assert_eq!(stage.copies[1].target(), "/etc/orca/config.yaml");
        assert_eq!(stage.user.as_deref(), Some("65532:65532"));
        assert_eq!(stage.exposed_ports, ["10250/tcp", "10255/udp"]);
        assert_eq!(
            stage.env,
            [("A".into(), "1".into()), ("B".into(), "two".into())]
        );
        assert_eq!(stage.entrypoint.unwrap(), ["/usr/local/bin/orca"]);
        assert_eq!(stage.cmd.unwrap(), ["--config", "/etc/orca/config.yaml"]);
    }

    #[test]
    fn what_only_an_engine_can_do_in_the_final_stage_is_refused_with_its_line() {
        for (text, line) in [
            ("FROM x\nRUN echo hi\n", 2),
            ("FROM x\n\nADD https://example.com/f /f\n", 3),
        ] {
            let error = FinalStage::parse(text).unwrap_err();
            assert!(
                matches!(error, DockerfileError::NeedsEngine { line: l, .. } if l == line),
                "{text}: {error}"
            );
        }
        let shell_form = FinalStage::parse("FROM x\nENTRYPOINT /usr/local/bin/orca\n").unwrap_err();
        assert!(shell_form.to_string().contains("JSON form"), "{shell_form}");
        let chown = FinalStage::parse("FROM x\nCOPY --chown=1 a /a\n").unwrap_err();
        assert!(chown.to_string().contains("--chown"), "{chown}");
    }

    #[test]
    fn the_repositorys_dockerfile_is_one_this_builder_can_carry_out() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Dockerfile");
        let stage = FinalStage::read(&path).unwrap();
        assert_eq!(stage.base, crate::base::DISTROLESS_CC_NONROOT);
        assert!(
            stage
                .copies
                .iter()
                .any(|copy| copy.from.as_deref() == Some("build")),
            "{stage:?}"
        );
    }
}
