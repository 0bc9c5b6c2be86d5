//! The code, the policies in `deploy/iam/` and the docs (`docs/src/security/aws.md`,
//! `docs/src/troubleshooting/aws.md`) agree on every AWS call.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::*;
use crate::structure::source_text::{production_code, production_files};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub(super) fn read(path: &str) -> String {
    let path = repository().join(path);
    fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn policy(path: &str) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// `describe_instances` → `DescribeInstances`; `create-tags` → `CreateTags`.
fn pascal(name: &str) -> String {
    name.split(['_', '-'])
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// Every operation of the SDK crates orca depends on, by its client method's name: the
/// crates' `src/operation/` modules, found through `cargo metadata`.
fn sdk_operations() -> BTreeMap<String, Vec<Service>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .current_dir(repository())
        .output()
        .expect("running cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let mut operations: BTreeMap<String, Vec<Service>> = BTreeMap::new();
    for service in Service::ALL {
        let packages: Vec<&Value> = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|package| package["name"] == service.sdk_crate())
            .collect();
        assert_eq!(
            packages.len(),
            1,
            "one version of {} in the lock",
            service.sdk_crate()
        );
        let manifest = Path::new(
            packages[0]["manifest_path"]
                .as_str()
                .expect("manifest_path"),
        );
        let modules = manifest.with_file_name("src").join("operation");
        let entries =
            fs::read_dir(&modules).unwrap_or_else(|error| panic!("{}: {error}", modules.display()));
        for entry in entries {
            let entry = entry.expect("a directory entry");
            if entry.file_type().expect("its type").is_dir() {
                let name = entry.file_name().to_string_lossy().into_owned();
                operations.entry(name).or_default().push(service);
            }
        }
        assert!(
            operations.values().flatten().any(|found| *found == service),
            "no operations found in {}",
            modules.display()
        );
    }
    operations
}

/// The zero-argument method calls in `code`: `.name()`, across whitespace and line breaks.
fn zero_argument_calls(code: &str) -> Vec<&str> {
    let mut calls = Vec::new();
    for (at, _) in code.match_indices('.') {
        let rest = &code[at + 1..];
        let rest = rest.trim_start();
        let name_end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_end);
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        let after = after.trim_start();
        if let Some(after) = after.strip_prefix('(')
            && after.trim_start().starts_with(')')
        {
            calls.push(name);
        }
    }
    calls
}

/// Every AWS operation the production code can call, with the files that call it: the files
/// the compiler reads from `lib.rs` and `main.rs`, without what is under `#[cfg(test)]`.
fn calls_in_source() -> BTreeMap<(Service, String), BTreeSet<String>> {
    let operations = sdk_operations();
    let files = production_files();
    assert!(
        files.len() > 50,
        "only {} files walked from host/src/lib.rs",
        files.len()
    );
    let mut calls: BTreeMap<(Service, String), BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        for method in zero_argument_calls(&file.code) {
            let Some(candidates) = operations.get(method) else {
                continue;
            };
            let services: Vec<Service> = if candidates.len() == 1 {
                candidates.clone()
            } else {
                candidates
                    .iter()
                    .copied()
                    .filter(|service| file.text.contains(&service.sdk_crate().replace('-', "_")))
                    .collect()
            };
            assert_eq!(
                services.len(),
                1,
                "{}: `{method}()` is an operation of {candidates:?}; say which client \
                 it is by naming its crate in the file",
                file.path,
            );
            calls
                .entry((services[0], pascal(method)))
                .or_default()
                .insert(file.path.clone());
        }
    }
    calls
}

#[test]
fn zero_argument_calls_are_read_from_production_code_only() {
    let text = r#"
//! `client.describe_images()` in a comment
#[cfg(test)]
mod inline {
    fn f() { client.describe_regions().send(); }
}
fn g() {
    let s = ".describe_hosts()";
    self.client
        .describe_instances ( )
        .send();
}
"#;
    let code = production_code(text);
    assert_eq!(zero_argument_calls(&code), ["describe_instances", "send"]);
}

