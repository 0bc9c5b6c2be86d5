//! The check every AWS endpoint override (`…endpointUrl`) gets.

use super::ConfigError;

/// An AWS endpoint override (`...endpointUrl`), when set, must be an http(s) URL.
pub(crate) fn check_endpoint_url(field: &str, url: Option<&str>) -> Result<(), ConfigError> {
    match url {
        Some(url) if !(url.starts_with("http://") || url.starts_with("https://")) => Err(
            ConfigError::invalid(field, url, "an http:// or https:// URL"),
        ),
        _ => Ok(()),
    }
}
