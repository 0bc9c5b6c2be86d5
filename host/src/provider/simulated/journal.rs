//! An append-only journal of simulated instances, so they outlive orca as real instances do.
//!
//! Each line is one JSON record. Appends are single `write` calls on an `O_APPEND` file: once a
//! call returns, the record survives the process being killed (the page cache holds it). A torn
//! last line (power loss mid-write) is skipped on replay rather than failing startup.
//!
//! # Caveats
//! A launch record carries the instance's resolved workload, Secret values included, as the
//! aws provider's user data does: the file is as sensitive as the Secrets of its pods, and is
//! written readable by its owner alone.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::instance::SimInstance;

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Record {
    Launch(Box<SimInstance>),
    Terminate {
        uid: String,
        at: Timestamp,
    },
    /// The volume was attached to the pod's instance.
    Attach {
        uid: String,
        volume_id: String,
        at: Timestamp,
    },
    Forget {
        uid: String,
    },
    /// A command `kubectl exec` ran on the pod's instance: an audit line, which changes no
    /// instance (and compaction drops).
    Exec {
        uid: String,
        container: String,
        command: Vec<String>,
        exit_code: i32,
        at: Timestamp,
    },
}

/// Why the journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("opening simulated-provider journal {path}")]
    OpenFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("appending to simulated-provider journal {path}")]
    AppendFailed {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub struct Journal {
    path: PathBuf,
    file: File,
}

impl Journal {
    /// Replays the journal at `path` (if any), compacts it to the live instances, and opens it
    /// for appending.
    ///
    /// # Errors
    /// [`JournalError`] when the file cannot be read or written.
    pub fn open(path: &Path) -> Result<(Journal, HashMap<String, SimInstance>), JournalError> {
        let open_failed = |source| JournalError::OpenFailed {
            path: path.to_path_buf(),
            source,
        };
        let mut instances = HashMap::new();
        match File::open(path) {
            Ok(file) => {
                for line in BufReader::new(file).lines() {
                    let line = line.map_err(open_failed)?;
                    match serde_json::from_str::<Record>(&line) {
                        Ok(record) => apply(&mut instances, record),
                        Err(error) => {
                            tracing::warn!(path = %path.display(), %error, "skipping unreadable journal line")
                        }
                    }
                }
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(open_failed(error)),
        }
        // Compact: rewrite only the live records, then rename over the old file atomically.
        let compacted = path.with_extension("compacting");
        {
            // Readable by orca's user alone: launch records carry Secret values.
            let mut out = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&compacted)
                .map_err(open_failed)?;
            let mut buffer = Vec::new();
            for instance in instances.values() {
                serde_json::to_writer(&mut buffer, &Record::Launch(Box::new(instance.clone())))
                    .expect("journal records always serialize");
                buffer.push(b'\n');
            }
            out.write_all(&buffer).map_err(open_failed)?;
        }
        std::fs::rename(&compacted, path).map_err(open_failed)?;
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(open_failed)?;
        Ok((
            Journal {
                path: path.to_path_buf(),
                file,
            },
            instances,
        ))
    }

    /// Appends one record in a single write.
    ///
    /// # Errors
    /// [`JournalError::AppendFailed`].
    pub fn append(&mut self, record: &Record) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(record).expect("journal records always serialize");
        line.push(b'\n');
        self.file
            .write_all(&line)
            .map_err(|source| JournalError::AppendFailed {
                path: self.path.clone(),
                source,
            })
    }
}

/// Applies a record to the instance map (replay and live updates share this).
pub fn apply(instances: &mut HashMap<String, SimInstance>, record: Record) {
    match record {
        Record::Launch(instance) => {
            instances.insert(instance.pod.uid.clone(), *instance);
        }
        Record::Terminate { uid, at } => {
            if let Some(instance) = instances.get_mut(&uid) {
                instance.terminate_requested_at.get_or_insert(at);
            }
        }
        Record::Attach { uid, volume_id, at } => {
            if let Some(volume) = instances.get_mut(&uid).and_then(|instance| {
                instance
                    .volumes
                    .iter_mut()
                    .find(|v| v.volume_id == volume_id)
            }) {
                volume.attached_at.get_or_insert(at);
            }
        }
        Record::Forget { uid } => {
            instances.remove(&uid);
            crate::support::heap::shrink_when_sparse(instances);
        }
        Record::Exec { .. } => {}
    }
}
