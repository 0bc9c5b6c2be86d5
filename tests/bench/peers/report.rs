//! The bench's tables: one row per measurement as it completes, then per pod count and peer the
//! median with min–max of every round.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::measure::Measurement;
use crate::peer::PeerKind;

pub const ROUND_HEADER: &str = "round | peer | nodes | pods | all Running | delete all | CPU s to Running | CPU s total | peak RSS MiB | apiserver CPU s to Running | writes/pod to Running | 409s";

pub fn round_row(round: usize, m: &Measurement) -> String {
    format!(
        "{round} | {} | {} | {} | {:.1} s | {:.1} s | {:.2} | {:.2} | {:.1} | {:.2} | {:.2} | {}",
        m.peer,
        m.nodes,
        m.pods,
        m.all_running.as_secs_f64(),
        m.delete_all.as_secs_f64(),
        m.cpu_to_running,
        m.cpu_total,
        m.peak_rss_mib,
        m.apiserver_cpu_to_running,
        m.writes_per_pod_to_running(),
        m.conflicts
    )
}

/// Markdown: per pod count and peer, median (min–max) of each column, then each peer's requests
/// per pod by verb and resource (medians).
pub fn summary(measured: &[Measurement]) -> String {
    let mut groups: BTreeMap<(usize, usize, PeerKind), Vec<&Measurement>> = BTreeMap::new();
    for m in measured {
        groups.entry((m.nodes, m.pods, m.peer)).or_default().push(m);
    }
    let mut out = String::new();
    out.push_str("| nodes | pods | node process | rounds | all Running | delete all | CPU s to Running | CPU s total | peak RSS | apiserver CPU s to Running | writes per pod to Running | 409s |\n");
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for ((nodes, pods, peer), rounds) in &groups {
        let column = |f: &dyn Fn(&Measurement) -> f64, unit: &str, decimals: usize| {
            spread(rounds.iter().map(|m| f(m)).collect(), unit, decimals)
        };
        let _ = writeln!(
            out,
            "| {nodes} | {pods} | {peer} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            rounds.len(),
            column(&|m| m.all_running.as_secs_f64(), " s", 1),
            column(&|m| m.delete_all.as_secs_f64(), " s", 1),
            column(&|m| m.cpu_to_running, "", 2),
            column(&|m| m.cpu_total, "", 2),
            column(&|m| m.peak_rss_mib, " MiB", 0),
            column(&|m| m.apiserver_cpu_to_running, "", 2),
            column(&Measurement::writes_per_pod_to_running, "", 2),
            column(&|m| m.conflicts as f64, "", 0),
        );
    }
    out.push('\n');
    out.push_str("| nodes | pods | node process | requests per pod to Running (median) | requests per pod, create to all gone (median) |\n");
    out.push_str("|---|---|---|---|---|\n");
    for ((nodes, pods, peer), rounds) in &groups {
        let per_pod = |pick: &dyn Fn(&Measurement) -> &BTreeMap<String, u64>| {
            let keys: std::collections::BTreeSet<&String> =
                rounds.iter().flat_map(|m| pick(m).keys()).collect();
            keys.into_iter()
                .map(|key| {
                    let values = rounds
                        .iter()
                        .map(|m| pick(m).get(key).copied().unwrap_or(0) as f64 / *pods as f64)
                        .collect();
                    format!("{key} {:.2}", median(values))
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = writeln!(
            out,
            "| {nodes} | {pods} | {peer} | {} | {} |",
            per_pod(&|m| &m.requests_to_running),
            per_pod(&|m| &m.requests_total)
        );
    }
    out
}

/// "median (min–max)", or the one value of a single round.
fn spread(mut values: Vec<f64>, unit: &str, decimals: usize) -> String {
    values.sort_by(f64::total_cmp);
    let (min, max) = (values[0], values[values.len() - 1]);
    let mid = median(values.clone());
    if values.len() == 1 {
        format!("{mid:.decimals$}{unit}")
    } else {
        format!("{mid:.decimals$}{unit} ({min:.decimals$}–{max:.decimals$})")
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
