//! A container's `docker create` arguments, as shell words for the bootstrap.
//!
//! Values known at launch are single-quoted text; values only the instance knows are
//! expansions of variables the bootstrap sets at boot (`orca_ip`, `orca_cpu_millis`, …).

use super::quote::{Word, quote};
use crate::workload::{ContainerSpec, EnvPart, EnvValue, InstanceFact, Mount};

/// The arguments after `docker create --name orca-<name>`, ending with the image and its
/// command line, each a shell word.
pub(crate) fn docker_args(container: &ContainerSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut flag = |name: &str, value: Option<String>| {
        args.push(name.to_owned());
        args.extend(value);
    };
    if container.gpus {
        flag("--gpus", Some("all".to_owned()));
    }
    if container.privileged {
        flag("--privileged", None);
    }
    if let Some(user) = &container.user {
        flag("--user", Some(quote(user)));
    }
    if let Some(dir) = &container.working_dir {
        flag("--workdir", Some(quote(dir)));
    }
    if let Some(millis) = container.cpu_limit_millis {
        flag("--cpus", Some(format!("\"$(orca_cpus {millis})\"")));
    }
    if let Some(bytes) = container.memory_limit_bytes {
        // Equal to --memory: no swap on top, as on a Kubernetes node.
        flag("--memory", Some(bytes.to_string()));
        flag("--memory-swap", Some(bytes.to_string()));
    }
    for mount in &container.mounts {
        flag("--mount", Some(mount_word(mount)));
    }
    for (name, value) in &container.env {
        flag("-e", Some(value_word(&format!("{name}="), value)));
    }
    let mut command = container.command.iter();
    if let Some(entrypoint) = command.next() {
        // Docker's --entrypoint takes one program (and, like `command`, drops the image's
        // CMD); the rest of `command` comes before `args`.
        flag("--entrypoint", Some(value_word("", entrypoint)));
    }
    args.push(quote(&container.image));
    args.extend(command.map(|word| value_word("", word)));
    args.extend(container.args.iter().map(|word| value_word("", word)));
    args
}

/// `prefix` followed by the value, as one shell word.
fn value_word(prefix: &str, value: &EnvValue) -> String {
    let mut word = Word::default().text(prefix);
    for part in value.parts() {
        word = match part {
            EnvPart::Literal(text) => word.text(text),
            EnvPart::Instance(fact) => word.expansion(&fact_expansion(*fact)),
        };
    }
    word.finish()
}

/// The bash expansion that yields the fact on the instance.
fn fact_expansion(fact: InstanceFact) -> String {
    let divided = |variable: &str, divisor: u64| {
        if divisor == 1 {
            format!("${{{variable}}}")
        } else {
            format!("$(( ({variable} + {}) / {divisor} ))", divisor - 1)
        }
    };
    match fact {
        InstanceFact::Ip => "${orca_ip}".to_owned(),
        InstanceFact::Cpu { divisor_millis } => divided("orca_cpu_millis", divisor_millis),
        InstanceFact::Memory { divisor_bytes } => divided("orca_memory_bytes", divisor_bytes),
        InstanceFact::EphemeralStorage { divisor_bytes } => {
            divided("orca_disk_bytes", divisor_bytes)
        }
    }
}

/// A `--mount type=bind,…` value. Docker reads it as CSV, so a field with a comma or quote is
/// CSV-quoted; the volumes' root (`$orca_root`) is the bootstrap's and has neither.
fn mount_word(mount: &Mount) -> String {
    let mut inside = format!("/volumes/{}", mount.volume);
    if let Some(sub_path) = &mount.sub_path {
        inside.push('/');
        inside.push_str(sub_path);
    }
    let mut word = Word::default().text("type=bind,");
    word = if needs_csv_quotes(&inside) {
        word.text("\"source=")
            .expansion("${orca_root}")
            .text(&format!("{}\"", inside.replace('"', "\"\"")))
    } else {
        word.text("source=").expansion("${orca_root}").text(&inside)
    };
    let target = format!("target={}", mount.container_path);
    word = word.text(",").text(&csv_field(&target));
    if mount.read_only {
        word = word.text(",readonly");
    }
    word.finish()
}