/// The AWS CLI calls in the bootstrap script: `aws ec2 create-tags …`.
fn calls_in_bootstrap() -> BTreeSet<(Service, String)> {
    let script = read("host/src/provider/aws/workload/bootstrap.sh");
    let mut calls = BTreeSet::new();
    for line in script.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        for at in words
            .iter()
            .enumerate()
            .filter(|(_, word)| **word == "aws")
            .map(|(at, _)| at)
        {
            let (Some(service), Some(command)) = (words.get(at + 1), words.get(at + 2)) else {
                panic!("bootstrap.sh: an aws call without its service and command: {line}");
            };
            let service = Service::ALL
                .into_iter()
                .find(|known| known.cli_name() == *service)
                .unwrap_or_else(|| panic!("bootstrap.sh calls a service this list lacks: {line}"));
            calls.insert((service, pascal(command)));
        }
    }
    calls
}

fn listed(calls: &[AwsCall]) -> BTreeSet<(Service, String)> {
    calls
        .iter()
        .map(|call| (call.service, call.operation.to_owned()))
        .collect()
}

fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Every way a policy does not grant exactly what `calls` need: a permission without a
/// statement allowing its action on each of its resource types, or an action no call needs.
fn disagreements(policy: &Value, calls: &[AwsCall]) -> Vec<String> {
    let statements = policy["Statement"].as_array().expect("Statement");
    let mut problems = Vec::new();
    for statement in statements {
        if statement["Effect"] != "Allow" {
            problems.push(format!("statement {} is not an Allow", statement["Sid"]));
        }
        for action in strings(&statement["Action"]) {
            if action.contains('*') {
                problems.push(format!(
                    "statement {} grants a wildcard: {action}",
                    statement["Sid"]
                ));
            }
        }
    }
    for call in calls {
        for permission in call.needs {
            for on in permission.on {
                let granted = statements.iter().any(|statement| {
                    strings(&statement["Action"]).contains(&permission.action)
                        && strings(&statement["Resource"])
                            .into_iter()
                            .any(|resource| on.covered_by(resource))
                });
                if !granted {
                    problems.push(format!(
                        "{} needs {} on {on:?}; no statement grants it",
                        call.operation, permission.action
                    ));
                }
            }
        }
    }
    let needed: BTreeSet<&str> = calls
        .iter()
        .flat_map(|call| call.needs)
        .map(|permission| permission.action)
        .collect();
    for statement in statements {
        for action in strings(&statement["Action"]) {
            if !needed.contains(action) {
                problems.push(format!(
                    "statement {} grants {action}, which no call orca makes needs",
                    statement["Sid"]
                ));
            }
        }
    }
    problems
}

