//! Compiled plugins on disk, so a restart deserializes in milliseconds instead of compiling.
//!
//! A compiled plugin is native code that orca maps and runs, so the cache is guarded:
//! - the directory is created private (0700) and refused when anyone but orca's user can write
//!   to it, since whoever can write there chooses the code orca runs;
//! - each entry starts with a header naming the component's sha256, the engine's compatibility
//!   hash (wasmtime version, target, every setting that changes generated code) and the sha256
//!   of the compiled bytes, all checked before wasmtime sees the bytes: an entry renamed,
//!   truncated, damaged or built by another engine is discarded and compiled again;
//!   An entry that passes those checks but that wasmtime refuses is left in place: the refusal
//!   may be about this engine's limits (a smaller sandbox), not the entry, and the compile that
//!   follows replaces it when it was the entry;
//! - the serving orca prunes entries of plugins it no longer loads once unused for a while, so
//!   a volume of bounded size (the Deployment's emptyDir) does not fill up with old versions;
//!   `orca plugin` commands, which share the user's cache with other processes, prune nothing.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The first line of every entry: the format, so a future layout is never misread.
const MAGIC: &str = "orca-compiled-plugin-v1";
/// Entries of plugins not loaded are removed once unused this long: long enough that several
/// orca processes sharing a cache (tests, `orca plugin` commands) do not remove each other's.
pub const PRUNE_AFTER: Duration = Duration::from_secs(10 * 60);

/// Whether a process removes the entries of plugins it does not load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePruning {
    /// The serving orca: the cache is its own (the Deployment's emptyDir), and entries of
    /// plugins it no longer loads go once unused for [`PRUNE_AFTER`].
    UnloadedEntries,
    /// `orca plugin` commands: they see a few plugins of the many a shared cache holds for
    /// others (a node run by the same user, other commands), so they remove none.
    Never,
}

impl CachePruning {
    /// Whether an entry goes: one of a component loaded now (`kept`) never does.
    fn removes(self, kept: bool, unused_for: Duration) -> bool {
        match self {
            CachePruning::UnloadedEntries => !kept && unused_for >= PRUNE_AFTER,
            CachePruning::Never => false,
        }
    }
}

/// A directory of precompiled components.
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
    pruning: CachePruning,
}

/// Why a cache directory is not used.
#[derive(Debug, thiserror::Error)]
pub enum CacheDirError {
    #[error("creating it: {0}")]
    Create(std::io::Error),
    #[error("reading its metadata: {0}")]
    Metadata(std::io::Error),
    #[error("it belongs to uid {owner}, not to orca's uid {uid}")]
    NotOwned { owner: u32, uid: u32 },
    #[error(
        "others can write to it (mode {mode:o}), and whoever writes there chooses native code orca runs"
    )]
    WritableByOthers { mode: u32 },
}

/// Why a cache entry is discarded.
#[derive(Debug, thiserror::Error)]
enum EntryError {
    #[error("no {0} in the header")]
    NoField(&'static str),
    #[error("no compiled code after the header")]
    NoCode,
    #[error("format {0:?}, not {magic:?}", magic = MAGIC)]
    OtherFormat(String),
    #[error("compiled from component {found}, not {wanted}")]
    OtherComponent { found: String, wanted: String },
    #[error("compiled by engine {found}, not {wanted}")]
    OtherEngine { found: String, wanted: String },
    #[error("the compiled code does not match its recorded sha256")]
    Damaged,
    /// wasmtime refused the compiled code: its error with its causes.
    #[error("{0}")]
    NotLoadable(String),
}

impl CompileCache {
    /// Creates `dir` (0700) if needed. `None` (with a warning) when it cannot be used:
    /// compiling every time is slower, not wrong.
    pub fn open(dir: &Path, engine: &Engine, pruning: CachePruning) -> Option<CompileCache> {
        if let Err(error) = private_dir(dir) {
            tracing::warn!(dir = %dir.display(), %error, "plugin compile cache not used; plugins are compiled on every start");
            return None;
        }
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Some(CompileCache {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
            pruning,
        })
    }

    fn entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// The file holding the compilation of the component with this sha256, if there is one.
    pub fn entry_path(&self, sha256: &str) -> Option<PathBuf> {
        Some(self.entry(sha256)).filter(|path| path.is_file())
    }

