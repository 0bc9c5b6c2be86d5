use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{Value, json};

use super::*;
use crate::workload::source::fake::FakeSource;
use crate::workload::value::{EnvPart, InstanceFact};

fn pod(container: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train-1", "namespace": "ml", "uid": "u-1"},
        "spec": {"containers": [container]},
    }))
    .unwrap()
}

fn source() -> FakeSource {
    FakeSource::default()
        .config_map(
            "settings",
            &[
                ("LR", "0.1"),
                ("EPOCHS", "3"),
                ("bad key", "x"),
                ("1ST", "y"),
            ],
        )
        .secret("wandb", &[("token", "s3cr$t `x`")])
}

async fn resolve(source: &FakeSource, container: Value) -> Result<ResolvedEnv, EnvError> {
    let pod = pod(container);
    let container: &Container = &pod.spec.as_ref().unwrap().containers[0];
    let mut objects = Objects::new(source, "ml");
    resolve_env(&pod, container, &mut objects).await
}

fn texts(env: &ResolvedEnv) -> Vec<(String, String)> {
    env.vars
        .iter()
        .map(|(name, value)| (name.clone(), value.as_literal().unwrap().to_owned()))
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[tokio::test]
async fn values_expand_variables_defined_earlier_only() {
    let env = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "BASE", "value": "/data"},
            {"name": "OUT", "value": "$(BASE)/out/$(LATER)"},
            {"name": "LATER", "value": "x"},
            {"name": "ESCAPED", "value": "$$(BASE)"},
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(
        texts(&env),
        pairs(&[
            ("BASE", "/data"),
            ("OUT", "/data/out/$(LATER)"),
            ("LATER", "x"),
            ("ESCAPED", "$(BASE)"),
        ])
    );
}

#[tokio::test]
async fn env_from_comes_first_and_env_overrides_it() {
    let env = resolve(
        &source(),
        json!({"name": "trainer",
        "envFrom": [{"configMapRef": {"name": "settings"}}],
        "env": [
            {"name": "LR", "value": "0.01"},
            {"name": "DESC", "value": "epochs=$(EPOCHS)"},
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(
        texts(&env),
        pairs(&[("EPOCHS", "3"), ("LR", "0.01"), ("DESC", "epochs=3")])
    );
}

#[tokio::test]
async fn env_from_prefixes_keys_and_skips_invalid_names() {
    let env = resolve(
        &source(),
        json!({"name": "trainer", "envFrom": [
            {"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
            {"secretRef": {"name": "wandb"}},
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(
        texts(&env),
        pairs(&[
            ("CFG_1ST", "y"),
            ("CFG_EPOCHS", "3"),
            ("CFG_LR", "0.1"),
            ("token", "s3cr$t `x`"),
        ])
    );
    assert_eq!(env.skipped_keys, ["CFG_bad key"]);

    let unprefixed = resolve(
        &source(),
        json!({"name": "trainer", "envFrom": [{"configMapRef": {"name": "settings"}}]}),
    )
    .await
    .unwrap();
    assert_eq!(unprefixed.skipped_keys, ["1ST", "bad key"]);
}

#[tokio::test]
async fn key_references_read_config_maps_and_secrets_verbatim() {
    let env = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LR"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "token"}}},
            {"name": "USES", "value": "$(TOKEN)"},
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(
        texts(&env),
        pairs(&[
            ("LR", "0.1"),
            ("TOKEN", "s3cr$t `x`"),
            ("USES", "s3cr$t `x`")
        ])
    );
}

#[tokio::test]
async fn a_missing_secret_key_names_container_variable_and_object() {
    let error = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "WANDB_API_KEY",
             "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}},
        ]}),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        error.to_string(),
        r#"container "trainer": env WANDB_API_KEY: secret "wandb" has no key "api-key""#
    );
    assert!(error.may_resolve_later());
}

#[tokio::test]
async fn missing_objects_are_errors_unless_optional() {
    let error = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}},
        ]}),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        error.to_string(),
        r#"container "trainer": env X: configMap "absent" not found"#
    );

    let error = resolve(
        &source(),
        json!({"name": "trainer", "envFrom": [{"secretRef": {"name": "absent"}}]}),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        error.to_string(),
        r#"container "trainer": envFrom: secret "absent" not found"#
    );
}

#[tokio::test]
async fn optional_references_to_missing_things_set_nothing() {
    let env = resolve(
        &source(),
        json!({"name": "trainer",
        "envFrom": [
            {"configMapRef": {"name": "settings"}},
            {"secretRef": {"name": "absent", "optional": true}},
        ],
        "env": [
            {"name": "LR", "valueFrom": {"configMapKeyRef":
                {"name": "absent", "key": "LR", "optional": true}}},
            {"name": "EPOCHS", "valueFrom": {"configMapKeyRef":
                {"name": "settings", "key": "nope", "optional": true}}},
        ]}),
    )
    .await
    .unwrap();
    // LR and EPOCHS keep their envFrom values: an optional miss does not blank them.
    assert_eq!(texts(&env), pairs(&[("EPOCHS", "3"), ("LR", "0.1")]));
}

#[tokio::test]
async fn an_unreadable_object_carries_the_cause_and_may_resolve_later() {
    let source = source().failing("apiserver unreachable");
    let error = resolve(
        &source,
        json!({"name": "trainer", "envFrom": [{"configMapRef": {"name": "settings"}}]}),
    )
    .await
    .err()
    .unwrap();
    assert_eq!(
        error.to_string(),
        "container \"trainer\": envFrom: reading configMap \"settings\" failed: \
         apiserver unreachable"
    );
    assert!(error.may_resolve_later());
}

#[tokio::test]
async fn downward_api_values_combine_with_expansion() {
    let env = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "ADDR", "value": "$(POD)@$(IP):8080"},
        ]}),
    )
    .await
    .unwrap();
    let addr = &env.lookup("ADDR").unwrap();
    assert_eq!(
        addr.parts(),
        [
            EnvPart::Literal("train-1@".into()),
            EnvPart::Instance(InstanceFact::Ip),
            EnvPart::Literal(":8080".into()),
        ]
    );
}

#[tokio::test]
async fn an_empty_value_defers_to_value_from_and_otherwise_sets_empty() {
    let env = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "A", "value": "",
             "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "LR"}}},
            {"name": "B"},
        ]}),
    )
    .await
    .unwrap();
    assert_eq!(texts(&env), pairs(&[("A", "0.1"), ("B", "")]));
}

#[tokio::test]
async fn unsupported_references_cannot_resolve_later() {
    let error = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "F", "valueFrom": {"fileKeyRef":
                {"volumeName": "v", "path": "p", "key": "k"}}},
        ]}),
    )
    .await
    .err()
    .unwrap();
    assert!(
        error
            .to_string()
            .starts_with(r#"container "trainer": env F: fileKeyRef is not supported"#),
        "{error}"
    );
    assert!(!error.may_resolve_later());

    let error = resolve(
        &source(),
        json!({"name": "trainer", "env": [
            {"name": "F", "valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}},
        ]}),
    )
    .await
    .err()
    .unwrap();
    assert!(
        error
            .to_string()
            .starts_with(r#"container "trainer": env F: fieldRef "status.phase""#),
        "{error}"
    );
}

#[test]
fn env_var_names_follow_the_kubelet_rule() {
    for good in ["A", "a_b", "_x", "my.var", "-dash", "X1"] {
        assert!(is_env_var_name(good), "{good}");
    }
    for bad in ["", "1A", "a b", "a=b", "ü", "a$"] {
        assert!(!is_env_var_name(bad), "{bad}");
    }
}
