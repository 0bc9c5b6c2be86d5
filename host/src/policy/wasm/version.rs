//! The interface version a plugin was built against, read from its `orca:policy-version`
//! custom section before any bindings are chosen (see `plugin-sdk/wit/README.md`): a plugin for
//! a version this host does not serve gets a message saying so instead of a type-check dump.

use wasmparser::{Parser, Payload};

use super::bindings::InterfaceVersion;

/// The section `orca_plugin_sdk::register_plugin!` writes.
pub const VERSION_SECTION: &str = "orca:policy-version";
/// The newest interface this host implements (the SDK's).
pub const HOST_INTERFACE_VERSION: &str = orca_plugin_sdk::INTERFACE_VERSION;

/// Why a plugin's declared interface version is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("the component is not valid WebAssembly: {0}")]
    Unparsable(String),
    #[error(
        "the plugin was built against orca:policy@{found}; this orca serves orca:policy@{versions} \
         (rebuild the plugin with a plugin-sdk for {HOST_INTERFACE_VERSION}, or run a newer orca)",
        versions = InterfaceVersion::supported_list()
    )]
    Incompatible { found: String },
}

/// What the plugin declares: the version text and the bindings that serve it, or `None` for a
/// component built without the SDK (the world check then picks the bindings).
///
/// # Errors
/// [`VersionError::Incompatible`] for a version this host cannot serve.
pub fn check_interface_version(
    bytes: &[u8],
) -> Result<Option<(String, InterfaceVersion)>, VersionError> {
    let Some(found) = declared_version(bytes)? else {
        return Ok(None);
    };
    match InterfaceVersion::serving(&found) {
        Some(version) => Ok(Some((found, version))),
        None => Err(VersionError::Incompatible { found }),
    }
}

fn declared_version(bytes: &[u8]) -> Result<Option<String>, VersionError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(VersionError::Unparsable(
            "it does not start with the WebAssembly magic bytes (\\0asm)".to_owned(),
        ));
    }
    // Nested core modules are walked too: the section lives in the plugin's core module.
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(|error| VersionError::Unparsable(error.to_string()))?;
        if let Payload::CustomSection(section) = payload
            && section.name() == VERSION_SECTION
        {
            return Ok(Some(String::from_utf8_lossy(section.data()).into_owned()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_without_the_section_declares_nothing() {
        let module = wasmparser::Validator::new()
            .validate_all(b"\0asm\x01\0\0\0")
            .map(|_| ());
        assert!(module.is_ok());
        assert_eq!(check_interface_version(b"\0asm\x01\0\0\0"), Ok(None));
    }

    #[test]
    fn a_newer_interface_is_refused_by_name() {
        // A core module with only the custom section, as the SDK would stamp it.
        let mut module = b"\0asm\x01\0\0\0".to_vec();
        let name = VERSION_SECTION.as_bytes();
        let payload = b"0.4.0";
        module.push(0); // custom section id
        module.push(u8::try_from(1 + name.len() + payload.len()).unwrap());
        module.push(u8::try_from(name.len()).unwrap());
        module.extend_from_slice(name);
        module.extend_from_slice(payload);
        let error = check_interface_version(&module).unwrap_err();
        assert!(error.to_string().contains("orca:policy@0.4.0"), "{error}");
        assert!(error.to_string().contains("0.1.0, 0.2.0, 0.3.0"), "{error}");
        assert!(matches!(error, VersionError::Incompatible { .. }));
    }

    #[test]
    fn garbage_is_unparsable() {
        assert!(matches!(
            check_interface_version(b"not wasm at all"),
            Err(VersionError::Unparsable(_))
        ));
    }
}
