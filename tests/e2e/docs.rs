//! The book in `docs/` builds with the pinned mdBook (`docs/mdbook`, installed by `tests/setup`),
//! and every relative link of the book and of `README.md` reaches a rendered page and every
//! `#anchor` a heading of it (`orca_e2e::doc_links`). Needs no cluster.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use orca_e2e::cluster::repo_root;
use orca_e2e::doc_links::{Book, check_page, markdown_files};

fn mdbook() -> Result<PathBuf> {
    let output = Command::new("bash")
        .arg(repo_root().join("docs/mdbook"))
        .arg("--check")
        .output()?;
    ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(PathBuf::from(String::from_utf8(output.stdout)?.trim()))
}

#[test]
fn the_book_builds_and_every_link_and_anchor_leads_somewhere() -> Result<()> {
    let repository = repo_root();
    let html = tempfile::tempdir()?;
    let started = Instant::now();
    let output = Command::new(mdbook()?)
        .arg("build")
        .arg(repository.join("docs"))
        .arg("--dest-dir")
        .arg(html.path())
        .output()?;
    let log = String::from_utf8_lossy(&output.stderr);
    ensure!(output.status.success(), "mdbook build failed:\n{log}");
    // mdBook goes on past what it cannot render (an include that fails, a page it skips) with a
    // warning; a book that renders with warnings is not the book the sources describe.
    ensure!(!log.contains("WARN"), "mdbook build warned:\n{log}");
    eprintln!("the book built in {:.1?}", started.elapsed());

    let sources = Path::new("docs/src");
    let book = Book {
        repository,
        sources,
        html: html.path(),
    };
    let mut pages = vec![PathBuf::from("README.md")];
    pages.extend(markdown_files(repository, sources)?);
    ensure!(pages.len() > 20, "the book has its pages: {pages:?}");
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(repository.join(page))
            .with_context(|| page.display().to_string())?;
        broken.extend(check_page(&book, page, &text));
    }
    ensure!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    Ok(())
}

/// The plugin author guide's field reference (`docs/src/plugins/records.md`) lists every field
/// of every record of the current WIT package, under its record's heading or row, in the
/// Rust/Python spelling and the TypeScript one: a field added to the WIT and not to the page
/// fails here, naming it.
#[test]
fn the_records_page_lists_every_field_of_every_wit_record_in_both_spellings() -> Result<()> {
    let repository = repo_root();
    let wit_dir = repository.join("plugin-sdk/wit/since_v0.3.0");
    let mut wit = String::new();
    for file in ["types.wit", "host.wit"] {
        wit.push_str(&std::fs::read_to_string(wit_dir.join(file))?);
    }
    let page = std::fs::read_to_string(repository.join("docs/src/plugins/records.md"))?;
    let records = wit_records(&wit);
    ensure!(records.len() >= 10, "the WIT's records: {records:?}");
    let mut missing = Vec::new();
    for (record, fields) in &records {
        let title = upper_camel(record);
        // The record's rows: the table under its heading (`## \`Pod\``), or the rows that
        // name it in a table of several records (`| \`Tag\` | …`).
        let heading = format!("`{title}`");
        let row_prefix = format!("| {heading} |");
        let lines: Vec<&str> = page.lines().collect();
        let section: Vec<&str> = match lines
            .iter()
            .position(|l| l.starts_with('#') && l.contains(&heading))
        {
            Some(start) => lines[start + 1..]
                .iter()
                .take_while(|l| !l.starts_with('#'))
                .filter(|l| l.starts_with('|'))
                .copied()
                .collect(),
            None => lines
                .iter()
                .filter(|l| l.starts_with(&row_prefix))
                .copied()
                .collect(),
        };
        if section.is_empty() {
            missing.push(format!("record {title}: no section"));
            continue;
        }
        for field in fields {
            let snake = format!("`{}`", field.replace('-', "_"));
            let camel = format!("`{}`", lower_camel(field));
            let listed = section
                .iter()
                .any(|row| row.contains(&snake) && row.contains(&camel));
            if !listed {
                missing.push(format!("{title}.{field} ({snake} and {camel})"));
            }
        }
    }
    ensure!(
        missing.is_empty(),
        "docs/src/plugins/records.md lacks:\n{}",
        missing.join("\n")
    );
    Ok(())
}

