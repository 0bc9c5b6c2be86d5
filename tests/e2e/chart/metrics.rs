//! The chart's dashboard and alert rules read only metrics orca exports: the names come from
//! orca's own registry, built as orca builds it and encoded in the exposition format, and the
//! names the expressions read come from parsing them as PromQL (promql-parser, GreptimeDB's
//! parser), not from matching text.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use orca::config::GuardrailsConfig;
use orca::metrics::{EvaluationLabels, Metrics, PluginInfoLabels};
use orca::policy::guardrails::Guardrails;
use orca::process::pod_usage::PodUsages;
use orca::process::served_nodes::ServedNodes;
use orca::process::turn::TurnEnd;
use orca::provider::aws::Ec2Calls;
use orca::spend::NamespaceSpend;
use orca_e2e::helm::chart_dir;
use promql_parser::parser::{Expr, parse};
use promql_parser::util::{ExprVisitor, parse_duration, walk_expr};
use serde_json::Value;

/// Metrics the dashboard reads from elsewhere than orca, each with where it comes from: orca
/// exports no figure of its own memory, so the memory panel reads the working set the
/// cluster's kubelet (cAdvisor) reports for orca's container.
const NOT_ORCAS: [&str; 1] = ["container_memory_working_set_bytes"];

/// Every sample name orca's registry exposes: the registry built as `Metrics::new` builds it
/// at startup, with a namespace cap so the spend gauges (written only when some namespace has
/// one) are described too, and one value recorded into each family that is encoded only once
/// it holds a series (through the calls orca's parts make). Each family's `# TYPE` line names
/// it; a counter's samples end in `_total`, a histogram's in `_bucket`, `_sum` and `_count`.
fn exported() -> Result<BTreeSet<String>> {
    let guardrails: GuardrailsConfig = serde_saphyr::from_str("maxNamespacePricePerHour: 50")?;
    let spend = NamespaceSpend::new(
        Arc::new(Guardrails::from_config(&guardrails)),
        Duration::from_secs(120),
    );
    let metrics = Metrics::new(
        Arc::new(ServedNodes::default()),
        Arc::new(Ec2Calls::default()),
        Arc::new(spend),
        Arc::new(PodUsages::default()),
    );
    let elapsed = Duration::from_millis(3);
    metrics.reconcile.observe("ok", elapsed);
    metrics.reconcile.unclaimed("node", 0);
    metrics.ec2.record("RunInstances", "ok", elapsed);
    metrics.serving.ended("node", TurnEnd::Lapsed);
    let _ = metrics.policy.evaluations.get_or_create(&EvaluationLabels {
        plugin: "plugin".to_owned(),
        hook: "select-instance".to_owned(),
        result: "ok".to_owned(),
    });
    metrics
        .policy
        .plugin_info
        .get_or_create(&PluginInfoLabels {
            plugin: "plugin".to_owned(),
            version: "0.1.0".to_owned(),
            sha256: "0".repeat(64),
            source: "embedded".to_owned(),
        })
        .set(1);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &metrics.registry())?;
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let (name, kind) = rest.split_once(' ').context("a TYPE line")?;
        match kind {
            "counter" => {
                names.insert(format!("{name}_total"));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            "gauge" | "unknown" => {
                names.insert(name.to_owned());
            }
            other => bail!("orca exports {name} as a {other}, which this test does not know"),
        }
    }
    ensure!(
        names.contains("orca_namespace_spend_usd_per_hour"),
        "the registry was built without the spend gauges:\n{text}"
    );
    Ok(names)
}

/// The metric names an expression reads (every vector and range selector's).
#[derive(Default)]
struct Selected(BTreeSet<String>);

impl ExprVisitor for Selected {
    type Error = String;

    fn pre_visit(&mut self, expr: &Expr) -> Result<bool, String> {
        let selector = match expr {
            Expr::VectorSelector(selector) => selector,
            Expr::MatrixSelector(matrix) => &matrix.vs,
            _ => return Ok(true),
        };
        let name = selector
            .name
            .clone()
            .ok_or_else(|| format!("a selector without a metric name: {expr}"))?;
        self.0.insert(name);
        Ok(true)
    }
}

fn selected(expr: &str) -> Result<BTreeSet<String>> {
    let parsed = parse(expr).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut names = Selected::default();
    walk_expr(&mut names, &parsed).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(names.0)
}

/// A Grafana expression as Prometheus receives it: the range variable filled in (the
/// `$job`/`$namespace` variables sit inside label matchers' strings, which parse as they are).
fn as_promql(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
}

