//! Every relative link of the docs reaches a page, and every `#anchor` a heading of it, as the
//! built book has them.
//!
//! Links are read from the Markdown sources with pulldown-cmark (so code blocks and inline code
//! are not links); anchors are checked against the `id="…"` attributes of the HTML that mdBook
//! generated for the target page, so a heading's id is whatever mdBook made of it (duplicates
//! numbered, punctuation dropped), never a second guess at its algorithm. Well-kept checkers
//! exist for files (mdbook-linkcheck2) but not for anchors, which is why this module exists.
//!
//! # Rules
//! - A link with a scheme (`https:`, `mailto:`) is left alone.
//! - A page of the book (under `docs/src/`) links only inside the book: the rendered site has
//!   nothing else. Repository files are named in code (`deploy/iam/orca.json`) instead.
//! - A page outside the book (`README.md`) may link to any file of the repository.
//! - A link into the book needs the page to be rendered (listed in `SUMMARY.md`); an anchor
//!   needs the rendered page to carry that id.

use std::fmt;
use std::fs;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Parser, Tag};

/// Where the book's sources and its rendered HTML are, relative to the repository.
pub struct Book<'a> {
    /// The repository's root.
    pub repository: &'a Path,
    /// The book's sources, such as `docs/src`, relative to `repository`.
    pub sources: &'a Path,
    /// Where `mdbook build -d` wrote the HTML.
    pub html: &'a Path,
}

/// One link that leads nowhere.
#[derive(Debug, PartialEq, Eq)]
pub struct BrokenLink {
    /// The page holding the link, relative to the repository.
    pub page: PathBuf,
    /// Its line in that page, from 1.
    pub line: usize,
    /// The link as written.
    pub target: String,
    /// Why it leads nowhere.
    pub problem: Problem,
}

/// Why a link leads nowhere.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("no such file")]
    NoSuchFile,
    #[error("a page of the book links outside the book, which the rendered site does not have")]
    OutsideTheBook,
    #[error("the page is not rendered (is it in SUMMARY.md?)")]
    NotRendered,
    #[error("the rendered page has no heading or element with id {0:?}")]
    NoSuchAnchor(String),
    #[error("an anchor into a file outside the book cannot be checked")]
    AnchorOutsideTheBook,
}

impl fmt::Display for BrokenLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: ({}) {}",
            self.page.display(),
            self.line,
            self.target,
            self.problem
        )
    }
}

/// The link destinations of a Markdown text, each with its line (from 1); images included.
pub fn links(markdown: &str) -> Vec<(usize, String)> {
    Parser::new(markdown)
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                let line = markdown[..range.start].matches('\n').count() + 1;
                Some((line, dest_url.into_string()))
            }
            _ => None,
        })
        .collect()
}

/// The broken links of `page` (relative to the repository), whose text is `markdown`.
pub fn check_page(book: &Book<'_>, page: &Path, markdown: &str) -> Vec<BrokenLink> {
    links(markdown)
        .into_iter()
        .filter_map(|(line, target)| {
            let problem = check_link(book, page, &target).err()?;
            Some(BrokenLink {
                page: page.to_owned(),
                line,
                target,
                problem,
            })
        })
        .collect()
}

fn check_link(book: &Book<'_>, page: &Path, target: &str) -> Result<(), Problem> {
    if has_scheme(target) {
        return Ok(());
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_owned()
    } else {
        normalize(&page.parent().unwrap_or(Path::new("")).join(path)).ok_or(Problem::NoSuchFile)?
    };
    let page_in_book = page.starts_with(book.sources);
    let file_in_book = file.starts_with(book.sources);
    if page_in_book && !file_in_book {
        return Err(Problem::OutsideTheBook);
    }
    if !book.repository.join(&file).exists() {
        return Err(Problem::NoSuchFile);
    }
    if !file_in_book {
        return match anchor {
            Some(_) => Err(Problem::AnchorOutsideTheBook),
            None => Ok(()),
        };
    }
    if file.extension().is_none_or(|ext| ext != "md") {
        return Ok(());
    }
    let rendered = book.html.join(
        file.strip_prefix(book.sources)
            .expect("checked above")
            .with_extension("html"),
    );
    let Ok(html) = fs::read_to_string(&rendered) else {
        return Err(Problem::NotRendered);
    };
    match anchor {
        Some(anchor) if !html.contains(&format!(" id=\"{anchor}\"")) => {
            Err(Problem::NoSuchAnchor(anchor.to_owned()))
        }
        _ => Ok(()),
    }
}