    /// The cached compilation of the component with this sha256, if there is a usable one.
    pub fn get(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry(sha256);
        let bytes = std::fs::read(&path).ok()?;
        let loaded = match self.payload(&bytes, sha256) {
            // SAFETY: the payload is what `put` serialized with an engine of this compatibility
            // hash for this component (the header says so and the payload's sha256 matches),
            // in a directory only orca's user can write; wasmtime checks its own header too.
            #[allow(unsafe_code)]
            Ok(payload) => unsafe { Component::deserialize(engine, payload) }
                .map_err(|error| EntryError::NotLoadable(format!("{error:#}"))),
            Err(why) => Err(why),
        };
        match loaded {
            Ok(component) => {
                // Used now: pruning goes by the last use.
                let _ = std::fs::File::open(&path).and_then(|f| f.set_modified(SystemTime::now()));
                Some(component)
            }
            // Intact, and built for this component by this engine: wasmtime's refusal is about
            // this engine's limits (its pool's slot sizes), under which the compile fails the
            // same way; a process with larger limits loads the entry.
            Err(error @ EntryError::NotLoadable(_)) => {
                tracing::warn!(path = %path.display(), %error, "a cached compiled plugin does not load in this engine; compiling it (the entry stays unless that compile replaces it)");
                None
            }
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "discarding an unusable compiled plugin");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// The compiled bytes of an entry whose header matches `sha256`, this engine and the
    /// payload itself.
    fn payload<'b>(&self, bytes: &'b [u8], sha256: &str) -> Result<&'b [u8], EntryError> {
        let mut lines = bytes.splitn(5, |b| *b == b'\n');
        let mut field = |name: &'static str| {
            lines
                .next()
                .and_then(|line| std::str::from_utf8(line).ok())
                .ok_or(EntryError::NoField(name))
        };
        let (magic, component, engine, digest) = (
            field("format")?,
            field("component sha256")?,
            field("engine hash")?,
            field("payload sha256")?,
        );
        let payload = lines.next().ok_or(EntryError::NoCode)?;
        if magic != MAGIC {
            return Err(EntryError::OtherFormat(magic.to_owned()));
        }
        if component != sha256 {
            return Err(EntryError::OtherComponent {
                found: component.to_owned(),
                wanted: sha256.to_owned(),
            });
        }
        if engine != self.engine_key {
            return Err(EntryError::OtherEngine {
                found: engine.to_owned(),
                wanted: self.engine_key.clone(),
            });
        }
        if digest != hex(&Sha256::digest(payload)) {
            return Err(EntryError::Damaged);
        }
        Ok(payload)
    }

    /// Stores a compilation; failures only cost a recompile later, so they are logged.
    pub fn put(&self, sha256: &str, component: &Component) {
        let path = self.entry(sha256);
        let result = component
            .serialize()
            .map_err(|error| std::io::Error::other(format!("{error:#}")))
            .and_then(|payload| {
                let header = format!(
                    "{MAGIC}\n{sha256}\n{}\n{}\n",
                    self.engine_key,
                    hex(&Sha256::digest(&payload))
                );
                // Write then rename, so a concurrent reader never sees half a file.
                let mut staged = tempfile::NamedTempFile::new_in(&self.dir)?;
                std::io::Write::write_all(&mut staged, header.as_bytes())?;
                std::io::Write::write_all(&mut staged, &payload)?;
                staged.persist(&path).map_err(|error| error.error)?;
                Ok(())
            });
        if let Err(error) = result {
            tracing::warn!(path = %path.display(), %error, "caching a compiled plugin failed");
        }
    }

    /// Removes the entries [`CachePruning`] says go (of components not in `keep`, unused for
    /// [`PRUNE_AFTER`], leftovers of interrupted writes among them); answers how many.
    pub fn prune(&self, keep: &HashSet<&str>, now: SystemTime) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return 0;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let sha256 = name.split('-').next().unwrap_or_default();
            let unused_for = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .unwrap_or_default();
            if self.pruning.removes(keep.contains(sha256), unused_for)
                && std::fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
        removed
    }
}

