use super::*;

/// What esbuild 0.28 writes for this bundle of `src/plugin.ts` importing `src/util.ts`
/// (`sourcemap: 'external'`, `sourcesContent: false`), with `file` and the sources renamed as
/// `bundle.mjs` does:
///
/// ```text
///  1 // src/util.ts
///  2 function twice(n) {
///  3   return n * 2;
///  4 }
///  5
///  6 // src/plugin.ts
///  7 function pick(n) {
///  8   const f = n.g;
///  9   return f() + twice(n);
/// 10 }
/// ```
///
/// (`plugin.ts` line 5 is `return f() + twice(n);`, `util.ts` line 2 is `return n * 2;`.)
const ESBUILD_MAP: &str = r#"{
  "version": 3,
  "file": "component.js",
  "sources": ["src/util.ts", "src/plugin.ts"],
  "mappings": ";AAAO,SAAS,MAAM,GAAmB;AACvC,SAAO,IAAI;AACb;;;ACAO,SAAS,KAAK,GAAmB;AACtC,QAAM,IAAK,EAAqC;AAChD,SAAO,EAAE,IAAI,MAAM,CAAC;AACtB;",
  "names": []
}"#;

fn at(map: &SourceMap, line: u32, column: u32) -> Option<(String, u32)> {
    map.original(line, column)
        .map(|position| (position.source.to_owned(), position.line))
}

#[test]
fn a_bundle_position_maps_to_its_typescript_line() {
    let map = SourceMap::parse(ESBUILD_MAP.as_bytes()).unwrap();
    assert_eq!(map.file, "component.js");
    let plugin = |line| Some(("src/plugin.ts".to_owned(), line));
    let util = |line| Some(("src/util.ts".to_owned(), line));
    for (line, column, expected) in [
        // `f()` in `return f() + twice(n);`, where a stack says the call failed.
        (9, 10, plugin(5)),
        // Past the last mapping of the line: still that line's.
        (9, 80, plugin(5)),
        (8, 13, plugin(4)),
        (3, 10, util(2)),
        (2, 1, util(1)),
        // An empty line, a comment, past the end, and the 0th line or column no stack names.
        (5, 1, None),
        (1, 1, None),
        (99, 1, None),
        (0, 1, None),
        (9, 0, None),
    ] {
        assert_eq!(at(&map, line, column), expected, "{line}:{column}");
    }
}

#[test]
fn a_column_before_the_lines_first_mapping_maps_nothing() {
    // One mapping on line 1, at column 2 (0-based): `E` is +2.
    let json = r#"{"version": 3, "sources": ["a.ts"], "mappings": "EAAA"}"#;
    let map = SourceMap::parse(json.as_bytes()).unwrap();
    assert_eq!(at(&map, 1, 1), None);
    assert_eq!(at(&map, 1, 2), None);
    assert_eq!(at(&map, 1, 3), Some(("a.ts".to_owned(), 1)));
}

#[test]
fn malformed_mappings_map_nothing_and_do_not_panic() {
    for mappings in [
        // Not Base64.
        "!!!!",
        // A continuation bit with nothing after it.
        "g",
        // More than 32 bits.
        "gggggggggggggA",
        // Two fields: neither a bare column nor a mapping.
        "AA",
        // A source index past the sources, and a negative one.
        "AgBAA",
        "ADAA",
        // A line that goes below 1.
        "AADA",
    ] {
        let json = format!(r#"{{"version": 3, "sources": ["a.ts"], "mappings": "{mappings}"}}"#);
        let map = SourceMap::parse(json.as_bytes()).unwrap();
        assert_eq!(at(&map, 1, 1), None, "{mappings}");
    }
}

#[test]
fn only_a_version_3_map_within_the_bound_is_read() {
    for (json, expected) in [
        (
            r#"{"version": 2, "sources": [], "mappings": ""}"#,
            "version 2",
        ),
        ("not json", "expected ident"),
        (
            r#"{"version": 3, "sources": []}"#,
            "missing field `mappings`",
        ),
        (
            r#"{"version": 3, "sections": []}"#,
            "missing field `sources`",
        ),
    ] {
        let error = SourceMap::parse(json.as_bytes()).unwrap_err();
        assert!(matches!(error, SourceMapError::NotAMap(_)), "{json}");
        assert!(error.to_string().contains(expected), "{json}: {error}");
    }
    let huge = vec![b' '; MAX_SOURCE_MAP_BYTES + 1];
    assert_eq!(
        SourceMap::parse(&huge),
        Err(SourceMapError::TooLarge(MAX_SOURCE_MAP_BYTES + 1))
    );
}

#[test]
fn a_source_root_prefixes_each_source_and_a_null_source_is_empty() {
    let json = r#"{"version": 3, "sourceRoot": "lib/", "sources": ["a.ts", null], "mappings": "AAAA;ACAA"}"#;
    let map = SourceMap::parse(json.as_bytes()).unwrap();
    assert_eq!(at(&map, 1, 1), Some(("lib/a.ts".to_owned(), 1)));
    assert_eq!(at(&map, 2, 1), Some(("lib/".to_owned(), 1)));
}

/// A custom section `name` holding `data`.
fn custom_section(name: &str, data: &[u8]) -> Vec<u8> {
    let mut body = vec![u8::try_from(name.len()).unwrap()];
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    let mut section = vec![0, u8::try_from(body.len()).unwrap()];
    section.extend(body);
    section
}

const COMPONENT: &[u8] = b"\0asm\x0d\0\x01\0";
const MODULE: &[u8] = b"\0asm\x01\0\0\0";
const SMALL_MAP: &str = r#"{"version":3,"file":"c.js","sources":["a.ts"],"mappings":"AAAA"}"#;

#[test]
fn the_map_is_read_from_the_components_own_section_only() {
    // Appended after the component's sections, as bundle.mjs does.
    let mut component = COMPONENT.to_vec();
    component.extend(custom_section("orca:policy-version", b"0.3.0"));
    component.extend(custom_section(SOURCE_MAP_SECTION, SMALL_MAP.as_bytes()));
    let map = SourceMap::embedded_in(&component).unwrap().unwrap();
    assert_eq!(map.file, "c.js");

    // A nested module's section of that name is the module's, not the plugin's map.
    let mut module = MODULE.to_vec();
    module.extend(custom_section(SOURCE_MAP_SECTION, SMALL_MAP.as_bytes()));
    let mut nesting = COMPONENT.to_vec();
    nesting.extend([1, u8::try_from(module.len()).unwrap()]);
    nesting.extend(&module);
    assert_eq!(SourceMap::embedded_in(&nesting), Ok(None));
    // Past the nested module, the component's own section is found.
    nesting.extend(custom_section(SOURCE_MAP_SECTION, SMALL_MAP.as_bytes()));
    assert!(SourceMap::embedded_in(&nesting).unwrap().is_some());

    assert_eq!(SourceMap::embedded_in(COMPONENT), Ok(None));
    assert!(matches!(
        SourceMap::embedded_in(b"not wasm"),
        Err(SourceMapError::Unparsable(_))
    ));
    let mut broken = COMPONENT.to_vec();
    broken.extend(custom_section(SOURCE_MAP_SECTION, b"{"));
    assert!(matches!(
        SourceMap::embedded_in(&broken),
        Err(SourceMapError::NotAMap(_))
    ));
}
