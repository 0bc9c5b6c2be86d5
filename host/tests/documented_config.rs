//! The shipped configuration files load, and the README's configuration reference names every
//! field `config.yaml` sets, so the two cannot drift apart unnoticed.

use std::path::{Path, PathBuf};

use orca::config::Config;
use serde_json::Value;

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// Dotted paths of every field set in `value`; list entries as `[]`. Maps whose keys are data
/// (labels, annotations, plugin settings) end the path.
fn field_paths(prefix: &str, value: &Value, paths: &mut Vec<String>) {
    let free_form = ["labels", "annotations", "settings"];
    let is_free_form = free_form.iter().any(|name| prefix.ends_with(name));
    // Sections (maps of fields) are headings, not rows; everything else is a field.
    if !prefix.is_empty() && (is_free_form || !value.is_object()) {
        paths.push(prefix.to_owned());
    }
    if is_free_form {
        return;
    }
    match value {
        Value::Object(fields) => {
            for (name, field) in fields {
                let path = match prefix {
                    "" => name.clone(),
                    _ => format!("{prefix}.{name}"),
                };
                field_paths(&path, field, paths);
            }
        }
        Value::Array(entries) => {
            for entry in entries.iter().filter(|e| e.is_object()) {
                field_paths(&format!("{prefix}[]"), entry, paths);
            }
        }
        _ => {}
    }
}

#[test]
fn every_shipped_config_loads() {
    // The in-cluster configs name the plugins volume's mount point; here, any directory.
    let plugins = tempfile::tempdir().unwrap();
    for file in [
        "config.yaml",
        "deploy/base/config.yaml",
        "deploy/examples/custom-plugin/config.yaml",
    ] {
        let text = std::fs::read_to_string(repo(file))
            .unwrap()
            .replace("/etc/orca/plugins", &plugins.path().to_string_lossy());
        if let Err(error) = Config::parse(&text) {
            panic!("{file}: {error}");
        }
    }
}

#[test]
fn the_readme_documents_every_field_of_config_yaml() {
    let text = std::fs::read_to_string(repo("config.yaml")).unwrap();
    let config: Value = serde_saphyr::from_str(&text).unwrap();
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let reference = &readme[readme
        .find("## Configuration reference")
        .expect("README has a configuration reference")..];
    let mut paths = Vec::new();
    field_paths("", &config, &mut paths);
    assert!(paths.len() > 50, "{paths:?}");
    let missing: Vec<&String> = paths
        .iter()
        .filter(|path| path.contains('.'))
        .filter(|path| !reference.contains(&format!("`{path}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "README's configuration reference lacks {missing:?}"
    );
}
