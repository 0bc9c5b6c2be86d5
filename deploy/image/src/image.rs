//! The image the Dockerfile's final stage describes, assembled without an engine: the base's
//! stand-in as the first layer, then one layer per `COPY` (as an engine makes them), and the
//! OCI image config carrying the stage's settings over the base's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use oci_spec::image::{
    Arch, ConfigBuilder, HistoryBuilder, ImageConfigurationBuilder, Os, RootFsBuilder,
};

use crate::base::{self, BaseError};
use crate::dockerfile::{Copy, FinalStage};
use crate::layer::{Layer, LayerError};
use crate::libraries::{self, LibrariesError};
use crate::tree::Tree;

/// Why the image could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{copy}: no directory given for the stage {stage} (--stage {stage}=DIR)")]
    UnknownStage { copy: String, stage: String },
    #[error("{copy}: reading {}: {source}", .path.display())]
    SourceUnreadable {
        copy: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{copy}: {} is a directory; this builder copies files", .path.display())]
    SourceIsDirectory { copy: String, path: PathBuf },
    #[error("{copy}: stripping debug info with objcopy (binutils): {message}")]
    StripFailed { copy: String, message: String },
    #[error(transparent)]
    Libraries(#[from] LibrariesError),
    #[error(transparent)]
    Base(#[from] BaseError),
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error("the image config: {0}")]
    Config(#[from] oci_spec::OciSpecError),
}

/// Where the final stage's sources are: the build context, and each build stage's file system.
#[derive(Debug, Clone)]
pub struct Sources {
    pub context: PathBuf,
    /// Stage name → a directory standing for that stage's `/`.
    pub stages: BTreeMap<String, PathBuf>,
}

/// The assembled image: its layers, bottom first, and its config (JSON).
#[derive(Debug, Clone)]
pub struct Image {
    pub layers: Vec<Layer>,
    pub config: Vec<u8>,
}

impl Image {
    /// Assembles what `stage` describes from `sources`.
    ///
    /// # Errors
    /// [`ImageError`]: a source missing or unreadable, a base this builder does not stand in
    /// for, a library missing here.
    pub fn assemble(stage: &FinalStage, sources: &Sources) -> Result<Image, ImageError> {
        let settings = base::settings(&stage.base)?;
        let mut libraries = Vec::new();
        let mut copied = Vec::new();
        for copy in &stage.copies {
            let path = source_path(copy, sources)?;
            let mut bytes = read_source(copy, &path)?;
            let mode = std::fs::metadata(&path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                .map_err(|source| ImageError::SourceUnreadable {
                    copy: copy.text.clone(),
                    path: path.clone(),
                    source,
                })?;
            if libraries::is_elf(&bytes) {
                libraries.extend(libraries::needed_by(&path)?);
                bytes = without_debug_info(copy, &path)?;
            }
            let mut tree = Tree::default();
            tree.file(&copy.target(), bytes, mode);
            copied.push(Layer::of(&tree, &copy.text)?);
        }
        libraries.sort();
        libraries.dedup();
        let base_layer = Layer::of(
            &base::tree(&libraries)?,
            &format!(
                "orca-image: {} stand-in from this machine (users, CA bundle, {} libraries)",
                stage.base,
                libraries.len()
            ),
        )?;
        let layers: Vec<Layer> = std::iter::once(base_layer).chain(copied).collect();

        let mut env: Vec<(String, String)> = settings.env;
        for (key, value) in &stage.env {
            env.retain(|(k, _)| k != key);
            env.push((key.clone(), value.clone()));
        }
        let mut config = ConfigBuilder::default()
            .user(stage.user.clone().unwrap_or(settings.user))
            .env(
                env.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>(),
            )
            .working_dir(stage.workdir.clone().unwrap_or(settings.workdir))
            .exposed_ports(stage.exposed_ports.clone());
        if let Some(entrypoint) = &stage.entrypoint {
            config = config.entrypoint(entrypoint.clone());
        }
        if let Some(cmd) = &stage.cmd {
            config = config.cmd(cmd.clone());
        }
        let history = layers
            .iter()
            .map(|layer| {
                HistoryBuilder::default()
                    .created("1970-01-01T00:00:00Z")
                    .created_by(layer.created_by.clone())
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let configuration = ImageConfigurationBuilder::default()
            .created("1970-01-01T00:00:00Z")
            .architecture(architecture())
            .os(Os::Linux)
            .config(config.build()?)
            .rootfs(
                RootFsBuilder::default()
                    .typ("layers")
                    .diff_ids(layers.iter().map(|l| l.diff_id.clone()).collect::<Vec<_>>())
                    .build()?,
            )
            .history(history)
            .build()?;
        let config = serde_json::to_vec(&configuration).map_err(oci_spec::OciSpecError::from)?;
        Ok(Image { layers, config })
    }

    /// What a pull downloads: the compressed layers and the config.
    pub fn compressed_bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.blob.len() as u64).sum::<u64>() + self.config.len() as u64
    }

    /// What the layers hold once unpacked (their tars' sizes).
    pub fn unpacked_bytes(&self) -> u64 {
        self.layers.iter().map(|l| l.unpacked_bytes).sum()
    }
}

/// This machine's architecture in OCI's words: the libraries come from here.
fn architecture() -> Arch {
    match std::env::consts::ARCH {
        "x86_64" => Arch::Amd64,
        "aarch64" => Arch::ARM64,
        other => Arch::Other(other.to_owned()),
    }
}

fn source_path(copy: &Copy, sources: &Sources) -> Result<PathBuf, ImageError> {
    match &copy.from {
        None => Ok(sources.context.join(&copy.source)),
        Some(stage) => sources
            .stages
            .get(stage)
            .map(|dir| dir.join(copy.source.trim_start_matches('/')))
            .ok_or_else(|| ImageError::UnknownStage {
                copy: copy.text.clone(),
                stage: stage.clone(),
            }),
    }
}

fn read_source(copy: &Copy, path: &Path) -> Result<Vec<u8>, ImageError> {
    if path.is_dir() {
        return Err(ImageError::SourceIsDirectory {
            copy: copy.text.clone(),
            path: path.to_owned(),
        });
    }
    std::fs::read(path).map_err(|source| ImageError::SourceUnreadable {
        copy: copy.text.clone(),
        path: path.to_owned(),
        source,
    })
}

/// The executable at `path` without its debug info: a release build has none (cargo's release
/// profile strips it), a debug build's is most of its size.
fn without_debug_info(copy: &Copy, path: &Path) -> Result<Vec<u8>, ImageError> {
    let failed = |message: String| ImageError::StripFailed {
        copy: copy.text.clone(),
        message,
    };
    let out = tempfile::NamedTempFile::new().map_err(|e| failed(e.to_string()))?;
    let output = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(path)
        .arg(out.path())
        .output()
        .map_err(|e| failed(e.to_string()))?;
    if !output.status.success() {
        return Err(failed(
            String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        ));
    }
    std::fs::read(out.path()).map_err(|e| failed(e.to_string()))
}
