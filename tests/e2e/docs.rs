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
