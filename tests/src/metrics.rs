//! orca's metrics port read as a test reads it: one scrape, and the series of one metric.

use std::collections::BTreeMap;

use anyhow::{Result, ensure};

/// The metrics page on 127.0.0.1:`port`.
///
/// # Errors
/// The port does not answer 200.
pub fn scrape(port: u16) -> Result<String> {
    let (status, body) =
        crate::http::curl_status(&format!("http://127.0.0.1:{port}/metrics"), &[])?;
    ensure!(status == 200, "metrics answered {status}");
    Ok(body)
}

/// The values of `metric`'s series that carry only `label`, by that label's value.
pub fn by_label(page: &str, metric: &str, label: &str) -> BTreeMap<String, f64> {
    let prefix = format!("{metric}{{{label}=\"");
    page.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(&prefix)?;
            let (value_of_label, rest) = rest.split_once("\"}")?;
            let value = rest.trim().parse().ok()?;
            Some((value_of_label.to_owned(), value))
        })
        .collect()
}

/// Every series of the counter or gauge `metric` on `page`: its labels and value.
///
/// # Errors
/// The page is not Prometheus' text format.
pub fn series(page: &str, metric: &str) -> Result<Vec<(BTreeMap<String, String>, f64)>> {
    let lines = page.lines().map(|line| Ok(line.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines)?;
    Ok(scrape
        .samples
        .into_iter()
        .filter(|sample| sample.metric == metric)
        .filter_map(|sample| {
            let value = match sample.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let labels = sample
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            Some((labels, value))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_read_by_their_one_label() {
        let page = "# HELP orca_node_pods_watched Pods\n\
                    orca_node_pods_watched{node=\"a\"} 5\n\
                    orca_node_pods_watched{node=\"b\"} 0\n\
                    orca_node_pods_watched_other{node=\"c\"} 9\n\
                    orca_node_served{node=\"a\"} 1\n";
        let series = by_label(page, "orca_node_pods_watched", "node");
        assert_eq!(
            series,
            BTreeMap::from([("a".to_owned(), 5.0), ("b".to_owned(), 0.0)])
        );
    }
}