/// Each `record NAME { field: type, … }` of `wit`, with its fields' names.
fn wit_records(wit: &str) -> Vec<(String, Vec<String>)> {
    let mut records = Vec::new();
    let mut current: Option<(String, Vec<String>)> = None;
    for line in wit.lines().map(str::trim) {
        if let Some(name) = line
            .strip_prefix("record ")
            .and_then(|rest| rest.strip_suffix(" {"))
        {
            current = Some((name.to_owned(), Vec::new()));
        } else if line == "}" {
            records.extend(current.take());
        } else if let Some((_, fields)) = current.as_mut()
            && !line.starts_with("//")
            && let Some((field, _)) = line.split_once(':')
        {
            fields.push(field.trim().to_owned());
        }
    }
    records
}

/// `instance-type` as `InstanceType`.
fn upper_camel(kebab: &str) -> String {
    kebab
        .split('-')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect()
            })
        })
        .collect()
}

/// `memory-mib` as `memoryMib`.
fn lower_camel(kebab: &str) -> String {
    let upper = upper_camel(kebab);
    let mut chars = upper.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_lowercase().chain(chars).collect()
    })
}

/// `KEY=value` of `tests/cluster/versions.env`.
fn harness_version(key: &str) -> Result<String> {
    let text = std::fs::read_to_string(repo_root().join("tests/cluster/versions.env"))?;
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{key}=")))
        .map(|value| value.trim().to_owned())
        .with_context(|| format!("tests/cluster/versions.env has no {key}"))
}

/// The minor of a release `v1.MINOR.PATCH`.
fn minor_of(release: &str) -> Result<u32> {
    release
        .strip_prefix("v1.")
        .and_then(|rest| rest.split('.').next())
        .and_then(|minor| minor.parse().ok())
        .with_context(|| format!("{release:?} is not v1.MINOR.PATCH"))
}

/// The range the version matrix tests (issue 59) is the one orca, the chart and the docs
/// state: a release added to or dropped from the matrix fails here until all four say so.
#[test]
fn the_supported_kubernetes_range_is_the_same_in_the_harness_orca_the_chart_and_the_docs()
-> Result<()> {
    let (oldest, newest) = (
        harness_version("K8S_OLDEST")?,
        harness_version("K8S_NEWEST")?,
    );
    let (low, high) = (minor_of(&oldest)?, minor_of(&newest)?);
    let default = minor_of(&harness_version("K8S_VERSION")?)?;
    ensure!(
        low <= default && default <= high,
        "the default harness release 1.{default} is outside the matrix 1.{low}–1.{high}"
    );

    let orca = orca::cluster::apiserver::SUPPORTED_MINORS;
    ensure!(
        (*orca.start(), *orca.end()) == (low, high),
        "orca's SUPPORTED_MINORS is {orca:?}, the matrix 1.{low}–1.{high}"
    );

    let chart = std::fs::read_to_string(repo_root().join("deploy/charts/orca/Chart.yaml"))?;
    let range = format!("kubeVersion: \">=1.{low}.0-0 <1.{}.0-0\"", high + 1);
    ensure!(
        chart.lines().any(|line| line.trim() == range),
        "deploy/charts/orca/Chart.yaml lacks {range}"
    );

    let page =
        std::fs::read_to_string(repo_root().join("docs/src/operations/kubernetes-versions.md"))?;
    for said in [
        format!("**Kubernetes 1.{low} to 1.{high}**"),
        format!("({}", oldest.trim_start_matches('v')),
        format!("and {})", newest.trim_start_matches('v')),
        format!("`tested` (1.{low}–1.{high})"),
        format!("**Older than 1.{low}**"),
        format!("**Newer than 1.{high}**"),
    ] {
        ensure!(
            page.contains(&said),
            "docs/src/operations/kubernetes-versions.md does not say {said:?}"
        );
    }
    for (file, said) in [
        (
            "docs/src/install/helm.md",
            format!("A Kubernetes cluster of 1.{low} to 1.{high}"),
        ),
        (
            "README.md",
            format!("**You run a cluster** of Kubernetes 1.{low} to 1.{high}"),
        ),
    ] {
        let text = std::fs::read_to_string(repo_root().join(file))?;
        ensure!(text.contains(&said), "{file} does not say {said:?}");
    }
    Ok(())
}
