//! The plugins orca can call, by name: the embedded defaults plus the plugins directory.
//!
//! The set is immutable once built and swapped as a whole (arc-swap): a decision takes the
//! current set when it starts and finishes on it, whatever reloads happen meanwhile. A file
//! whose new bytes do not load keeps its previous version serving.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use super::embedded::EmbeddedPlugin;
use super::oci::Signer;
use super::wasm::{CatalogueQuery, Hook, LoadError, LoadedPlugin, PluginEngine};
use crate::support::errors::lock;

/// Where a plugin's bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginSource {
    Embedded,
    File(PathBuf),
    /// Pulled from an OCI registry: the reference as configured.
    Registry(String),
}

impl fmt::Display for PluginSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginSource::Embedded => f.write_str("embedded"),
            PluginSource::File(path) => write!(f, "{}", path.display()),
            PluginSource::Registry(reference) => f.write_str(reference),
        }
    }
}

/// A loaded plugin and its origin.
pub struct RegisteredPlugin {
    pub plugin: LoadedPlugin,
    pub source: PluginSource,
    /// Who signed it: a pulled plugin that `policy.registry.verify` covers.
    pub signer: Option<Signer>,
}

impl RegisteredPlugin {
    pub fn implements(&self, hook: Hook) -> bool {
        self.plugin.hooks.contains(&hook)
    }
}

/// Why one plugin file could not be loaded ([`PluginRegistry::load_file`]).
#[derive(Debug, thiserror::Error)]
pub enum LoadFileError {
    #[error("reading {}: {source}", .path.display())]
    ReadFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {source}", .path.display())]
    LoadFailed {
        path: PathBuf,
        #[source]
        source: LoadError,
    },
}

/// One consistent view of the loaded plugins.
#[derive(Default)]
pub struct PluginSet {
    by_name: BTreeMap<String, Arc<RegisteredPlugin>>,
}

impl PluginSet {
    pub fn get(&self, name: &str) -> Option<&Arc<RegisteredPlugin>> {
        self.by_name.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RegisteredPlugin>> {
        self.by_name.values()
    }
}

/// What happened to one plugin file in a rescan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadEvent {
    Loaded {
        path: PathBuf,
        name: String,
        version: String,
        sha256: String,
    },
    /// New bytes that did not load; `kept` names the version still serving, if any.
    Rejected {
        path: PathBuf,
        error: String,
        kept: Option<String>,
    },
    Removed {
        path: PathBuf,
        name: String,
    },
    /// Two files report the same plugin name; the later path (by name order) is used.
    Shadowed {
        path: PathBuf,
        name: String,
        by: PathBuf,
    },
}

/// A plugin file as last seen.
struct FileState {
    /// The bytes' sha256 as last loaded or refused for good: unchanged bytes are not loaded
    /// again. A load that ran out of time leaves it as it was, so the next rescan retries.
    seen_sha256: String,
    /// The last version of this file that loaded.
    serving: Option<Arc<RegisteredPlugin>>,
}

/// The registry: loads, rescans, and publishes plugin sets.
pub struct PluginRegistry {
    engine: Arc<PluginEngine>,
    catalogue: Arc<dyn CatalogueQuery>,
    embedded: Mutex<Vec<Arc<RegisteredPlugin>>>,
    /// Embedded plugins whose loads kept running out of time (a machine too busy at startup):
    /// orca starts without them, its policy not ready while a chain needs them, and loads
    /// them again from [`PluginRegistry::load_pending_embedded`].
    pending_embedded: Mutex<Vec<EmbeddedPlugin>>,
    files: Mutex<BTreeMap<PathBuf, FileState>>,
    /// Plugins pulled from registries, by configured reference.
    pulled: Mutex<BTreeMap<String, FileState>>,
    current: ArcSwap<PluginSet>,
}