fn has_scheme(target: &str) -> bool {
    target.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    })
}

/// `a/b/../c` as `a/c`; `None` for a path that climbs out of the repository.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Every `.md` file under `folder` (relative to `repository`), sorted.
pub fn markdown_files(repository: &Path, folder: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut folders = vec![folder.to_owned()];
    while let Some(folder) = folders.pop() {
        for entry in fs::read_dir(repository.join(&folder))? {
            let name = entry?.file_name();
            let path = folder.join(&name);
            if repository.join(&path).is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                found.push(path);
            }
        }
    }
    found.sort();
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with `README.md`, `deploy/x.yaml`, a book of two pages in `docs/src`, and
    /// their HTML as mdBook would render it (only `a.md` rendered, with ids `top` and `b-2`).
    fn repository() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let write = |path: &str, text: &str| {
            let path = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        write("README.md", "# readme\n");
        write("deploy/x.yaml", "x: 1\n");
        write("docs/src/a.md", "# Top\n");
        write("docs/src/sub/unlisted.md", "# Unlisted\n");
        write(
            "html/a.html",
            "<h1 id=\"top\"><a class=\"header\" href=\"#top\">Top</a></h1><h2 id=\"b-2\">B</h2>",
        );
        dir
    }

    fn problems(page: &str, markdown: &str) -> Vec<(usize, String, Problem)> {
        let repo = repository();
        let html = repo.path().join("html");
        let book = Book {
            repository: repo.path(),
            sources: Path::new("docs/src"),
            html: &html,
        };
        check_page(&book, Path::new(page), markdown)
            .into_iter()
            .map(|broken| (broken.line, broken.target, broken.problem))
            .collect()
    }

    #[test]
    fn links_to_pages_and_their_headings_pass() {
        let text = "[a](a.md) [top](a.md#top) [b](#b-2) ![img](a.md)\n[ext](https://x.org/#y)";
        assert_eq!(problems("docs/src/a.md", text), vec![]);
        assert_eq!(problems("docs/src/sub/c.md", "[up](../a.md#b-2)"), vec![]);
    }

    #[test]
    fn a_missing_page_is_reported_with_its_line() {
        assert_eq!(
            problems("docs/src/a.md", "text\n\n[gone](gone.md)"),
            vec![(3, "gone.md".into(), Problem::NoSuchFile)]
        );
    }

    #[test]
    fn a_missing_anchor_is_reported_on_another_page_and_on_the_same_one() {
        assert_eq!(
            problems("docs/src/sub/c.md", "[x](../a.md#nope)"),
            vec![(
                1,
                "../a.md#nope".into(),
                Problem::NoSuchAnchor("nope".into())
            )]
        );
        assert_eq!(
            problems("docs/src/a.md", "[x](#b)"),
            vec![(1, "#b".into(), Problem::NoSuchAnchor("b".into()))]
        );
    }

    #[test]
    fn a_page_left_out_of_the_summary_is_not_rendered() {
        assert_eq!(
            problems("docs/src/a.md", "[x](sub/unlisted.md)"),
            vec![(1, "sub/unlisted.md".into(), Problem::NotRendered)]
        );
    }

    #[test]
    fn the_book_links_only_inside_itself_and_the_readme_anywhere() {
        assert_eq!(
            problems("docs/src/a.md", "[x](../../deploy/x.yaml)"),
            vec![(1, "../../deploy/x.yaml".into(), Problem::OutsideTheBook)]
        );
        assert_eq!(
            problems("README.md", "[x](deploy/x.yaml) [a](docs/src/a.md#top)"),
            vec![]
        );
        assert_eq!(
            problems("README.md", "[x](deploy/x.yaml#y) [z](../../etc/passwd)"),
            vec![
                (1, "deploy/x.yaml#y".into(), Problem::AnchorOutsideTheBook),
                (1, "../../etc/passwd".into(), Problem::NoSuchFile)
            ]
        );
    }

    #[test]
    fn code_is_not_a_link() {
        let text = "`[x](gone.md)`\n\n```md\n[y](gone.md)\n```\n";
        assert_eq!(problems("docs/src/a.md", text), vec![]);
    }
}