fn needs_csv_quotes(field: &str) -> bool {
    field.contains([',', '"', '\n', '\r'])
}

fn csv_field(field: &str) -> String {
    if needs_csv_quotes(field) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::aws::workload::quote::bash_words;
    use crate::workload::PullPolicy;

    fn container() -> ContainerSpec {
        ContainerSpec {
            name: "trainer".into(),
            image: "python:3.12".into(),
            pull_policy: PullPolicy::IfNotPresent,
            sidecar: false,
            command: vec![],
            args: vec![],
            working_dir: None,
            env: vec![],
            cpu_limit_millis: None,
            memory_limit_bytes: None,
            gpus: false,
            user: None,
            privileged: false,
            mounts: vec![],
        }
    }

    #[test]
    fn a_bare_container_is_just_its_image() {
        assert_eq!(docker_args(&container()), ["python:3.12"]);
    }

    #[test]
    fn command_becomes_entrypoint_then_leading_arguments() {
        let spec = ContainerSpec {
            command: vec![EnvValue::literal("python"), EnvValue::literal("-u")],
            args: vec![
                EnvValue::literal("train.py"),
                EnvValue::literal("--lr=0.1 x"),
            ],
            ..container()
        };
        assert_eq!(
            bash_words("", &docker_args(&spec).join(" ")),
            [
                "--entrypoint",
                "python",
                "python:3.12",
                "-u",
                "train.py",
                "--lr=0.1 x"
            ]
        );
    }

    #[test]
    fn limits_gpus_user_and_workdir_become_flags() {
        let spec = ContainerSpec {
            cpu_limit_millis: Some(1500),
            memory_limit_bytes: Some(1 << 30),
            gpus: true,
            user: Some("1000:100".into()),
            working_dir: Some("/work dir".into()),
            privileged: true,
            ..container()
        };
        assert_eq!(
            docker_args(&spec).join(" "),
            "--gpus all --privileged --user 1000:100 --workdir '/work dir' \
             --cpus \"$(orca_cpus 1500)\" --memory 1073741824 --memory-swap 1073741824 \
             python:3.12"
        );
    }

    #[test]
    fn instance_facts_become_expansions_of_the_bootstrap_variables() {
        let mut address = EnvValue::literal("http://");
        address.append(&EnvValue::instance(InstanceFact::Ip));
        address.push_str(":80 $(x)");
        let spec = ContainerSpec {
            env: vec![
                ("ADDR".into(), address),
                (
                    "CPUS".into(),
                    EnvValue::instance(InstanceFact::Cpu {
                        divisor_millis: 1000,
                    }),
                ),
                (
                    "MEM".into(),
                    EnvValue::instance(InstanceFact::Memory { divisor_bytes: 1 }),
                ),
            ],
            ..container()
        };
        let setup = "orca_ip=10.0.0.7 orca_cpu_millis=2500 orca_memory_bytes=42";
        assert_eq!(
            bash_words(setup, &docker_args(&spec).join(" ")),
            [
                "-e",
                "ADDR=http://10.0.0.7:80 $(x)",
                "-e",
                "CPUS=3",
                "-e",
                "MEM=42",
                "python:3.12"
            ]
        );
    }

    #[test]
    fn mounts_are_bind_mounts_with_csv_quoting_where_needed() {
        let spec = ContainerSpec {
            mounts: vec![
                Mount {
                    volume: "cfg".into(),
                    sub_path: Some("app.yaml".into()),
                    container_path: "/etc/app.yaml".into(),
                    read_only: true,
                },
                Mount {
                    volume: "scratch".into(),
                    sub_path: Some("a,b".into()),
                    container_path: "/out,\"x\"".into(),
                    read_only: false,
                },
            ],
            ..container()
        };
        assert_eq!(
            bash_words("orca_root=/r", &docker_args(&spec).join(" ")),
            [
                "--mount",
                "type=bind,source=/r/volumes/cfg/app.yaml,target=/etc/app.yaml,readonly",
                "--mount",
                "type=bind,\"source=/r/volumes/scratch/a,b\",\"target=/out,\"\"x\"\"\"",
                "python:3.12"
            ]
        );
    }
}
