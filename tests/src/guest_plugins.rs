//! Policy plugins written in Python and TypeScript, built from the SDKs' sources
//! (`plugin-sdk/python`, `plugin-sdk/js`) with their own `build` scripts, once per test process:
//! each SDK's example team selector, its test plugin that calls every helper the SDK exports, and
//! its test plugin whose `select-instance` raises a `TypeError`.
//!
//! A component built this way is new to orca every time (neither componentize-py nor
//! ComponentizeJS builds reproducibly, so its sha256 changes), and compiling an 12 to 19 MB
//! component takes a debug orca minutes. So each build is followed by one `orca plugin eval`,
//! which leaves the compiled plugin in the user's compile cache (`~/.cache/orca/plugins`): the
//! tests' orca processes and `orca plugin eval` runs then load it in milliseconds instead of
//! each compiling it at once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use anyhow::{Context, Result, ensure};

use crate::cluster::repo_root;

/// A guest language with an SDK, and its example team selector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Python,
    TypeScript,
}

impl Language {
    /// The name the example team selector reports (`info`), which chains name.
    pub fn team_selector_name(self) -> &'static str {
        match self {
            Language::Python => "team-selector-py",
            Language::TypeScript => "team-selector-js",
        }
    }

    /// The SDK's build script, relative to the repository.
    fn build_script(self) -> &'static str {
        match self {
            Language::Python => "plugin-sdk/python/build",
            Language::TypeScript => "plugin-sdk/js/build",
        }
    }

    /// The example's source folder, relative to the repository.
    fn team_selector_source(self) -> &'static str {
        match self {
            Language::Python => "plugin-sdk/python/examples/team_selector",
            Language::TypeScript => "plugin-sdk/js/examples/team-selector",
        }
    }

    /// The name the SDK's every-helper test plugin reports (`info`).
    pub fn every_helper_name(self) -> &'static str {
        match self {
            Language::Python => "every-helper-py",
            Language::TypeScript => "every-helper-js",
        }
    }

    /// The SDK's test plugin that calls every helper the SDK exports, relative to the repository.
    fn every_helper_source(self) -> &'static str {
        match self {
            Language::Python => "plugin-sdk/python/tests/every_helper",
            Language::TypeScript => "plugin-sdk/js/tests/every-helper",
        }
    }

    /// The name the SDK's test plugin that raises a `TypeError` reports (`info`).
    pub fn raises_type_error_name(self) -> &'static str {
        match self {
            Language::Python => "raises-type-error-py",
            Language::TypeScript => "raises-type-error-js",
        }
    }

    /// The SDK's test plugin whose `select-instance` raises a `TypeError`, relative to the
    /// repository.
    fn raises_type_error_source(self) -> &'static str {
        match self {
            Language::Python => "plugin-sdk/python/tests/raises_type_error",
            Language::TypeScript => "plugin-sdk/js/tests/raises-type-error",
        }
    }

    /// The raising plugin's source file, as its author names it (relative to the plugin's
    /// folder), and the comment that marks the line that raises.
    fn raising_file(self) -> (&'static str, &'static str) {
        match self {
            Language::Python => ("app.py", "# raises here"),
            Language::TypeScript => ("src/plugin.ts", "// throws here"),
        }
    }
}

/// Where the SDK's raising test plugin of `language` raises its `TypeError`, as orca should tell
/// it: `app.py:15`, `src/plugin.ts:9` (the line of its source marked so, read from the file).
pub fn raising_line(language: Language) -> Result<String> {
    let (file, marker) = language.raising_file();
    let path = repo_root()
        .join(language.raises_type_error_source())
        .join(file);
    let source =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let line = source
        .lines()
        .position(|line| line.contains(marker))
        .with_context(|| format!("{} has no line marked {marker:?}", path.display()))?;
    Ok(format!("{file}:{}", line + 1))
}

/// Which plugin of an SDK's sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    TeamSelector,
    EveryHelper,
    RaisesTypeError,
}

impl Source {
    fn name(self, language: Language) -> &'static str {
        match self {
            Source::TeamSelector => language.team_selector_name(),
            Source::EveryHelper => language.every_helper_name(),
            Source::RaisesTypeError => language.raises_type_error_name(),
        }
    }

    fn folder(self, language: Language) -> &'static str {
        match self {
            Source::TeamSelector => language.team_selector_source(),
            Source::EveryHelper => language.every_helper_source(),
            Source::RaisesTypeError => language.raises_type_error_source(),
        }
    }

    /// Whether `orca plugin eval` of the warm-up pod decides it (exit 0): the raising plugin
    /// fails every pod (exit 1).
    fn decides(self) -> bool {
        self != Source::RaisesTypeError
    }
}

/// The example team selector of `language` as a component, built from source (and compiled
/// into orca's compile cache) the first time a test of this process asks.
pub fn team_selector_wasm(language: Language) -> Result<PathBuf> {
    built_once(language, Source::TeamSelector)
}