impl PluginRegistry {
    /// Loads the embedded plugins. One that keeps running out of time is left pending rather
    /// than keeping orca from starting (and its Node from registering).
    ///
    /// # Errors
    /// [`LoadError`] if an embedded plugin's bytes do not load, which is a build defect.
    pub fn new(
        engine: Arc<PluginEngine>,
        catalogue: Arc<dyn CatalogueQuery>,
        embedded: &[EmbeddedPlugin],
    ) -> Result<PluginRegistry, LoadError> {
        let mut loaded = Vec::new();
        let mut pending = Vec::new();
        for plugin in embedded {
            match load_retrying(&engine, plugin.bytes, &catalogue) {
                Ok(plugin) => loaded.push(Arc::new(RegisteredPlugin {
                    plugin,
                    source: PluginSource::Embedded,
                    signer: None,
                })),
                Err(error) if error.is_transient() => {
                    tracing::error!(package = plugin.package, %error, "an embedded plugin kept running out of time while loading; starting without it and loading it again in the background");
                    pending.push(*plugin);
                }
                Err(error) => return Err(error),
            }
        }
        let registry = PluginRegistry {
            engine,
            catalogue,
            embedded: Mutex::new(loaded),
            pending_embedded: Mutex::new(pending),
            files: Mutex::new(BTreeMap::new()),
            pulled: Mutex::new(BTreeMap::new()),
            current: ArcSwap::from_pointee(PluginSet::default()),
        };
        registry.publish(&lock(&registry.files));
        Ok(registry)
    }

    /// Whether some embedded plugin is still to be loaded.
    pub fn has_pending_embedded(&self) -> bool {
        !lock(&self.pending_embedded).is_empty()
    }

    /// Tries each pending embedded plugin once more; those that load join the set.
    pub fn load_pending_embedded(&self) -> Vec<ReloadEvent> {
        // Loads run one at a time (the sandbox pool holds one load beside the decisions):
        // the files lock is what a rescan holds while it loads.
        let files = lock(&self.files);
        let mut pending = lock(&self.pending_embedded);
        let mut events = Vec::new();
        let mut still = Vec::new();
        for embedded in pending.drain(..) {
            let path = PathBuf::from(format!("(embedded {})", embedded.package));
            match LoadedPlugin::load(&self.engine, embedded.bytes, &self.catalogue) {
                Ok(plugin) => {
                    events.push(ReloadEvent::Loaded {
                        path,
                        name: plugin.name.clone(),
                        version: plugin.version.clone(),
                        sha256: plugin.sha256.clone(),
                    });
                    lock(&self.embedded).push(Arc::new(RegisteredPlugin {
                        plugin,
                        source: PluginSource::Embedded,
                        signer: None,
                    }));
                }
                Err(error) => {
                    let transient = error.is_transient();
                    events.push(rejected(&path, error.to_string(), None));
                    if transient {
                        still.push(embedded);
                    }
                }
            }
        }
        *pending = still;
        drop(pending);
        events.extend(self.publish(&files));
        events
    }

    /// The plugins as of now; hold it for the length of one decision.
    pub fn current(&self) -> Arc<PluginSet> {
        self.current.load_full()
    }

    pub fn engine(&self) -> &Arc<PluginEngine> {
        &self.engine
    }

    pub fn catalogue(&self) -> &Arc<dyn CatalogueQuery> {
        &self.catalogue
    }

    /// Brings the set in line with the `.wasm` files in `dir`: new and changed files are
    /// loaded, removed ones dropped, and the new set published in one swap. Entries starting
    /// with `.` are skipped: a ConfigMap volume keeps its real files under `..data`, and the
    /// visible names are symlinks into it, which are followed.
    pub fn rescan(&self, dir: &Path) -> Vec<ReloadEvent> {
        let mut events = Vec::new();
        let present = match wasm_files(dir) {
            Ok(present) => present,
            Err(error) => {
                events.push(ReloadEvent::Rejected {
                    path: dir.to_path_buf(),
                    error: format!("reading the plugins directory: {error}"),
                    kept: None,
                });
                return events;
            }
        };
        let mut files = lock(&self.files);
        drop_gone(&mut files, &present, &mut events);
        for path in present {
            self.rescan_file(&mut files, path, &mut events);
        }
        events.extend(self.publish(&files));
        self.prune_compiled(&files);
        events
    }