/// Creates `dir` private to orca's user, or checks that an existing one is.
pub(crate) fn private_dir(dir: &Path) -> Result<(), CacheDirError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(CacheDirError::Create)?;
    let metadata = std::fs::metadata(dir).map_err(CacheDirError::Metadata)?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    #[allow(unsafe_code)]
    let uid = unsafe { libc::geteuid() };
    if metadata.uid() != uid {
        return Err(CacheDirError::NotOwned {
            owner: metadata.uid(),
            uid,
        });
    }
    let mode = metadata.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(CacheDirError::WritableByOthers { mode });
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Engine {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        Engine::new(&config).unwrap()
    }

    /// The smallest component there is: the preamble of an empty component.
    fn component(engine: &Engine) -> Component {
        Component::new(engine, [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]).unwrap()
    }

    #[test]
    fn the_directory_is_created_private_and_a_shared_one_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        let engine = engine();
        assert!(CompileCache::open(&dir, &engine, CachePruning::UnloadedEntries).is_some());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);

        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            private_dir(&dir),
            Err(CacheDirError::WritableByOthers { mode: 0o777 })
        ));
        assert!(CompileCache::open(&dir, &engine, CachePruning::UnloadedEntries).is_none());
    }

    #[test]
    fn an_entry_loads_only_for_its_component_engine_and_intact_bytes() {
        let root = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache =
            CompileCache::open(root.path(), &engine, CachePruning::UnloadedEntries).unwrap();
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        cache.put(&a, &component(&engine));
        assert!(cache.get(&engine, &a).is_some());

        // The same bytes under another component's name: refused and removed.
        std::fs::copy(cache.entry(&a), cache.entry(&b)).unwrap();
        assert!(cache.get(&engine, &b).is_none());
        assert!(!cache.entry(&b).exists());

        // A flipped byte in the compiled code: refused and removed.
        let mut bytes = std::fs::read(cache.entry(&a)).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(cache.entry(&a), &bytes).unwrap();
        assert!(cache.get(&engine, &a).is_none());
        assert!(!cache.entry(&a).exists());

        // A bare wasmtime serialization without orca's header: refused.
        std::fs::write(cache.entry(&a), component(&engine).serialize().unwrap()).unwrap();
        assert!(cache.get(&engine, &a).is_none());
    }

    #[test]
    fn entries_of_plugins_not_loaded_are_pruned_once_unused() {
        let root = tempfile::tempdir().unwrap();
        let engine = engine();
        let cache =
            CompileCache::open(root.path(), &engine, CachePruning::UnloadedEntries).unwrap();
        let (kept, old) = ("c".repeat(64), "d".repeat(64));
        cache.put(&kept, &component(&engine));
        cache.put(&old, &component(&engine));
        let keep = HashSet::from([kept.as_str()]);
        // Just written: nothing is old enough yet.
        assert_eq!(cache.prune(&keep, SystemTime::now()), 0);
        let later = SystemTime::now() + PRUNE_AFTER + Duration::from_secs(1);
        // An `orca plugin` command sharing the directory removes nothing, however old.
        let command = CompileCache::open(root.path(), &engine, CachePruning::Never).unwrap();
        assert_eq!(command.prune(&keep, later), 0);
        assert!(cache.entry(&old).exists());
        assert_eq!(cache.prune(&keep, later), 1);
        assert!(cache.entry(&kept).exists());
        assert!(!cache.entry(&old).exists());
    }

    #[test]
    fn only_the_serving_orca_prunes_and_only_entries_not_loaded_unused_for_a_while() {
        let (fresh, stale) = (PRUNE_AFTER - Duration::from_secs(1), PRUNE_AFTER);
        let cases = [
            (CachePruning::UnloadedEntries, false, stale, true),
            (CachePruning::UnloadedEntries, false, fresh, false),
            (CachePruning::UnloadedEntries, true, stale, false),
            (CachePruning::Never, false, stale, false),
            (
                CachePruning::Never,
                false,
                Duration::from_secs(86_400 * 365),
                false,
            ),
        ];
        for (pruning, kept, unused_for, removed) in cases {
            assert_eq!(
                pruning.removes(kept, unused_for),
                removed,
                "{pruning:?}, kept {kept}, unused for {unused_for:?}"
            );
        }
    }

    /// An engine whose sandbox slots hold memories of at most `max_memory` bytes, as orca's do.
    fn pooled_engine(max_memory: usize) -> Engine {
        let mut pooling = wasmtime::PoolingAllocationConfig::default();
        pooling
            .total_component_instances(1)
            .total_core_instances(2)
            .total_memories(2)
            .total_tables(2)
            .max_memory_size(max_memory);
        let mut config = wasmtime::Config::new();
        config
            .wasm_component_model(true)
            .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pooling));
        Engine::new(&config).unwrap()
    }

    /// Issue 46: an `eval --max-memory` too small for a plugin deleted its valid entry, and
    /// the next `check` compiled it again (40 s for a Python plugin).
    #[test]
    fn an_entry_too_large_for_this_engines_slots_stays_for_an_engine_it_fits() {
        let root = tempfile::tempdir().unwrap();
        // 17 pages: 1.06 MiB, past a 1 MiB slot.
        let wasm = wat::parse_str(
            "(component (core module $m (memory 17)) (core instance (instantiate $m)))",
        )
        .unwrap();
        let (large, small) = (pooled_engine(64 << 20), pooled_engine(1 << 20));
        let sha256 = "e".repeat(64);
        let cache = CompileCache::open(root.path(), &large, CachePruning::Never).unwrap();
        cache.put(&sha256, &Component::new(&large, &wasm).unwrap());
        let written = std::fs::read(cache.entry(&sha256)).unwrap();

        let limited = CompileCache::open(root.path(), &small, CachePruning::Never).unwrap();
        assert_eq!(
            limited.entry(&sha256),
            cache.entry(&sha256),
            "one entry for both"
        );
        assert!(limited.get(&small, &sha256).is_none());
        assert_eq!(std::fs::read(cache.entry(&sha256)).unwrap(), written);
        assert!(cache.get(&large, &sha256).is_some());
        assert_eq!(cache.entry_path(&sha256), Some(cache.entry(&sha256)));
        assert_eq!(cache.entry_path(&"f".repeat(64)), None);
    }
}