/// The SDK's every-helper test plugin of `language` as a component, built from source with the
/// SDK's `build` (the path users take) and compiled into orca's compile cache by one
/// `orca plugin eval`, which runs its checks: a helper that breaks the build, or fails a check
/// inside the component, fails here with the build's or orca's output.
pub fn every_helper_wasm(language: Language) -> Result<PathBuf> {
    built_once(language, Source::EveryHelper)
}

/// The SDK's test plugin of `language` whose `select-instance` raises a `TypeError` (at
/// [`raising_line`]), built from source with the SDK's `build` and compiled into orca's compile
/// cache by one `orca plugin eval`, which must fail the pod.
pub fn raises_type_error_wasm(language: Language) -> Result<PathBuf> {
    built_once(language, Source::RaisesTypeError)
}

/// [`build_and_compile`] of `source` in `language`, once per test process: later asks get the
/// first answer, an error included. Each plugin has a cell of its own, so different plugins
/// build at the same time.
fn built_once(language: Language, source: Source) -> Result<PathBuf> {
    static BUILT: [OnceLock<Result<PathBuf, String>>; 6] = [const { OnceLock::new() }; 6];
    let cell = &BUILT[match (source, language) {
        (Source::TeamSelector, Language::Python) => 0,
        (Source::TeamSelector, Language::TypeScript) => 1,
        (Source::EveryHelper, Language::Python) => 2,
        (Source::EveryHelper, Language::TypeScript) => 3,
        (Source::RaisesTypeError, Language::Python) => 4,
        (Source::RaisesTypeError, Language::TypeScript) => 5,
    }];
    cell.get_or_init(|| build_and_compile(language, source).map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn build_and_compile(language: Language, source: Source) -> Result<PathBuf> {
    let out_dir = output_dir()?;
    std::fs::create_dir_all(&out_dir)?;
    let out = out_dir.join(format!("{}.wasm", source.name(language)));
    let started = Instant::now();
    build(language, source, &out)?;
    let built = started.elapsed();
    warm_compile_cache(&out, &out_dir, source.decides())?;
    println!(
        "{}: built from {} in {built:.1?}, compiled by orca in {:.1?}",
        source.name(language),
        source.folder(language),
        started.elapsed() - built
    );
    Ok(out)
}

/// `<build script> --skip-tests <source folder> <out>`; the script installs its pinned tools
/// on first use. The plugin's own tests are not the build's here: `tests/run` runs the SDKs'
/// unit tests (`build test`), and `tests/e2e/languages.rs` runs the examples' cases on this build,
/// once orca has compiled it.
fn build(language: Language, source: Source, out: &Path) -> Result<()> {
    let root = repo_root();
    let output = Command::new(root.join(language.build_script()))
        .arg("--skip-tests")
        .arg(root.join(source.folder(language)))
        .arg(out)
        .current_dir(root)
        .output()
        .with_context(|| format!("running {}", language.build_script()))?;
    ensure!(
        output.status.success(),
        "{} {} failed ({}):\n{}{}",
        language.build_script(),
        source.folder(language),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// One `orca plugin eval` of the component (a pod of no team, which both examples decline with
/// these settings, and the every-helper plugins answer when their checks pass), which compiles
/// it into the compile cache every orca of this user shares. It must decide the pod (exit 0),
/// or, for a plugin that fails every pod, say the pod would fail (not refuse the plugin).
fn warm_compile_cache(wasm: &Path, out_dir: &Path, decides: bool) -> Result<()> {
    let pod = out_dir.join("warm-pod.yaml");
    std::fs::write(
        &pod,
        "metadata: {name: warm}\nspec:\n  containers:\n  - name: main\n    image: busybox\n",
    )?;
    let output = Command::new(crate::orca::orca_binary())
        .args(["plugin", "eval", "-o", "json", "--plugin"])
        .arg(wasm)
        .arg("--pod")
        .arg(&pod)
        .args(["--settings", r#"{"teams": {}}"#])
        .output()
        .context("running orca plugin eval")?;
    // (A refused plugin is exit 1 too: the pod's failure is what the CLI says.)
    let failed_the_pod = output.status.code() == Some(1)
        && String::from_utf8_lossy(&output.stderr).contains("the pod would fail");
    ensure!(
        if decides {
            output.status.success()
        } else {
            failed_the_pod
        },
        "orca plugin eval --plugin {} failed ({}):\n{}{}",
        wasm.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

/// `<target>/guest-plugins`, beside the wasm32-wasip2 Rust plugins, whatever CARGO_TARGET_DIR
/// was: rebuilt over on every test process, never accumulating.
fn output_dir() -> Result<PathBuf> {
    // <target>/debug/deps/<test binary> → <target>.
    let exe = std::env::current_exe().context("locating the test binary")?;
    let target = exe
        .ancestors()
        .nth(3)
        .context("the test binary is not in a cargo target directory")?;
    Ok(target.join("guest-plugins"))
}