    /// Loads the file at `path` when its bytes changed since they were last seen, in place of
    /// the version it served (which keeps serving when the new bytes do not load).
    fn rescan_file(
        &self,
        files: &mut BTreeMap<PathBuf, FileState>,
        path: PathBuf,
        events: &mut Vec<ReloadEvent>,
    ) {
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            // Removed between listing and reading: the next rescan sees it gone.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return,
            Err(error) => {
                let kept = files.get(&path).and_then(|f| f.serving.clone());
                events.push(rejected(
                    &path,
                    format!("reading it: {error}"),
                    kept.as_deref(),
                ));
                return;
            }
        };
        let sha256 = super::wasm::sha256_hex(&bytes);
        let state = files.entry(path.clone()).or_insert_with(|| FileState {
            seen_sha256: String::new(),
            serving: None,
        });
        if state.seen_sha256 == sha256 {
            return;
        }
        match LoadedPlugin::load(&self.engine, &bytes, &self.catalogue) {
            Ok(plugin) => {
                state.seen_sha256 = sha256;
                events.push(ReloadEvent::Loaded {
                    path: path.clone(),
                    name: plugin.name.clone(),
                    version: plugin.version.clone(),
                    sha256: plugin.sha256.clone(),
                });
                state.serving = Some(Arc::new(RegisteredPlugin {
                    plugin,
                    source: PluginSource::File(path),
                    signer: None,
                }));
            }
            Err(error) => {
                if !error.is_transient() {
                    state.seen_sha256 = sha256;
                }
                events.push(rejected(&path, error.to_string(), state.serving.as_deref()));
            }
        }
    }

    /// Drops the compiled code of every plugin no longer embedded, in a file or pulled.
    fn prune_compiled(&self, files: &BTreeMap<PathBuf, FileState>) {
        let embedded = lock(&self.embedded);
        let pulled = lock(&self.pulled);
        let keep: HashSet<&str> = embedded
            .iter()
            .chain(files.values().filter_map(|f| f.serving.as_ref()))
            .chain(pulled.values().filter_map(|f| f.serving.as_ref()))
            .map(|p| p.plugin.sha256.as_str())
            .collect();
        self.engine.prune_compile_cache(&keep);
        drop(pulled);
        drop(embedded);
    }

    /// Loads the verified bytes pulled for `reference` (signed by `signer`, when its signature
    /// was checked) and publishes them in place of what it served before; bytes that do not
    /// load leave the previous version serving.
    pub fn offer_pulled(
        &self,
        reference: &str,
        bytes: &[u8],
        signer: Option<Signer>,
    ) -> Vec<ReloadEvent> {
        // Loads run one at a time: the files lock is what every load holds.
        let files = lock(&self.files);
        let mut pulled = lock(&self.pulled);
        let path = PathBuf::from(reference);
        let sha256 = super::wasm::sha256_hex(bytes);
        let state = pulled
            .entry(reference.to_owned())
            .or_insert_with(|| FileState {
                seen_sha256: String::new(),
                serving: None,
            });
        if state.seen_sha256 == sha256 {
            return Vec::new();
        }
        let mut events = Vec::new();
        match LoadedPlugin::load(&self.engine, bytes, &self.catalogue) {
            Ok(plugin) => {
                state.seen_sha256 = sha256;
                events.push(ReloadEvent::Loaded {
                    path,
                    name: plugin.name.clone(),
                    version: plugin.version.clone(),
                    sha256: plugin.sha256.clone(),
                });
                state.serving = Some(Arc::new(RegisteredPlugin {
                    plugin,
                    source: PluginSource::Registry(reference.to_owned()),
                    signer,
                }));
            }
            Err(error) => {
                if !error.is_transient() {
                    state.seen_sha256 = sha256;
                }
                events.push(rejected(&path, error.to_string(), state.serving.as_deref()));
            }
        }
        drop(pulled);
        events.extend(self.publish(&files));
        events
    }

    /// What a failed pull of `reference` reports: the error, and the version still serving.
    pub fn pull_failed(&self, reference: &str, error: String) -> ReloadEvent {
        let pulled = lock(&self.pulled);
        let kept = pulled.get(reference).and_then(|f| f.serving.as_deref());
        rejected(Path::new(reference), error, kept)
    }

    /// Loads one file outside any directory scan (`orca plugin eval`/`bench`) and publishes it.
    ///
    /// # Errors
    /// [`LoadFileError`]: the file cannot be read, or its bytes do not load.
    pub fn load_file(&self, path: &Path) -> Result<Arc<RegisteredPlugin>, LoadFileError> {
        let bytes = std::fs::read(path).map_err(|source| LoadFileError::ReadFailed {
            path: path.to_path_buf(),
            source,
        })?;
        let plugin =
            LoadedPlugin::load(&self.engine, &bytes, &self.catalogue).map_err(|source| {
                LoadFileError::LoadFailed {
                    path: path.to_path_buf(),
                    source,
                }
            })?;
        let plugin = Arc::new(RegisteredPlugin {
            plugin,
            source: PluginSource::File(path.to_path_buf()),
            signer: None,
        });
        let mut files = lock(&self.files);
        files.insert(
            path.to_path_buf(),
            FileState {
                seen_sha256: plugin.plugin.sha256.clone(),
                serving: Some(plugin.clone()),
            },
        );
        self.publish(&files);
        Ok(plugin)
    }

    /// Builds and swaps in the set: embedded plugins, overridden by pulled ones of the same
    /// name, overridden by files of the same name (the operator's local override).
    fn publish(&self, files: &BTreeMap<PathBuf, FileState>) -> Vec<ReloadEvent> {
        let mut shadowed = Vec::new();
        let mut by_name: BTreeMap<String, Arc<RegisteredPlugin>> = lock(&self.embedded)
            .iter()
            .map(|p| (p.plugin.name.clone(), p.clone()))
            .collect();
        for plugin in lock(&self.pulled)
            .values()
            .filter_map(|f| f.serving.clone())
        {
            by_name.insert(plugin.plugin.name.clone(), plugin);
        }
        for plugin in files.values().filter_map(|f| f.serving.clone()) {
            let name = plugin.plugin.name.clone();
            if let Some(previous) = by_name.insert(name.clone(), plugin.clone())
                && let (PluginSource::File(path), PluginSource::File(by)) =
                    (&previous.source, &plugin.source)
            {
                shadowed.push(ReloadEvent::Shadowed {
                    path: path.clone(),
                    name,
                    by: by.clone(),
                });
            }
        }
        self.current.store(Arc::new(PluginSet { by_name }));
        shadowed
    }
}

