//! The orca binary runs on jemalloc with orca's settings (`heap::ALLOCATOR_SETTINGS`). The
//! settings reach jemalloc through an exported symbol, and nothing else fails if the linker
//! drops it: the memory figures would quietly fall back to jemalloc's defaults.

use std::process::Command;

#[test]
fn the_binary_hands_its_settings_to_jemalloc() {
    let output = Command::new(env!("CARGO_BIN_EXE_orca"))
        .arg("--version")
        // Asks jemalloc to print every source of settings it read, and what each set.
        .env("_RJEM_MALLOC_CONF", "confirm_conf:true")
        .output()
        .expect("running orca --version");
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let settings = orca::support::heap::ALLOCATOR_SETTINGS.as_str();
    assert!(
        stderr.contains(&format!("global variable malloc_conf): \"{settings}\"")),
        "jemalloc did not read orca's settings:\n{stderr}"
    );
    for setting in settings.split(',') {
        assert!(
            stderr.contains(&format!("Set conf value: {setting}")),
            "jemalloc refused {setting}:\n{stderr}"
        );
    }
}
