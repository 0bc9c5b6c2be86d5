use super::Graph;
use crate::structure::source_text::SourceFile;

/// A crate of these files: (path from `host/src`, module path as `a::b`, text).
fn graph(files: &[(&str, &str, &str)]) -> Graph {
    let files: Vec<SourceFile> = files
        .iter()
        .map(|(path, module, text)| {
            let module = module
                .split("::")
                .filter(|name| !name.is_empty())
                .map(str::to_owned)
                .collect();
            SourceFile::new(path.to_string(), module, false, text.to_string())
        })
        .collect();
    Graph::of(&files)
}

fn cycles(graph: &Graph) -> Vec<Vec<&str>> {
    graph
        .cycles()
        .iter()
        .map(|cycle| {
            cycle
                .iter()
                .map(|file| graph.files[*file].as_str())
                .collect()
        })
        .collect()
}

#[test]
fn two_files_that_use_each_other_are_a_cycle_reported_with_the_lines_that_make_it() {
    let graph = graph(&[
        ("lib.rs", "", "pub mod a;\npub mod b;\npub mod c;"),
        ("a.rs", "a", "use crate::b::B;\npub struct A;"),
        (
            "b.rs",
            "b",
            "pub struct B;\n\npub fn f() -> crate::a::A { crate::a::A }",
        ),
        ("c.rs", "c", "use crate::a::A;"),
    ]);
    assert_eq!(cycles(&graph), [["a.rs", "b.rs"]]);
    assert_eq!(
        graph.describe(&graph.cycles()[0]),
        "2 files: a.rs, b.rs\n\
         \x20 a.rs:1 imports b.rs: use crate::b::B;\n\
         \x20 b.rs:3 imports a.rs: pub fn f() -> crate::a::A { crate::a::A }\n"
    );
}

#[test]
fn a_path_goes_to_the_file_that_defines_what_it_names_through_re_exports() {
    let graph = graph(&[
        ("lib.rs", "", "pub mod pods;\npub mod top;"),
        (
            "pods/mod.rs",
            "pods",
            "mod view;\npub use view::View;\npub struct Pods;",
        ),
        (
            "pods/view.rs",
            "pods::view",
            "pub struct View;\nfn f() { crate::top::g(); }",
        ),
        ("top.rs", "top", "pub fn g() {}\nuse crate::pods::View;"),
    ]);
    // top.rs names `pods::View`, which pods/mod.rs only re-exports: it imports view.rs.
    assert_eq!(cycles(&graph), [["pods/view.rs", "top.rs"]]);
    assert_eq!(graph.files[1], "pods/mod.rs");
    assert!(
        !graph.imports[3].contains_key(&1),
        "top.rs imports pods/mod.rs"
    );
}

#[test]
fn a_parent_and_its_child_are_a_cycle_when_each_uses_the_other_not_for_the_mod_declaration() {
    let declared_only = graph(&[
        ("lib.rs", "", "pub mod p;"),
        ("p/mod.rs", "p", "mod q;\npub struct P;"),
        ("p/q.rs", "p::q", "use super::P;"),
    ]);
    assert!(cycles(&declared_only).is_empty());

    let re_exported = graph(&[
        ("lib.rs", "", "pub mod p;"),
        ("p/mod.rs", "p", "mod q;\npub use q::Q;\npub struct P;"),
        ("p/q.rs", "p::q", "use super::P;\npub struct Q;"),
    ]);
    assert_eq!(cycles(&re_exported), [["p/mod.rs", "p/q.rs"]]);

    let through_the_parent_to_a_sibling = graph(&[
        ("lib.rs", "", "pub mod p;"),
        (
            "p/mod.rs",
            "p",
            "mod q;\nmod r;\npub use q::Q;\npub use r::R;",
        ),
        ("p/q.rs", "p::q", "use super::R;\npub struct Q;"),
        ("p/r.rs", "p::r", "pub struct R;"),
    ]);
    assert!(cycles(&through_the_parent_to_a_sibling).is_empty());
    assert!(through_the_parent_to_a_sibling.imports[2].contains_key(&3));

    let only_in_tests = graph(&[
        ("lib.rs", "", "pub mod p;"),
        ("p/mod.rs", "p", "mod q;\npub use q::Q;\npub struct P;"),
        (
            "p/q.rs",
            "p::q",
            "pub struct Q;\n#[cfg(test)]\nmod tests {\n    use super::super::P;\n}",
        ),
    ]);
    assert!(cycles(&only_in_tests).is_empty());
}

#[test]
fn a_cycle_through_three_files_is_one_component_and_its_way_around_visits_each() {
    let graph = graph(&[
        ("lib.rs", "", "pub mod a;\npub mod b;\npub mod c;"),
        ("a.rs", "a", "use crate::b::B;"),
        ("b.rs", "b", "pub struct B;\nuse crate::c::C;"),
        ("c.rs", "c", "pub struct C;\nfn f() { crate::a::g(); }"),
    ]);
    assert_eq!(cycles(&graph), [["a.rs", "b.rs", "c.rs"]]);
    let way: Vec<&str> = graph
        .way_around(&graph.cycles()[0])
        .iter()
        .map(|file| graph.files[*file].as_str())
        .collect();
    assert_eq!(way, ["a.rs", "b.rs", "c.rs", "a.rs"]);
}
