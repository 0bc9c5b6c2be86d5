use super::references::references;
use super::tokens::{DeclaredModule, modules};
use super::{code_of, production_code};

#[test]
fn code_keeps_its_lines_and_loses_comments_strings_and_chars() {
    let text = r##"let a = "use crate::gone::X; {"; // use crate::gone::Y;
/* crate::gone::Z /* nested */ still a comment */ let b = r#"a "quoted" {"#;
let c = '"'; let d = b'{'; fn e<'a>(x: &'a str) {}
let f = "two
lines";
#[serde(deserialize_with = "super::field::parse", rename = "crate::not_a_path")]"##;
    let code = code_of(text);
    assert_eq!(code.lines().count(), text.lines().count());
    let squeezed: Vec<String> = code
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        squeezed,
        [
            r#"let a = " ";"#,
            r##"let b = r#" "#;"##,
            r#"let c = ' '; let d = b' '; fn e<'a>(x: &'a str) {}"#,
            r#"let f = ""#,
            r#"";"#,
            r#"#[serde(deserialize_with = "super::field::parse", rename = " ")]"#,
        ]
    );
}

#[test]
fn production_code_leaves_out_what_is_under_cfg_test() {
    let text = r#"mod a;
#[cfg(test)]
mod tests;
#[cfg(test)]
#[derive(Debug)]
mod inline {
    fn f() { let s = "}"; }
}
#[cfg(any(test, feature = "fake"))]
pub(crate) fn for_tests() -> u8 { 1 }
#[cfg(not(test))]
fn kept() {}
#[cfg(test)]
const LIMIT: [u8; 2] = [1, 2];
fn g() {}"#;
    let code = production_code(text);
    assert_eq!(code.lines().count(), text.lines().count());
    let words: Vec<&str> = code.split_whitespace().collect();
    assert_eq!(
        words,
        [
            "mod",
            "a;",
            "#[cfg(not(test))]",
            "fn",
            "kept()",
            "{}",
            "fn",
            "g()",
            "{}"
        ]
    );
}

#[test]
fn modules_are_declared_by_mod_as_files_or_inline() {
    let code = production_code(
        "mod a;\npub(crate) mod b;\n#[cfg(test)]\nmod tests;\nmod c {\n    pub mod d;\n    mod e {}\n}\nmod f;",
    );
    let declared = modules(&code);
    let shape: Vec<(&str, Vec<&str>, bool)> = declared
        .iter()
        .map(|DeclaredModule { name, within, body }| {
            let within = within.iter().map(String::as_str).collect();
            (name.as_str(), within, body.is_some())
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("a", vec![], false),
            ("b", vec![], false),
            ("c", vec![], true),
            ("d", vec!["c"], false),
            ("e", vec!["c"], true),
            ("f", vec![], false),
        ]
    );
}

/// A case: what it shows, the file's module, its text, and what it refers to (line, path from
/// the root).
type Case = (
    &'static str,
    &'static [&'static str],
    &'static str,
    &'static [(usize, &'static str)],
);

#[test]
fn references_resolve_to_paths_from_the_crate_root() {
    let cases: &[Case] = &[
        ("a plain use", &["x"], "use crate::a::b;", &[(1, "a::b")]),
        (
            "a grouped use, nested, with self, an alias and a glob",
            &["x"],
            "use crate::a::{b, c::{d, self as e}, f::*};",
            &[(1, "a::b"), (1, "a::c::d"), (1, "a::c"), (1, "a::f")],
        ),
        (
            "super twice",
            &["p", "q", "r"],
            "use super::super::x::Y;",
            &[(1, "p::x::Y")],
        ),
        (
            "self, and a child module by its name",
            &["p"],
            "mod child;\nuse self::child::Z;\npub use child::W;",
            &[(2, "p::child::Z"), (3, "p::child::W")],
        ),
        (
            "an inline module: super is the file's module",
            &["p"],
            "mod inner {\n    use super::W;\n    fn f() { super::g(); }\n}\nfn h() { inner::f(); }",
            &[(2, "p::W"), (3, "p::g"), (5, "p::inner::f")],
        ),
        (
            "a crate path in an expression, and $crate in a macro",
            &["x"],
            "fn f() -> u8 {\n    crate::a::b::f(1) + $crate::c::D\n}",
            &[(2, "a::b::f"), (2, "c::D")],
        ),
        (
            "a module named by a use, then used by that name",
            &["x"],
            "use crate::provider::aws;\nfn f() { aws::sdk::call(); }",
            &[(1, "provider::aws"), (2, "provider::aws::sdk::call")],
        ),
        (
            "comments and strings are not references",
            &["x"],
            "// use crate::gone::X;\n/* crate::gone::Y */\nconst S: &str = \"crate::gone::Z\";",
            &[],
        ),
        (
            "a use inside the tests module is not one",
            &["x"],
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::only_tests::T;\n    use super::*;\n}",
            &[],
        ),
        (
            "other crates, Self and pub(in …) are not references",
            &["p", "q"],
            "use std::fmt;\nimpl fmt::Display for X {}\npub(in super::super) fn f() { Self::g(); }",
            &[],
        ),
        (
            "a serde function named in a string is one",
            &["config", "node"],
            "#[serde(deserialize_with = \"super::quantity::parse\")]\nstruct N;",
            &[(1, "config::quantity::parse")],
        ),
    ];
    for (case, module, text, expected) in cases {
        let module: Vec<String> = module.iter().map(|name| name.to_string()).collect();
        let found: Vec<(usize, String)> = references(&module, false, &production_code(text))
            .references
            .into_iter()
            .map(|reference| (reference.line, reference.path.join("::")))
            .collect();
        let expected: Vec<(usize, String)> = expected
            .iter()
            .map(|(line, path)| (*line, path.to_string()))
            .collect();
        assert_eq!(found, expected, "{case}");
    }
}

#[test]
fn the_binary_refers_to_the_library_by_its_crate_name() {
    let code = production_code("use orca::cli::Cli;\nfn main() { orca::tls::install(); }");
    let found: Vec<String> = references(&[], true, &code)
        .references
        .into_iter()
        .map(|reference| reference.path.join("::"))
        .collect();
    assert_eq!(found, ["cli::Cli", "tls::install"]);
}

#[test]
fn a_use_names_what_it_brings_into_its_module_unless_it_is_another_crates() {
    let code = production_code(
        "mod child;\npub use child::{A as B, C};\nuse std::fmt;\nuse super::D as _;\nmod inner {\n    use super::B;\n}",
    );
    let names: Vec<(String, String, String)> = references(&["p".to_owned()], false, &code)
        .use_names
        .into_iter()
        .map(|used| (used.module.join("::"), used.name, used.path.join("::")))
        .collect();
    let expected = [
        ("p", "B", "p::child::A"),
        ("p", "C", "p::child::C"),
        ("p::inner", "B", "p::B"),
    ];
    assert_eq!(
        names,
        expected.map(|(module, name, path)| (module.into(), name.into(), path.into()))
    );
}
