use super::*;

/// What componentize-py 0.25 (CPython 3.14) wrote to stderr when `raises_type_error`'s
/// `select_instance` raised (`plugin-sdk/python/tests/raises_type_error`): the traceback, then
/// the runtime's own panic.
const PYTHON_STDERR: &str = r#"Traceback (most recent call last):
  File "/1/orca_plugin/plugin.py", line 98, in select_instance
  File "/1/orca_plugin/plugin.py", line 81, in _call
  File "/0/app.py", line 23, in select_instance
  File "/0/app.py", line 15, in instance_type_for
TypeError: can only concatenate str (not "int") to str

thread '<unnamed>' (1) panicked at runtime/src/lib.rs:1293:29:
Python function threw an unexpected exception
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
"#;

/// What the TypeScript SDK logged for `raises-type-error`'s `selectInstance`, in a component
/// built by ComponentizeJS 0.23 (SpiderMonkey's stack).
const JAVASCRIPT_LOGGED: &str = "select-instance: uncaught TypeError: family is not a function
instanceTypeFor@component.js:193:10
selectInstance@component.js:198:45
selectInstance@component.js:110:25
exportPolicy/<.selectInstance<@component.js:139:33
exportPolicy/guard/<@component.js:125:14
export_policy_0_3_0$selectInstance@/tmp/4b3936fe76a5/sources/initializer.js:510:29
";

/// A map of `component.js` in which line 193 is `src/plugin.ts` line 9 and lines 110 to 139
/// are the SDK's `orca-plugin/plugin.ts` line 80 (the mappings say so: line 110's segment
/// starts source 1 at line 79, 0-based).
fn component_map() -> SourceMap {
    // 109 lines with no mapping, then `orca-plugin/plugin.ts` line 80 for lines 110 to 192
    // (source +1: `C`, line +79: `+E`; then each `AAAA`: same source, same line), then
    // `src/plugin.ts` line 9 on line 193.
    let mut mappings = ";".repeat(109);
    mappings.push_str("AC+EA");
    for _ in 111..193 {
        mappings.push_str(";AAAA");
    }
    // Source 1 → 0 (-1: `D`), line 79 → 8 (-71: `vE`).
    mappings.push_str(";ADvEA");
    let json = format!(
        r#"{{"version": 3, "file": "component.js", "sources": ["src/plugin.ts", "orca-plugin/plugin.ts"], "mappings": "{mappings}"}}"#
    );
    SourceMap::parse(json.as_bytes()).unwrap()
}

fn at(file: &str, line: u32, function: Option<&str>) -> Option<SourceLine> {
    Some(SourceLine {
        file: file.to_owned(),
        line,
        function: function.map(str::to_owned),
    })
}

fn exception(text: &str, at: Option<SourceLine>) -> Option<GuestException> {
    Some(GuestException {
        exception: text.to_owned(),
        at,
    })
}

fn from_stderr(stderr: &str) -> Option<GuestException> {
    GuestException::told_by(CallLeftovers {
        stderr: stderr.as_bytes(),
        ..CallLeftovers::default()
    })
}

#[test]
fn the_component_map_fixture_maps_as_described() {
    let map = component_map();
    let position = |line| map.original(line, 1).map(|p| (p.source.to_owned(), p.line));
    assert_eq!(position(193), Some(("src/plugin.ts".to_owned(), 9)));
    assert_eq!(
        position(125),
        Some(("orca-plugin/plugin.ts".to_owned(), 80))
    );
    assert_eq!(position(109), None);
}

