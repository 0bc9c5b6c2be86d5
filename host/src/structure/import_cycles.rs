//! No file of orca imports itself through other files: the files of `host/src` and the
//! imports between them form no cycle, so each file can be read, tested and moved knowing
//! only what lies below it.
//!
//! Run it with `cargo test -p orca --lib import_cycles --locked`.
//!
//! # The rule
//! File A imports file B when A's production code (no comments, strings or `#[cfg(test)]`
//! items; see [`crate::structure::source_text`]) names a module or item of the crate that B defines: a
//! `use` (`use crate::a::b::C;`, `use super::C;`, `pub use child::C;`, each leaf of a grouped
//! `use`) or a path in code (`crate::a::b::f(…)`, `super::x::Y`, `child::f()`). The file that
//! defines it is that of the path's longest prefix that is a module, after following every
//! `use` on the way: `crate::pods::view::PodView` is `pods/view.rs`, and so is
//! `crate::pods::PodView` when `pods/mod.rs` only re-exports it (`pub use view::PodView;`),
//! which is an import of `pods/view.rs` by `pods/mod.rs`. So:
//! - `mod child;` is structure, not an import: a parent may declare its children freely.
//! - A parent that re-exports its children's items and children that import one another
//!   through it (`use super::Sibling`) are no cycle: each import goes to the sibling.
//! - A child's `use super::Item`, with `Item` defined in the parent's file, imports the
//!   parent; with a parent that re-exports or uses that child, that is a cycle. Keep the parent
//!   to `mod` declarations and re-exports, and the items in children.
//! - Inline `mod x { … }` is part of its file: a path into it goes to that file.
//!
//! A cycle is a strongly connected component of the file graph (Tarjan); each is reported
//! with its files and one path around it, each step with the line that makes it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::structure::source_text::references::{FileReferences, references};
use crate::structure::source_text::tokens::modules;
use crate::structure::source_text::{SourceFile, production_files};

#[cfg(test)]
mod tests;

/// Cycles tolerated while they are broken up, each as its set of files from `host/src`. The
/// test fails when a cycle is found that is not here exactly, and when one here is found no
/// more: the list only shrinks. It is empty: every cycle is broken.
const ALLOWED_CYCLES: &[&[&str]] = &[];

/// One import: the line of the importing file that makes it.
#[derive(Debug)]
pub(crate) struct Import {
    /// 1-based.
    pub(crate) line: usize,
    /// That line, trimmed.
    pub(crate) text: String,
}

/// Files, and which imports which (the first line that does, for each pair).
pub(crate) struct Graph {
    pub(crate) files: Vec<String>,
    pub(crate) imports: Vec<BTreeMap<usize, Import>>,
}

impl Graph {
    /// The graph of these files: each reference resolved, through re-exports, to the file that
    /// defines what it names; a file's references to itself left out.
    pub(crate) fn of(files: &[SourceFile]) -> Graph {
        // Every module of the library, file or inline, to the file that holds it.
        let mut holders: BTreeMap<Vec<String>, usize> = BTreeMap::new();
        for (index, file) in files.iter().enumerate().filter(|(_, file)| !file.binary) {
            holders.insert(file.module.clone(), index);
            for declared in modules(&file.code)
                .into_iter()
                .filter(|declared| declared.body.is_some())
            {
                let mut module = file.module.clone();
                module.extend(declared.within);
                module.push(declared.name);
                holders.insert(module, index);
            }
        }
        let read: Vec<FileReferences> = files
            .iter()
            .map(|file| references(&file.module, file.binary, &file.code))
            .collect();
        let use_names: BTreeMap<(&[String], &str), &[String]> = read
            .iter()
            .flat_map(|file| &file.use_names)
            .map(|used| ((&used.module[..], used.name.as_str()), &used.path[..]))
            .collect();
        let holder = |path: &[String]| -> Option<usize> {
            let mut path = path.to_vec();
            for _ in 0..16 {
                let prefix = (0..=path.len())
                    .rev()
                    .find(|length| holders.contains_key(&path[..*length]))?;
                let through = path
                    .get(prefix)
                    .and_then(|name| use_names.get(&(&path[..prefix], name.as_str())));
                match through {
                    Some(named) if named[..] != path[..=prefix] => {
                        let mut next = named.to_vec();
                        next.extend_from_slice(&path[prefix + 1..]);
                        path = next;
                    }
                    _ => return holders.get(&path[..prefix]).copied(),
                }
            }
            None
        };
        let imports = files
            .iter()
            .zip(&read)
            .enumerate()
            .map(|(index, (file, read))| {
                let lines: Vec<&str> = file.text.lines().collect();
                let mut imports = BTreeMap::new();
                for reference in &read.references {
                    if let Some(holder) = holder(&reference.path)
                        && holder != index
                    {
                        imports.entry(holder).or_insert_with(|| Import {
                            line: reference.line,
                            text: lines
                                .get(reference.line - 1)
                                .map_or("", |line| line.trim())
                                .to_owned(),
                        });
                    }
                }
                imports
            })
            .collect();
        Graph {
            files: files.iter().map(|file| file.path.clone()).collect(),
            imports,
        }
    }