/// Every PromQL expression of the dashboard: its panels' (rows' panels too) targets, and the
/// metric its `label_values(METRIC, LABEL)` variables query.
fn dashboard_expressions(dashboard: &Value) -> Result<Vec<String>> {
    fn panels(list: &Value, into: &mut Vec<String>) {
        for panel in list.as_array().into_iter().flatten() {
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    into.push(as_promql(expr));
                }
            }
            panels(&panel["panels"], into);
        }
    }
    let mut expressions = Vec::new();
    panels(&dashboard["panels"], &mut expressions);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if variable["type"] != "query" {
            continue;
        }
        let query = variable["definition"]
            .as_str()
            .context("a query's definition")?;
        let inner = query
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .and_then(|q| q.rsplit_once(','))
            .map(|(metric, _label)| metric.trim())
            .with_context(|| format!("a label_values(METRIC, LABEL) query: {query}"))?;
        expressions.push(inner.to_owned());
    }
    Ok(expressions)
}

#[test]
fn every_metric_the_dashboard_and_the_alert_rules_read_is_one_orca_exports() -> Result<()> {
    let exported = exported()?;
    let mut known = exported.clone();
    known.extend(NOT_ORCAS.map(str::to_owned));
    let mut used = BTreeSet::new();

    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(
        chart_dir().join("files/orca-dashboard.json"),
    )?)?;
    let expressions = dashboard_expressions(&dashboard)?;
    ensure!(expressions.len() > 20, "{expressions:?}");
    for expr in &expressions {
        let names = selected(expr).with_context(|| format!("dashboard: {expr}"))?;
        for name in &names {
            ensure!(
                known.contains(name),
                "the dashboard reads {name}, which orca does not export ({expr})\norca exports: {exported:?}"
            );
        }
        used.extend(names);
    }

    let rules: Value = serde_saphyr::from_str(&std::fs::read_to_string(
        chart_dir().join("files/orca-alerts.rules.yaml"),
    )?)?;
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_array().context("groups")? {
        let group_name = group["name"].as_str().context("a group's name")?;
        for rule in group["rules"].as_array().context("a group's rules")? {
            // A rules file's rule, as Prometheus loads it: an alert name (unique), a PromQL
            // expression, a `for` duration, a severity, and what to tell the reader.
            let alert = rule["alert"].as_str().context("an alerting rule")?;
            ensure!(alerts.insert(alert.to_owned()), "{alert} twice");
            let expr = rule["expr"].as_str().context("expr")?;
            let names = selected(expr).with_context(|| format!("{group_name}/{alert}: {expr}"))?;
            for name in &names {
                ensure!(
                    exported.contains(name),
                    "{alert} reads {name}, which orca does not export\norca exports: {exported:?}"
                );
            }
            used.extend(names);
            if let Some(duration) = rule["for"].as_str() {
                parse_duration(duration)
                    .map_err(|e| anyhow::anyhow!("{alert}: for {duration}: {e}"))?;
            }
            ensure!(
                matches!(
                    rule["labels"]["severity"].as_str(),
                    Some("warning" | "critical")
                ),
                "{alert}: severity {}",
                rule["labels"]["severity"]
            );
            for annotation in ["summary", "description"] {
                ensure!(
                    rule["annotations"][annotation].is_string(),
                    "{alert} has no {annotation}"
                );
            }
        }
    }
    // The alerts the operations guide documents, each there.
    for alert in [
        "OrcaTerminationsNotTakingEffect",
        "OrcaUnclaimedInstances",
        "OrcaPodsStuckTerminating",
        "OrcaNodeNotServed",
        "OrcaPluginRejected",
    ] {
        ensure!(alerts.contains(alert), "no {alert} in {alerts:?}");
    }
    // A misspelt name would be caught above; a parser that saw no selectors would not be.
    ensure!(
        used.contains("orca_plugin_evaluation_seconds_bucket") && used.contains("orca_pods"),
        "{used:?}"
    );
    Ok(())
}

#[test]
fn a_misspelt_metric_is_seen_through_the_parser() -> Result<()> {
    let names = selected(
        r#"histogram_quantile(0.99, sum by (le) (rate(orca_plugin_evalution_seconds_bucket{job=~"$job"}[5m]))) / on() orca_pods"#,
    )?;
    assert_eq!(
        names,
        BTreeSet::from([
            "orca_plugin_evalution_seconds_bucket".to_owned(),
            "orca_pods".to_owned()
        ])
    );
    assert!(!exported()?.contains("orca_plugin_evalution_seconds_bucket"));
    assert!(selected("sum(rate(orca_pods[5m]").is_err());
    Ok(())
}
