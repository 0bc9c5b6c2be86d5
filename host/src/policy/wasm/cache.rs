//! Compiled plugins on disk, so a restart deserializes in milliseconds instead of compiling.
//!
//! Key: the component's sha256 and the engine's compatibility hash (wasmtime version, target,
//! and every setting that changes generated code). A stale or damaged entry is never trusted
//! blindly: wasmtime checks its header, and a failure is treated as a miss and overwritten.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of precompiled components.
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
}

impl CompileCache {
    /// Creates `dir` if needed. `None` (with a warning) when it cannot be created: compiling
    /// every time is slower, not wrong.
    pub fn open(dir: &Path, engine: &Engine) -> Option<CompileCache> {
        if let Err(error) = std::fs::create_dir_all(dir) {
            tracing::warn!(dir = %dir.display(), %error, "plugin compile cache unavailable; plugins are compiled on every start");
            return None;
        }
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Some(CompileCache {
            dir: dir.to_path_buf(),
            engine_key: format!("{:016x}", hasher.finish()),
        })
    }

    fn entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    /// The cached compilation of the component with this sha256, if there is a usable one.
    pub fn get(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let path = self.entry(sha256);
        if !path.is_file() {
            return None;
        }
        // SAFETY: the file was written by `put` below from wasmtime's own serialization, in a
        // directory only orca writes; wasmtime validates its header and engine compatibility.
        #[allow(unsafe_code)]
        let loaded = unsafe { Component::deserialize_file(engine, &path) };
        match loaded {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), error = %format!("{error:#}"), "discarding an unusable compiled plugin");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Stores a compilation; failures only cost a recompile later, so they are logged.
    pub fn put(&self, sha256: &str, component: &Component) {
        let path = self.entry(sha256);
        let result = component
            .serialize()
            .map_err(|error| std::io::Error::other(format!("{error:#}")))
            .and_then(|bytes| {
                // Write then rename, so a concurrent reader never sees half a file.
                let mut staged = tempfile::NamedTempFile::new_in(&self.dir)?;
                std::io::Write::write_all(&mut staged, &bytes)?;
                staged.persist(&path).map_err(|error| error.error)?;
                Ok(())
            });
        if let Err(error) = result {
            tracing::warn!(path = %path.display(), %error, "caching a compiled plugin failed");
        }
    }
}