    /// The cycles: strongly connected components of more than one file, each sorted, in
    /// order of their first file.
    pub(crate) fn cycles(&self) -> Vec<Vec<usize>> {
        let mut tarjan = Tarjan {
            graph: self,
            next: 0,
            index: vec![None; self.files.len()],
            low: vec![0; self.files.len()],
            stack: Vec::new(),
            on_stack: vec![false; self.files.len()],
            components: Vec::new(),
        };
        for file in 0..self.files.len() {
            if tarjan.index[file].is_none() {
                tarjan.visit(file);
            }
        }
        let mut cycles: Vec<Vec<usize>> = tarjan
            .components
            .into_iter()
            .filter(|component| component.len() > 1)
            .map(|mut component| {
                component.sort_by(|a, b| self.files[*a].cmp(&self.files[*b]));
                component
            })
            .collect();
        cycles.sort_by(|a, b| self.files[a[0]].cmp(&self.files[b[0]]));
        cycles
    }

    /// A shortest way from the cycle's first file around and back, within the cycle.
    pub(crate) fn way_around(&self, cycle: &[usize]) -> Vec<usize> {
        let start = cycle[0];
        let inside: BTreeSet<usize> = cycle.iter().copied().collect();
        let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(file) = queue.pop_front() {
            for &next in self.imports[file].keys() {
                if !inside.contains(&next) || came_from.contains_key(&next) {
                    continue;
                }
                came_from.insert(next, file);
                if next == start {
                    let mut way = vec![start];
                    let mut at = file;
                    while at != start {
                        way.push(at);
                        at = came_from[&at];
                    }
                    way.push(start);
                    way.reverse();
                    return way;
                }
                queue.push_back(next);
            }
        }
        unreachable!("a strongly connected component has a way around")
    }

    /// The cycle's files, and a way around it with the line of each import.
    pub(crate) fn describe(&self, cycle: &[usize]) -> String {
        let names: Vec<&str> = cycle
            .iter()
            .map(|file| self.files[*file].as_str())
            .collect();
        let mut text = format!("{} files: {}\n", cycle.len(), names.join(", "));
        let way = self.way_around(cycle);
        for step in way.windows(2) {
            let import = &self.imports[step[0]][&step[1]];
            text.push_str(&format!(
                "  {}:{} imports {}: {}\n",
                self.files[step[0]], import.line, self.files[step[1]], import.text
            ));
        }
        text
    }
}

struct Tarjan<'a> {
    graph: &'a Graph,
    next: usize,
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    stack: Vec<usize>,
    on_stack: Vec<bool>,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, file: usize) {
        self.index[file] = Some(self.next);
        self.low[file] = self.next;
        self.next += 1;
        self.stack.push(file);
        self.on_stack[file] = true;
        for &next in self.graph.imports[file].keys() {
            match self.index[next] {
                None => {
                    self.visit(next);
                    self.low[file] = self.low[file].min(self.low[next]);
                }
                Some(index) if self.on_stack[next] => {
                    self.low[file] = self.low[file].min(index);
                }
                Some(_) => {}
            }
        }
        if Some(self.low[file]) == self.index[file] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == file {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

/// Run with `cargo test -p orca --lib import_cycles --locked`.
#[test]
fn no_import_cycle_between_files_but_the_listed_ones_and_each_listed_one_is_still_there() {
    let files = production_files();
    assert!(files.len() > 100, "only {} files read", files.len());
    let graph = Graph::of(&files);
    let found = graph.cycles();
    let as_set = |cycle: &Vec<usize>| -> BTreeSet<&str> {
        cycle
            .iter()
            .map(|file| graph.files[*file].as_str())
            .collect()
    };
    let allowed: Vec<BTreeSet<&str>> = ALLOWED_CYCLES
        .iter()
        .map(|cycle| cycle.iter().copied().collect())
        .collect();
    let new: Vec<String> = found
        .iter()
        .filter(|cycle| !allowed.contains(&as_set(cycle)))
        .map(|cycle| graph.describe(cycle))
        .collect();
    let found_sets: Vec<BTreeSet<&str>> = found.iter().map(as_set).collect();
    let gone: Vec<&BTreeSet<&str>> = allowed
        .iter()
        .filter(|cycle| !found_sets.contains(cycle))
        .collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "import cycles between files of host/src that ALLOWED_CYCLES in {} does not list \
         (break each: move what both sides need below both, or pass it in; a cycle that only \
         lost files is listed anew with the files it has left):\n{}\nlisted but not found \
         (strike them from the list): {gone:#?}",
        file!(),
        new.join("\n"),
    );
}
