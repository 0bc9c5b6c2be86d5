//! Configuration errors: each names the file, the field and the accepted form.

use std::path::{Path, PathBuf};

/// Why a configuration was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// YAML syntax error (with its line) or schema error (with the field's path).
    #[error("{}{message}", file_prefix(.path))]
    Malformed {
        path: Option<PathBuf>,
        message: String,
    },
    #[error("{}invalid {field}: {value:?}; expected {expected}", file_prefix(.path))]
    Invalid {
        path: Option<PathBuf>,
        field: String,
        value: String,
        expected: String,
    },
}

fn file_prefix(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|path| format!("config file {}: ", path.display()))
        .unwrap_or_default()
}

impl ConfigError {
    pub(crate) fn syntax(error: serde_saphyr::Error) -> ConfigError {
        ConfigError::Malformed {
            path: None,
            message: format!("not valid YAML: {error}"),
        }
    }

    pub(crate) fn schema(error: serde_path_to_error::Error<serde_json::Error>) -> ConfigError {
        let path = error.path().to_string();
        ConfigError::Malformed {
            path: None,
            message: format!("{path}: {}", error.inner()),
        }
    }

    /// A value that parsed but is not acceptable.
    pub(crate) fn invalid(
        field: impl Into<String>,
        value: impl ToString,
        expected: &str,
    ) -> ConfigError {
        ConfigError::Invalid {
            path: None,
            field: field.into(),
            value: value.to_string(),
            expected: expected.to_owned(),
        }
    }

    pub(crate) fn in_file(self, file: &Path) -> ConfigError {
        match self {
            ConfigError::Malformed { message, .. } => ConfigError::Malformed {
                path: Some(file.to_path_buf()),
                message,
            },
            ConfigError::Invalid {
                field,
                value,
                expected,
                ..
            } => ConfigError::Invalid {
                path: Some(file.to_path_buf()),
                field,
                value,
                expected,
            },
            other => other,
        }
    }
}