#[test]
fn every_aws_call_in_the_code_is_listed_with_its_permissions_and_none_that_is_not() {
    let in_source = calls_in_source();
    let listed = listed(ORCA_CALLS);
    let unlisted: Vec<String> = in_source
        .iter()
        .filter(|(call, _)| !listed.contains(call))
        .map(|((service, operation), files)| format!("{service:?} {operation} (in {files:?})"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "calls the code makes that provider/aws/permissions.rs does not list (add each with \
         the IAM actions it needs, then the permission to deploy/iam/orca.json and docs/src/security/aws.md): \
         {unlisted:?}"
    );
    let never_called: Vec<&(Service, String)> = listed
        .iter()
        .filter(|call| !in_source.contains_key(*call))
        .collect();
    assert!(
        never_called.is_empty(),
        "listed in provider/aws/permissions.rs but never called: {never_called:?}"
    );
}

/// The calls of the log driver the bootstrap runs containers with, when it names one.
fn calls_of_the_log_driver() -> BTreeSet<(Service, String)> {
    let shipping = read("host/src/provider/aws/workload/log_shipping.rs");
    if shipping.contains("awslogs-group") {
        listed(&LOG_DRIVER_CALLS)
    } else {
        BTreeSet::new()
    }
}

#[test]
fn the_bootstraps_calls_and_its_log_drivers_are_the_workload_roles_list() {
    let mut made = calls_in_bootstrap();
    let driver = calls_of_the_log_driver();
    assert!(
        !driver.is_empty(),
        "containers' output is shipped with awslogs"
    );
    made.extend(driver);
    assert_eq!(made, listed(WORKLOAD_CALLS));
}

#[test]
fn orcas_policy_grants_what_its_calls_need_and_nothing_else() {
    let problems = disagreements(&policy("deploy/iam/orca.json"), ORCA_CALLS);
    assert!(problems.is_empty(), "deploy/iam/orca.json: {problems:#?}");
}

#[test]
fn the_workload_policy_grants_the_bootstraps_tag_call_and_the_log_drivers_and_nothing_else() {
    let problems = disagreements(&policy("deploy/iam/workload.json"), WORKLOAD_CALLS);
    assert!(
        problems.is_empty(),
        "deploy/iam/workload.json: {problems:#?}"
    );
    let trust = policy("deploy/iam/workload-trust.json");
    assert_eq!(
        trust["Statement"],
        json!([{
            "Sid": "Ec2AssumesTheWorkloadRole",
            "Effect": "Allow",
            "Principal": {"Service": "ec2.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }])
    );
}

#[test]
fn the_agreement_check_names_a_missing_permission_and_an_unneeded_one() {
    let mut orca = policy("deploy/iam/orca.json");
    let describe = orca["Statement"]
        .as_array_mut()
        .expect("Statement")
        .iter_mut()
        .find(|statement| statement["Sid"] == "Describe")
        .expect("the Describe statement");
    let actions = describe["Action"].as_array_mut().expect("its actions");
    actions.retain(|action| action != "ec2:DescribeSubnets");
    actions.push(json!("ec2:DescribeImages"));
    assert_eq!(
        disagreements(&orca, ORCA_CALLS),
        [
            "DescribeSubnets needs ec2:DescribeSubnets on Any; no statement grants it",
            "statement \"Describe\" grants ec2:DescribeImages, which no call orca makes needs",
        ]
    );
}

/// The values CloudFormation's functions stand for, as the policy files' placeholders.
fn resolve(value: &Value, resources: &Value) -> Value {
    let sub = |text: &str| {
        text.replace("${ClusterName}", "CLUSTER")
            .replace("${AWS::Region}", "REGION")
            .replace("${AWS::AccountId}", "ACCOUNT")
    };
    match value {
        Value::Object(map) if map.len() == 1 => {
            if let Some(Value::String(text)) = map.get("Fn::Sub") {
                return Value::String(sub(text));
            }
            if let Some(Value::String(name)) = map.get("Ref") {
                return match name.as_str() {
                    "AWS::AccountId" => json!("ACCOUNT"),
                    "AWS::Region" => json!("REGION"),
                    _ => value.clone(),
                };
            }
            if let Some(target) = map.get("Fn::GetAtt") {
                let name = target[0].as_str().expect("a resource name");
                assert_eq!(target[1], "Arn", "only Arn is resolved");
                let resource = &resources[name];
                return match resource["Type"].as_str() {
                    Some("AWS::SQS::Queue") => {
                        let queue = resolve(&resource["Properties"]["QueueName"], resources);
                        json!(format!(
                            "arn:aws:sqs:REGION:ACCOUNT:{}",
                            queue.as_str().unwrap()
                        ))
                    }
                    Some("AWS::Events::Rule") => {
                        let rule = resolve(&resource["Properties"]["Name"], resources);
                        json!(format!(
                            "arn:aws:events:REGION:ACCOUNT:rule/{}",
                            rule.as_str().expect("the rule is named")
                        ))
                    }
                    other => panic!("Fn::GetAtt of {name}, a {other:?}"),
                };
            }
            Value::Object(
                map.iter()
                    .map(|(key, value)| (key.clone(), resolve(value, resources)))
                    .collect(),
            )
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| (key.clone(), resolve(value, resources)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| resolve(v, resources)).collect()),
        _ => value.clone(),
    }
}

/// Issue 39, case 7: the documented stack let any principal of two services send to the queue,
/// so any account's EventBridge rule could put forged spot warnings on it. The stack's policy is
/// the file's, and admits only the stack's own rules (`aws:SourceArn`) from this account
/// (`aws:SourceAccount`).
#[test]
fn the_queue_stack_carries_the_queue_policy_file_and_its_rules_are_the_only_senders() {
    let stack: Value = serde_saphyr::from_str(&read("deploy/iam/interruption-queue.cfn.yaml"))
        .expect("the stack's YAML");
    let resources = &stack["Resources"];
    let document = resolve(
        &resources["InterruptionQueuePolicy"]["Properties"]["PolicyDocument"],
        resources,
    );
    let file = policy("deploy/iam/interruption-queue.json");
    assert_eq!(
        document, file,
        "the stack's queue policy and interruption-queue.json"
    );

    let queue = "arn:aws:sqs:REGION:ACCOUNT:orca-CLUSTER-interruptions";
    let orca = policy("deploy/iam/orca.json");
    let reads = orca["Statement"]
        .as_array()
        .expect("Statement")
        .iter()
        .find(|statement| statement["Sid"] == "ReadTheInterruptionQueue")
        .expect("orca reads the queue");
    assert_eq!(
        reads["Resource"], queue,
        "orca's role reads the stack's queue"
    );

    let [statement] = file["Statement"].as_array().expect("Statement").as_slice() else {
        panic!("one statement: {file}");
    };
    assert_eq!(
        statement["Principal"],
        json!({"Service": "events.amazonaws.com"})
    );
    assert_eq!(statement["Action"], "sqs:SendMessage");
    assert_eq!(statement["Resource"], queue);
    assert_eq!(
        statement["Condition"]["StringEquals"]["aws:SourceAccount"],
        "ACCOUNT"
    );
    let rules: BTreeSet<String> = resources
        .as_object()
        .expect("Resources")
        .values()
        .filter(|resource| resource["Type"] == "AWS::Events::Rule")
        .map(|rule| {
            let targets = resolve(&rule["Properties"]["Targets"], resources);
            assert_eq!(targets[0]["Arn"], queue, "every rule fills the queue");
            let name = resolve(&rule["Properties"]["Name"], resources);
            format!(
                "arn:aws:events:REGION:ACCOUNT:rule/{}",
                name.as_str().unwrap()
            )
        })
        .collect();
    let senders: BTreeSet<String> = strings(&statement["Condition"]["ArnEquals"]["aws:SourceArn"])
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(senders, rules, "exactly the stack's rules may send");
    assert_eq!(rules.len(), 4);
}

/// The rows of the page's table with this header line, as cells.
fn table(page: &str, header: &str) -> Vec<Vec<String>> {
    let rows: Vec<Vec<String>> = page
        .lines()
        .skip_while(|line| *line != header)
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .map(|line| {
            line.trim_matches('|')
                .split(" | ")
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect();
    assert!(!rows.is_empty(), "no table headed {header}");
    rows
}

/// The IAM actions in backticks in a table cell (`ec2:DescribeInstances`).
fn actions_in(cell: &str) -> BTreeSet<String> {
    quoted(cell)
        .into_iter()
        .filter(|word| {
            word.split_once(':').is_some_and(|(service, action)| {
                !service.is_empty()
                    && service
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && !action.is_empty()
                    && action.chars().all(|c| c.is_ascii_alphanumeric())
            })
        })
        .collect()
}

/// The words in backticks in a table cell.
fn quoted(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_security_models_call_table_is_the_list() {
    let page = read("docs/src/security/aws.md");
    let rows = table(
        &page,
        "| call | used for | IAM actions | resource-level scoping in `orca.json` |",
    );
    let mut documented = BTreeMap::new();
    for row in &rows {
        let operations = quoted(&row[0]);
        let [operation] = Vec::from_iter(operations)
            .try_into()
            .unwrap_or_else(|names| panic!("one call per row of the call table, not {names:?}"));
        documented.insert(operation, actions_in(&row[2]));
    }
    let listed: BTreeMap<String, BTreeSet<String>> = ORCA_CALLS
        .iter()
        .map(|call| {
            let actions = call.needs.iter().map(|p| p.action.to_owned()).collect();
            (call.operation.to_owned(), actions)
        })
        .collect();
    assert_eq!(
        documented, listed,
        "docs/src/security/aws.md's call table (call → IAM actions)"
    );
}

#[test]
fn the_permission_troubleshooting_names_every_call_and_only_its_actions() {
    let page = read("docs/src/troubleshooting/aws.md");
    let rows = table(&page, "| symptom | call | IAM action |");
    let by_operation: BTreeMap<&str, &AwsCall> = ORCA_CALLS
        .iter()
        .map(|call| (call.operation, call))
        .collect();
    let mut named = BTreeSet::new();
    for row in &rows {
        let calls = quoted(&row[1]);
        let actions = actions_in(&row[2]);
        let needed: BTreeSet<String> = calls
            .iter()
            .map(|operation| {
                by_operation.get(operation.as_str()).unwrap_or_else(|| {
                    panic!("troubleshooting names {operation}, which orca does not call")
                })
            })
            .flat_map(|call| call.needs)
            .map(|permission| permission.action.to_owned())
            .collect();
        assert!(
            actions.is_subset(&needed) && !actions.is_empty(),
            "troubleshooting row for {calls:?} names {actions:?}; the calls need {needed:?}"
        );
        named.extend(calls);
    }
    let unnamed: Vec<&str> = ORCA_CALLS
        .iter()
        .filter(|call| !call.needs.is_empty() && !named.contains(call.operation))
        .map(|call| call.operation)
        .collect();
    assert!(
        unnamed.is_empty(),
        "troubleshooting names no symptom for {unnamed:?}"
    );
}

/// README.md and every page of the docs, by path.
fn documentation() -> Vec<(PathBuf, String)> {
    let mut pages = vec![repository().join("README.md")];
    let mut folders = vec![repository().join("docs/src")];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display())) {
            let path = entry.expect("a docs entry").path();
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            (path, text)
        })
        .collect()
}

#[test]
fn the_policies_are_not_copied_into_the_docs() {
    let pages = documentation();
    assert!(
        pages.len() > 10,
        "the docs tree has its pages: {}",
        pages.len()
    );
    for (path, text) in pages {
        assert!(
            !text.contains("\"Action\""),
            "{} embeds a policy; it points to deploy/iam/ instead, the one copy the tests check",
            path.display()
        );
    }
}

#[test]
fn the_policies_name_what_the_shipped_base_deploys() {
    let config: Value =
        serde_saphyr::from_str(&read("deploy/base/config.yaml")).expect("the base config");
    let aws = &config["provider"]["aws"];
    let orca = read("deploy/iam/orca.json");
    for subnet in strings(&aws["subnetIds"]) {
        assert!(
            orca.contains(&format!(":subnet/{subnet}\"")),
            "orca.json names {subnet}"
        );
    }
    for group in strings(&aws["securityGroupIds"]) {
        assert!(
            orca.contains(&format!(":security-group/{group}\"")),
            "orca.json names {group}"
        );
    }
    let profile = aws["instanceProfile"]
        .as_str()
        .expect("the base names the workload profile");
    assert!(
        orca.contains(&format!("\"arn:aws:iam::ACCOUNT:role/{profile}\"")),
        "orca.json passes the role of the base's instance profile {profile} (role and profile \
         share the name, as the install guide creates them)"
    );

    let account: Value = serde_saphyr::from_str(&read("deploy/base/serviceaccount.yaml"))
        .expect("the base ServiceAccount");
    let subject = format!(
        "system:serviceaccount:{}:{}",
        account["metadata"]["namespace"]
            .as_str()
            .expect("its namespace"),
        account["metadata"]["name"].as_str().expect("its name")
    );
    let trust = policy("deploy/iam/orca-trust.json");
    assert_eq!(
        trust["Statement"][0]["Condition"]["StringEquals"]["OIDC_PROVIDER:sub"], subject,
        "orca's role trusts the base's ServiceAccount"
    );
    assert_eq!(
        trust["Statement"][0]["Action"],
        "sts:AssumeRoleWithWebIdentity"
    );
}

#[test]
fn with_eks_pod_identity_orcas_role_trusts_the_pods_service_of_its_own_cluster_only() {
    let trust = policy("deploy/iam/orca-pod-identity-trust.json");
    assert_eq!(
        trust["Statement"],
        json!([{
            "Sid": "TheOrcaServiceAccountThroughEksPodIdentity",
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            // EKS Pod Identity tags the session (cluster, namespace, service account).
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            // The confused deputy: only the agent acting for this account's cluster.
            "Condition": {
                "StringEquals": {"aws:SourceAccount": "ACCOUNT"},
                "ArnEquals": {"aws:SourceArn": "arn:aws:eks:REGION:ACCOUNT:cluster/CLUSTER"},
            },
        }])
    );
}

#[test]
fn the_workload_may_publish_metrics_only_to_the_namespace_orca_reads_by_default() {
    let workload = policy("deploy/iam/workload.json");
    let statement = workload["Statement"]
        .as_array()
        .expect("Statement")
        .iter()
        .find(|s| s["Sid"] == "PublishThePodsMetrics")
        .expect("the statement PublishThePodsMetrics");
    assert_eq!(
        statement["Condition"]["StringEquals"]["cloudwatch:namespace"],
        crate::config::PodMetricsConfig::default().namespace,
        "PutMetricData has no resource-level permissions: the namespace condition is what \
         keeps an instance from writing other metrics"
    );
}
