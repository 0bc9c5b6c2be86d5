use super::*;

const PAGE: u64 = 64 << 10;

fn footprint(wat: &str) -> StartFootprint {
    let bytes = wat::parse_str(wat).unwrap_or_else(|error| panic!("{wat}: {error}"));
    StartFootprint::of(&bytes).unwrap_or_else(|| panic!("{wat}: no footprint"))
}

fn memory(bytes: u64) -> StartFootprint {
    StartFootprint {
        memory_bytes: bytes,
        table_elements: 0,
    }
}

#[test]
fn the_footprint_counts_what_each_instantiation_creates() {
    let cases: [(&str, &str, StartFootprint); 10] = [
        (
            "a core module alone, as if instantiated once",
            "(module (memory 2) (table 3 funcref))",
            StartFootprint {
                memory_bytes: 2 * PAGE,
                table_elements: 3,
            },
        ),
        (
            "a module instantiated once",
            "(component (core module $m (memory 1)) (core instance (instantiate $m)))",
            memory(PAGE),
        ),
        (
            "a module instantiated twice holds two memories",
            "(component (core module $m (memory 1))
               (core instance (instantiate $m)) (core instance (instantiate $m)))",
            memory(2 * PAGE),
        ),
        (
            "a module never instantiated creates nothing",
            "(component (core module $m (memory 100)))",
            memory(0),
        ),
        (
            "an imported memory is the exporter's, counted once",
            r#"(component
                 (core module $a (memory (export "m") 1))
                 (core module $b (import "a" "m" (memory 1)))
                 (core instance $ia (instantiate $a))
                 (core instance (instantiate $b (with "a" (instance $ia)))))"#,
            memory(PAGE),
        ),
        (
            "a nested component instantiated twice",
            "(component
               (component $c (core module $m (memory 1)) (core instance (instantiate $m)))
               (instance (instantiate $c)) (instance (instantiate $c)))",
            memory(2 * PAGE),
        ),
        (
            "a nested component never instantiated creates nothing",
            "(component
               (component $c (core module $m (memory 1)) (core instance (instantiate $m))))",
            memory(0),
        ),
        (
            "a module aliased from the enclosing component",
            "(component $p
               (core module $m (memory 3))
               (component $c
                 (alias outer $p $m (core module $inner))
                 (core instance (instantiate $inner)))
               (instance (instantiate $c)))",
            memory(3 * PAGE),
        ),
        (
            "an exported module is a new index of the same module",
            r#"(component (core module $m (memory 1))
                 (export "e" (core module $m))
                 (core instance (instantiate 1)))"#,
            memory(PAGE),
        ),
        (
            "a custom page size",
            "(module (memory 3 (pagesize 1)))",
            memory(3),
        ),
    ];
    for (case, wat, expected) in cases {
        assert_eq!(footprint(wat), expected, "{case}");
    }
}

#[test]
fn bytes_that_do_not_parse_have_no_footprint() {
    assert_eq!(StartFootprint::of(b"not wasm"), None);
    assert_eq!(StartFootprint::of(b"\0asm\x01\0\0\0\x05\x7f"), None);
}

#[test]
fn a_start_past_a_limit_names_the_minimum_memory_in_mib_rounded_up() {
    const MIB: u64 = 1 << 20;
    let limits = |memory: usize, tables: usize| SandboxLimits {
        max_memory_bytes: memory,
        max_table_elements: tables,
        ..SandboxLimits::default()
    };
    let cases = [
        (
            "nothing fits anything",
            memory(0),
            limits(1 << 20, 0),
            Ok(()),
        ),
        (
            "exactly the limit fits",
            memory(8 * MIB),
            limits(8 << 20, 10),
            Ok(()),
        ),
        (
            "a byte over asks for the next MiB",
            memory(8 * MIB + 1),
            limits(8 << 20, 10),
            Err(LimitTooSmall::Memory {
                needed_mib: 9,
                allowed_bytes: 8 * MIB,
            }),
        ),
        (
            "an interpreter's snapshot (12.6 MiB) under 8 Mi",
            memory(13_238_272),
            limits(8 << 20, 10),
            Err(LimitTooSmall::Memory {
                needed_mib: 13,
                allowed_bytes: 8 * MIB,
            }),
        ),
        (
            "tables past maxTableElements",
            StartFootprint {
                memory_bytes: MIB,
                table_elements: 11,
            },
            limits(8 << 20, 10),
            Err(LimitTooSmall::TableElements {
                needed: 11,
                allowed: 10,
            }),
        ),
        (
            "memory is named first when both are past",
            StartFootprint {
                memory_bytes: 9 * MIB,
                table_elements: 11,
            },
            limits(8 << 20, 10),
            Err(LimitTooSmall::Memory {
                needed_mib: 9,
                allowed_bytes: 8 * MIB,
            }),
        ),
    ];
    for (case, footprint, limits, expected) in cases {
        assert_eq!(footprint.fits(&limits), expected, "{case}");
    }
}

#[test]
fn the_message_says_what_to_set_and_to_what() {
    let error = LimitTooSmall::Memory {
        needed_mib: 13,
        allowed_bytes: 8 << 20,
    }
    .to_string();
    assert!(error.contains("at least 13 MiB"), "{error}");
    assert!(error.contains("maxMemory (8 MiB)"), "{error}");
    assert!(error.contains("maxMemory: 13Mi or more"), "{error}");
    let error = LimitTooSmall::Memory {
        needed_mib: 2,
        allowed_bytes: 3 << 19,
    }
    .to_string();
    assert!(error.contains("maxMemory (1.5 MiB)"), "{error}");
}