#[test]
fn a_python_traceback_is_told_by_its_exception_and_the_plugins_innermost_line() {
    let type_error = "TypeError: can only concatenate str (not \"int\") to str";
    let with_sources = "Traceback (most recent call last):
  File \"/0/app.py\", line 23, in select_instance
    return [Candidate(instance_type=instance_type_for(pod), reason=\"never reached\")]
                                    ~~~~~~~~~~~~~~~~~^^^^^
  File \"/0/app.py\", line 15, in instance_type_for
    return \"m7i.\" + len(pod.name)
           ~~~~~~~^~~~~~~~~~~~~~~
TypeError: can only concatenate str (not \"int\") to str
";
    let chained = "Traceback (most recent call last):
  File \"/0/app.py\", line 8, in parse
KeyError: 'teams'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File \"/0/app.py\", line 10, in parse
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
";
    let in_the_sdk = "Traceback (most recent call last):
  File \"/1/orca_plugin/plugin.py\", line 81, in _call
  File \"/0/teams/select.py\", line 40, in pick
  File \"/1/orca_plugin/quantity.py\", line 12, in parse
  File \"/python/re/__init__.py\", line 177, in match
TypeError: expected string or bytes-like object, got 'int'
";
    let only_the_sdk = "Traceback (most recent call last):
  File \"/1/orca_plugin/plugin.py\", line 81, in _call
StopIteration
";
    let header_cut_off = format!(
        "{}\n  File \"/0/app.py\", line 15, in instance_type_for\nTypeError: x\n",
        "junk ".repeat(STDERR_TAIL_BYTES)
    );
    let cases: Vec<(&str, &str, Option<GuestException>)> = vec![
        (
            "componentize-py's stderr",
            PYTHON_STDERR,
            exception(type_error, at("app.py", 15, Some("instance_type_for"))),
        ),
        (
            "source lines and markers under the frames",
            with_sources,
            exception(type_error, at("app.py", 15, Some("instance_type_for"))),
        ),
        (
            "the last of chained exceptions",
            chained,
            exception(
                "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
                at("app.py", 10, Some("parse")),
            ),
        ),
        (
            "raised in the SDK and the library, called from the plugin's code",
            in_the_sdk,
            exception(
                "TypeError: expected string or bytes-like object, got 'int'",
                at("teams/select.py", 40, Some("pick")),
            ),
        ),
        (
            "no frame of the plugin's: the innermost",
            only_the_sdk,
            exception(
                "StopIteration",
                at("orca_plugin/plugin.py", 81, Some("_call")),
            ),
        ),
        (
            "the header cut off the end that is read",
            &header_cut_off,
            exception("TypeError: x", at("app.py", 15, Some("instance_type_for"))),
        ),
        (
            "a message of two lines",
            "  File \"/0/app.py\", line 3, in f\nValueError: first\nsecond\n\nafter\n",
            exception("ValueError: first\nsecond", at("app.py", 3, Some("f"))),
        ),
        ("no traceback", "hello\nworld\n", None),
        (
            "a header alone",
            "Traceback (most recent call last):\n",
            None,
        ),
        (
            "frames but no exception",
            "Traceback (most recent call last):\n  File \"/0/app.py\", line 3, in f\n",
            None,
        ),
        (
            "not an exception's name after the frames",
            "  File \"/0/app.py\", line 3, in f\nthe end: of it\n",
            None,
        ),
        (
            "a frame's line that is not a number",
            "  File \"/0/app.py\", line x, in f\nTypeError: y\n",
            None,
        ),
    ];
    for (case, stderr, expected) in cases {
        assert_eq!(from_stderr(stderr), expected, "{case}");
    }
}

#[test]
fn a_javascript_exception_is_told_at_the_typescript_line_of_the_plugins_code() {
    let map = component_map();
    let told = |logged: &str, map: Option<&SourceMap>| {
        GuestException::told_by(CallLeftovers {
            stderr: b"",
            error_logged: Some(logged),
            source_map: map,
        })
    };
    let type_error = "TypeError: family is not a function";
    // The SDK's frames come first here: the plugin's own is still the one shown.
    let sdk_first = "build-tags: uncaught RangeError: too deep
exportPolicy/guard/<@component.js:125:14
instanceTypeFor@component.js:193:10
";
    let cases: Vec<(&str, &str, Option<&SourceMap>, Option<GuestException>)> = vec![
        (
            "mapped to the plugin's TypeScript",
            JAVASCRIPT_LOGGED,
            Some(&map),
            exception(type_error, at("src/plugin.ts", 9, Some("instanceTypeFor"))),
        ),
        (
            "a plugin built without a map: the bundle's line",
            JAVASCRIPT_LOGGED,
            None,
            exception(type_error, at("component.js", 193, Some("instanceTypeFor"))),
        ),
        (
            "past the SDK's frames",
            sdk_first,
            Some(&map),
            exception(
                "RangeError: too deep",
                at("src/plugin.ts", 9, Some("instanceTypeFor")),
            ),
        ),
        (
            "a message of two lines, and top-level code",
            "info: uncaught Error: first\nsecond\n@component.js:193:1\n",
            Some(&map),
            exception("Error: first\nsecond", at("src/plugin.ts", 9, None)),
        ),
        (
            "no stack",
            "select-instance: uncaught TypeError: x\n",
            Some(&map),
            exception("TypeError: x", None),
        ),
        (
            "a frame of another file is not mapped",
            "select-instance: uncaught TypeError: x\nf@other.js:193:10\n",
            Some(&map),
            exception("TypeError: x", at("other.js", 193, Some("f"))),
        ),
        (
            "the plugin's own error log is no exception",
            "could not reach the catalogue: timeout",
            Some(&map),
            None,
        ),
    ];
    for (case, logged, map, expected) in cases {
        assert_eq!(told(logged, map), expected, "{case}");
    }
}

#[test]
fn the_sdks_record_is_read_before_stderr_and_stderr_when_it_is_not_an_exception() {
    let both = CallLeftovers {
        stderr: PYTHON_STDERR.as_bytes(),
        error_logged: Some(JAVASCRIPT_LOGGED),
        source_map: None,
    };
    let told = GuestException::told_by(both).unwrap();
    assert_eq!(told.exception, "TypeError: family is not a function");
    let plugin_error = CallLeftovers {
        error_logged: Some("something the plugin logged"),
        ..both
    };
    let told = GuestException::told_by(plugin_error).unwrap();
    assert_eq!(told.at, at("app.py", 15, Some("instance_type_for")));
}

#[test]
fn a_rust_panic_is_told_by_its_message_and_place() {
    let panic = exception(
        "panic: hostile plugin panics on purpose",
        at("tests/plugins/hostile/src/lib.rs", 42, None),
    );
    for (stderr, expected) in [
        (
            "thread '<unnamed>' (1) panicked at tests/plugins/hostile/src/lib.rs:42:9:\nhostile plugin panics on purpose\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n",
            panic.clone(),
        ),
        (
            "thread '<unnamed>' panicked at tests/plugins/hostile/src/lib.rs:42:9:\nhostile plugin panics on purpose\n",
            panic,
        ),
        ("thread '<unnamed>' panicked at nowhere:\nboom\n", None),
    ] {
        assert_eq!(from_stderr(stderr), expected, "{stderr}");
    }
}

#[test]
fn what_a_plugin_writes_is_bounded() {
    let long_message = format!(
        "  File \"/0/app.py\", line 3, in f\nValueError: {}\n",
        "é".repeat(STDERR_TAIL_BYTES / 4)
    );
    let told = from_stderr(&long_message).unwrap();
    assert!(told.exception.len() <= MAX_EXCEPTION_BYTES + '…'.len_utf8());
    assert!(told.exception.starts_with("ValueError: éé"));
    assert!(told.exception.ends_with('…'));
    // A message longer than the end that is read leaves no frame to read.
    let huge_message = format!(
        "  File \"/0/app.py\", line 3, in f\nValueError: {}\n",
        "é".repeat(1 << 20)
    );
    assert_eq!(from_stderr(&huge_message), None);

    let huge_file = format!(
        "  File \"/0/{}.py\", line 3, in {}\nValueError: x\n",
        "d/".repeat(1 << 11),
        "f".repeat(1 << 12)
    );
    let told = from_stderr(&huge_file).unwrap();
    let at = told.at.unwrap();
    assert!(
        at.file.len() <= MAX_NAME_BYTES + '…'.len_utf8(),
        "{}",
        at.file
    );
    assert!(at.function.unwrap().len() <= MAX_NAME_BYTES + '…'.len_utf8());

    // Megabytes of lines after a traceback: it is past the end that is read.
    let buried = format!("{PYTHON_STDERR}{}", "x\n".repeat(1 << 20));
    assert_eq!(from_stderr(&buried), None);
    // Bytes that are not UTF-8 are read as far as they go.
    let mut bytes = b"\xff\xfe".to_vec();
    bytes.extend_from_slice(PYTHON_STDERR.as_bytes());
    let told = GuestException::told_by(CallLeftovers {
        stderr: &bytes,
        ..CallLeftovers::default()
    });
    assert!(told.is_some());
}

#[test]
fn the_exception_reads_with_its_place() {
    let mut told = GuestException {
        exception: "TypeError: x".to_owned(),
        at: at("src/plugin.ts", 9, Some("instanceTypeFor")),
    };
    assert_eq!(
        told.to_string(),
        "TypeError: x (src/plugin.ts:9, in instanceTypeFor)"
    );
    told.at = at("src/lib.rs", 42, None);
    assert_eq!(told.to_string(), "TypeError: x (src/lib.rs:42)");
    told.at = None;
    assert_eq!(told.to_string(), "TypeError: x");
}

#[test]
fn only_an_abort_may_be_an_exception_the_runtime_told_of() {
    for (trap, expected) in [
        (Trap::UnreachableCodeReached, true),
        (Trap::Interrupt, false),
        (Trap::MemoryOutOfBounds, false),
        (Trap::StackOverflow, false),
        (Trap::IntegerDivisionByZero, false),
    ] {
        assert_eq!(GuestException::may_explain(trap), expected, "{trap:?}");
    }
}
