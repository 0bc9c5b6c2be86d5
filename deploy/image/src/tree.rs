//! The files of one layer: directories, files and symbolic links at absolute paths in the image,
//! with their modes and owners. Kept sorted, so the same files always make the same tar.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

/// Why a file from the build machine cannot be put in a layer.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    #[error("reading {}: {source}", .path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not an absolute path", .0.display())]
    NotAbsolute(PathBuf),
    #[error("{}: more than 40 symbolic links on the way", .0.display())]
    LinkLoop(PathBuf),
}

/// One entry of a layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Directory {
        mode: u32,
        owner: u32,
    },
    File {
        bytes: Vec<u8>,
        mode: u32,
        owner: u32,
    },
    Symlink {
        target: PathBuf,
    },
}

/// A layer's entries by path (relative to `/`, without the leading slash).
#[derive(Debug, Default, Clone)]
pub struct Tree {
    entries: BTreeMap<String, Entry>,
}

impl Tree {
    /// A directory owned by `owner` (user and group), with its missing parents.
    pub fn directory(&mut self, path: &str, mode: u32, owner: u32) {
        let key = key(path);
        self.parents(&key);
        self.entries.insert(key, Entry::Directory { mode, owner });
    }

    /// A file owned by root, with its missing parents.
    pub fn file(&mut self, path: &str, bytes: Vec<u8>, mode: u32) {
        let key = key(path);
        self.parents(&key);
        self.entries.insert(
            key,
            Entry::File {
                bytes,
                mode,
                owner: 0,
            },
        );
    }

    pub fn symlink(&mut self, path: &str, target: &Path) {
        let key = key(path);
        self.parents(&key);
        self.entries.insert(
            key,
            Entry::Symlink {
                target: target.to_owned(),
            },
        );
    }

    /// The build machine's file at `path`, at the same path in the image, with every symbolic
    /// link met on the way (`/lib` → `usr/lib` on a merged-/usr system) kept as a link, so the
    /// image resolves the path as the build machine does.
    ///
    /// # Errors
    /// [`TreeError`]: a relative path, a link loop, or a file that cannot be read.
    pub fn host_file(&mut self, path: &Path) -> Result<(), TreeError> {
        if !path.is_absolute() {
            return Err(TreeError::NotAbsolute(path.to_owned()));
        }
        let unreadable = |path: &Path| {
            let path = path.to_owned();
            move |source| TreeError::Unreadable { path, source }
        };
        let mut resolved = PathBuf::from("/");
        // What is left to walk, last step first.
        let mut pending = steps(path);
        let mut links = 0;
        while let Some(step) = pending.pop() {
            match step {
                Step::Root => resolved = PathBuf::from("/"),
                Step::Parent => {
                    resolved.pop();
                }
                Step::Name(name) => {
                    let candidate = resolved.join(name);
                    let metadata =
                        std::fs::symlink_metadata(&candidate).map_err(unreadable(&candidate))?;
                    if !metadata.is_symlink() {
                        resolved = candidate;
                        continue;
                    }
                    links += 1;
                    if links > 40 {
                        return Err(TreeError::LinkLoop(path.to_owned()));
                    }
                    let target = std::fs::read_link(&candidate).map_err(unreadable(&candidate))?;
                    self.symlink(&candidate.to_string_lossy(), &target);
                    // The target is walked next, from the link's directory (a relative
                    // target) or from `/` (an absolute one).
                    pending.extend(steps(&target));
                }
            }
        }
        let metadata = std::fs::metadata(&resolved).map_err(unreadable(&resolved))?;
        let bytes = std::fs::read(&resolved).map_err(unreadable(&resolved))?;
        self.file(
            &resolved.to_string_lossy(),
            bytes,
            metadata.permissions().mode() & 0o7777,
        );
        Ok(())
    }

    pub fn entries(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries
            .iter()
            .map(|(path, entry)| (path.as_str(), entry))
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries.get(&key(path))
    }

    /// Every ancestor of `key` not yet present, as a root-owned 0755 directory. An ancestor
    /// that is a symbolic link here stays one.
    fn parents(&mut self, key: &str) {
        let mut at = 0;
        while let Some(slash) = key[at..].find('/') {
            let parent = &key[..at + slash];
            self.entries
                .entry(parent.to_owned())
                .or_insert(Entry::Directory {
                    mode: 0o755,
                    owner: 0,
                });
            at += slash + 1;
        }
    }
}

/// A path's key: relative to `/`, no trailing slash.
fn key(path: &str) -> String {
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_owned()
}

/// One step of a walk along a path.
enum Step {
    Root,
    Parent,
    Name(std::ffi::OsString),
}

/// `path`'s steps, last first (a stack).
fn steps(path: &Path) -> Vec<Step> {
    path.components()
        .rev()
        .filter_map(|component| match component {
            Component::RootDir => Some(Step::Root),
            Component::ParentDir => Some(Step::Parent),
            Component::Normal(name) => Some(Step::Name(name.to_owned())),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_file_reached_through_links_keeps_each_link_and_lands_at_its_real_path() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("usr/lib/arch");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("libc.so.6"), b"elf").unwrap();
        // /lib -> usr/lib (relative), /lib64/ld.so -> absolute path through /lib again.
        symlink("usr/lib", root.path().join("lib")).unwrap();
        std::fs::create_dir(root.path().join("lib64")).unwrap();
        symlink(
            root.path().join("lib/arch/libc.so.6"),
            root.path().join("lib64/ld.so"),
        )
        .unwrap();

        let mut tree = Tree::default();
        tree.host_file(&root.path().join("lib64/ld.so")).unwrap();
        let inside = |p: &str| format!("{}/{p}", root.path().display());
        assert!(matches!(
            tree.get(&inside("lib64/ld.so")),
            Some(Entry::Symlink { target }) if *target == root.path().join("lib/arch/libc.so.6")
        ));
        assert!(matches!(
            tree.get(&inside("lib")),
            Some(Entry::Symlink { target }) if target == Path::new("usr/lib")
        ));
        assert!(matches!(
            tree.get(&inside("usr/lib/arch/libc.so.6")),
            Some(Entry::File { bytes, .. }) if bytes == b"elf"
        ));
        assert!(tree.get(&inside("lib/arch/libc.so.6")).is_none());
    }

    #[test]
    fn a_link_loop_is_an_error_not_a_hang() {
        let root = tempfile::tempdir().unwrap();
        symlink("b", root.path().join("a")).unwrap();
        symlink("a", root.path().join("b")).unwrap();
        let error = Tree::default()
            .host_file(&root.path().join("a"))
            .unwrap_err();
        assert!(matches!(error, TreeError::LinkLoop(_)), "{error}");
    }

    #[test]
    fn parents_are_added_once_and_an_explicit_directory_keeps_its_owner() {
        let mut tree = Tree::default();
        tree.directory("/home/nonroot", 0o700, 65532);
        tree.file("/home/nonroot/x", vec![], 0o644);
        assert_eq!(
            tree.get("/home/nonroot"),
            Some(&Entry::Directory {
                mode: 0o700,
                owner: 65532
            })
        );
        assert_eq!(
            tree.get("/home"),
            Some(&Entry::Directory {
                mode: 0o755,
                owner: 0
            })
        );
    }
}