/// Loads tried before an embedded plugin that keeps running out of time is given up on.
const EMBEDDED_LOAD_ATTEMPTS: usize = 3;

/// Forgets the files no longer `present`, an event for each that served a plugin.
fn drop_gone(
    files: &mut BTreeMap<PathBuf, FileState>,
    present: &[PathBuf],
    events: &mut Vec<ReloadEvent>,
) {
    let gone: Vec<PathBuf> = files
        .keys()
        .filter(|path| !present.contains(path))
        .cloned()
        .collect();
    for path in gone {
        if let Some(FileState {
            serving: Some(old), ..
        }) = files.remove(&path)
        {
            events.push(ReloadEvent::Removed {
                path,
                name: old.plugin.name.clone(),
            });
        }
    }
}

/// Loads `bytes`, again while the load runs out of time (a machine too busy to answer within
/// the load timeout), at most [`EMBEDDED_LOAD_ATTEMPTS`] times.
fn load_retrying(
    engine: &PluginEngine,
    bytes: &[u8],
    catalogue: &Arc<dyn CatalogueQuery>,
) -> Result<LoadedPlugin, LoadError> {
    let mut attempt = 1;
    loop {
        match LoadedPlugin::load(engine, bytes, catalogue) {
            Err(error) if error.is_transient() && attempt < EMBEDDED_LOAD_ATTEMPTS => {
                tracing::warn!(%error, attempt, "loading an embedded plugin ran out of time; trying again");
                attempt += 1;
            }
            result => return result,
        }
    }
}

fn rejected(path: &Path, error: String, kept: Option<&RegisteredPlugin>) -> ReloadEvent {
    ReloadEvent::Rejected {
        path: path.to_path_buf(),
        error,
        kept: kept.map(|p| {
            format!(
                "{} {} (sha256 {})",
                p.plugin.name, p.plugin.version, p.plugin.sha256
            )
        }),
    }
}

/// The `.wasm` entries of `dir` (not starting with `.`), sorted.
fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".wasm") {
            continue;
        }
        // Follows symlinks: a ConfigMap key is a link into `..data`.
        if entry.path().is_file() {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}
