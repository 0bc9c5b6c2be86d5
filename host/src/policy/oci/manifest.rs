//! What a plugin's manifest is allowed to say: one WebAssembly layer of a size within the
//! limit, and well-formed digests for it and for the config. Read from the manifest's bytes
//! (already checked against the digest that names them) before anything of it is used.

use oci_client::manifest::{OciDescriptor, OciImageManifest, WASM_LAYER_MEDIA_TYPE};

use super::artifact::LAYER_MEDIA_TYPE;
use super::digest::ContentDigest;
use super::pull_error::{DigestSource, PullError};

/// A plugin artifact's manifest, its digests validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginManifest {
    pub layer_digest: ContentDigest,
    /// The component's size as the manifest declares it; at most the limit it was read with.
    pub layer_size: u64,
    pub config_digest: ContentDigest,
}

impl PluginManifest {
    /// The plugin manifest `raw` holds, when its component may be at most
    /// `max_component_bytes`.
    ///
    /// # Errors
    /// [`PullError::NotAPlugin`], [`PullError::BadDigest`] or
    /// [`PullError::DeclaredTooLarge`], saying what is wrong.
    pub fn parse(raw: &[u8], max_component_bytes: u64) -> Result<PluginManifest, PullError> {
        let manifest: OciImageManifest = serde_json::from_slice(raw).map_err(|error| {
            PullError::NotAPlugin(format!("its manifest does not parse: {error}"))
        })?;
        let layer = plugin_layer(&manifest)?;
        let layer_digest =
            ContentDigest::parse(&layer.digest).map_err(|error| PullError::BadDigest {
                which: DigestSource::Layer,
                error,
            })?;
        let config_digest = ContentDigest::parse(&manifest.config.digest).map_err(|error| {
            PullError::BadDigest {
                which: DigestSource::Config,
                error,
            }
        })?;
        let layer_size = u64::try_from(layer.size).map_err(|_| {
            PullError::NotAPlugin(format!(
                "its manifest declares a component of {} bytes",
                layer.size
            ))
        })?;
        if layer_size > max_component_bytes {
            return Err(PullError::DeclaredTooLarge {
                size: layer_size,
                limit: max_component_bytes,
            });
        }
        Ok(PluginManifest {
            layer_digest,
            layer_size,
            config_digest,
        })
    }
}

/// The manifest's one WebAssembly layer.
fn plugin_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, PullError> {
    let wasm: Vec<&OciDescriptor> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE || l.media_type == WASM_LAYER_MEDIA_TYPE)
        .collect();
    match wasm.as_slice() {
        [layer] => Ok(layer),
        [] => Err(PullError::NotAPlugin(format!(
            "no layer of media type {LAYER_MEDIA_TYPE} (push it with `orca plugin push`)"
        ))),
        _ => Err(PullError::NotAPlugin(format!(
            "{} WebAssembly layers; a plugin artifact has one",
            wasm.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u64 = 1000;

    fn manifest(layer_digest: &str, size: i64, config_digest: &str, media_type: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.wasm.config.v0+json",
                "digest": config_digest,
                "size": 10,
            },
            "layers": [{"mediaType": media_type, "digest": layer_digest, "size": size}],
        }))
        .unwrap()
    }

    /// What a parse came to, told apart by kind.
    #[derive(Debug, PartialEq)]
    enum Verdict {
        Plugin,
        NotAPlugin,
        BadDigest(DigestSource),
        TooLarge,
    }

    /// Parses each case's manifest, whose digests when it is a plugin are `layer` and
    /// `config`, and checks what it came to.
    fn assert_verdicts(cases: Vec<(&str, Vec<u8>, Verdict)>, layer: &str, config: &str) {
        for (situation, raw, want) in cases {
            let got = match PluginManifest::parse(&raw, LIMIT) {
                Ok(parsed) => {
                    assert_eq!(parsed.layer_digest.as_str(), layer, "{situation}");
                    assert_eq!(parsed.config_digest.as_str(), config, "{situation}");
                    Verdict::Plugin
                }
                Err(PullError::NotAPlugin(_)) => Verdict::NotAPlugin,
                Err(PullError::BadDigest { which, .. }) => Verdict::BadDigest(which),
                Err(PullError::DeclaredTooLarge { size, limit }) => {
                    assert_eq!((size, limit), (1001, LIMIT), "{situation}");
                    Verdict::TooLarge
                }
                Err(other) => panic!("{situation}: {other}"),
            };
            assert_eq!(got, want, "{situation}");
        }
    }

    #[test]
    fn a_manifest_is_a_plugin_only_with_a_wasm_layer_and_a_size_within_the_limit() {
        let layer = ContentDigest::of(b"component").to_string();
        let config = ContentDigest::of(b"config").to_string();
        let wasm = LAYER_MEDIA_TYPE;
        let cases = vec![
            (
                "a plugin",
                manifest(&layer, 900, &config, wasm),
                Verdict::Plugin,
            ),
            (
                "at the limit",
                manifest(&layer, 1000, &config, wasm),
                Verdict::Plugin,
            ),
            (
                "the older layer type",
                manifest(&layer, 900, &config, WASM_LAYER_MEDIA_TYPE),
                Verdict::Plugin,
            ),
            (
                "over the limit",
                manifest(&layer, 1001, &config, wasm),
                Verdict::TooLarge,
            ),
            (
                "a negative size",
                manifest(&layer, -1, &config, wasm),
                Verdict::NotAPlugin,
            ),
            (
                "no wasm layer",
                manifest(
                    &layer,
                    900,
                    &config,
                    "application/vnd.oci.image.layer.v1.tar",
                ),
                Verdict::NotAPlugin,
            ),
            ("not json", b"{\"layers\": [".to_vec(), Verdict::NotAPlugin),
        ];
        assert_verdicts(cases, &layer, &config);
    }

    #[test]
    fn a_manifest_whose_digests_are_not_well_formed_is_refused_naming_which() {
        let layer = ContentDigest::of(b"component").to_string();
        let config = ContentDigest::of(b"config").to_string();
        let wasm = LAYER_MEDIA_TYPE;
        let cases = vec![
            (
                // Issue 40: the store read and deleted `<path>.wasm`.
                "an absolute path as the layer digest",
                manifest("/var/lib/orca/plugin", 900, &config, wasm),
                Verdict::BadDigest(DigestSource::Layer),
            ),
            (
                "a climbing path as the layer digest",
                manifest(
                    &format!("sha256:../../{}", &layer[13..]),
                    900,
                    &config,
                    wasm,
                ),
                Verdict::BadDigest(DigestSource::Layer),
            ),
            (
                "a path as the config digest",
                manifest(&layer, 900, "sha256:../../etc/passwd", wasm),
                Verdict::BadDigest(DigestSource::Config),
            ),
        ];
        assert_verdicts(cases, &layer, &config);
    }
}
