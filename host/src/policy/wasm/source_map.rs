//! A plugin's source map: the TypeScript SDK's `build` bundles the plugin into one JavaScript
//! file for the component, and embeds esbuild's source map of that bundle in the component's
//! `orca:source-map` custom section, so a line of the bundle in a JavaScript stack can be told as
//! the line of the author's `.ts` file (`src/plugin.ts:12`).
//!
//! Only what that needs is read: a version 3 map's `file`, `sources` and `mappings` (see
//! <https://tc39.es/ecma426/>), decoded on demand for one position, as a failed call wants one
//! frame mapped and nothing else does.

use wasmparser::{Chunk, Parser, Payload};

/// The custom section `plugin-sdk/js/scripts/bundle.mjs` appends to the component.
pub const SOURCE_MAP_SECTION: &str = "orca:source-map";

/// The largest map orca reads: a bundled plugin's map with the SDK is a few hundred KiB; a larger
/// one is not kept in memory for every load of the plugin.
pub const MAX_SOURCE_MAP_BYTES: usize = 4 << 20;

/// A bundle's source map, its mappings still encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMap {
    /// The bundle the map is of (`component.js`), as a stack names it.
    pub file: String,
    sources: Vec<String>,
    mappings: String,
}

/// A position in an original source: `src/plugin.ts`, line 12 (lines counted from 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginalPosition<'m> {
    pub source: &'m str,
    pub line: u32,
}

/// Why a plugin's embedded source map was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceMapError {
    #[error("the component is not valid WebAssembly: {0}")]
    Unparsable(String),
    #[error("its {SOURCE_MAP_SECTION} section holds {0} bytes, more than {MAX_SOURCE_MAP_BYTES}")]
    TooLarge(usize),
    #[error("its {SOURCE_MAP_SECTION} section is not a version 3 source map: {0}")]
    NotAMap(String),
}

#[derive(serde::Deserialize)]
struct RawMap {
    version: u32,
    #[serde(default)]
    file: String,
    #[serde(default, rename = "sourceRoot")]
    source_root: String,
    sources: Vec<Option<String>>,
    mappings: String,
}

impl SourceMap {
    /// The map in the component's top-level `orca:source-map` section, if it has one.
    ///
    /// # Errors
    /// [`SourceMapError`] for bytes that are not a component, or a section that is too large
    /// or not a version 3 map (`sections` index maps are not read: esbuild writes none).
    pub fn embedded_in(component: &[u8]) -> Result<Option<SourceMap>, SourceMapError> {
        match top_level_section(component, SOURCE_MAP_SECTION)? {
            Some(data) => SourceMap::parse(data).map(Some),
            None => Ok(None),
        }
    }

    /// # Errors
    /// [`SourceMapError::TooLarge`] or [`SourceMapError::NotAMap`].
    pub fn parse(json: &[u8]) -> Result<SourceMap, SourceMapError> {
        if json.len() > MAX_SOURCE_MAP_BYTES {
            return Err(SourceMapError::TooLarge(json.len()));
        }
        let raw: RawMap = serde_json::from_slice(json)
            .map_err(|error| SourceMapError::NotAMap(error.to_string()))?;
        if raw.version != 3 {
            return Err(SourceMapError::NotAMap(format!(
                "version {}, expected 3",
                raw.version
            )));
        }
        let sources = raw
            .sources
            .into_iter()
            .map(|source| format!("{}{}", raw.source_root, source.unwrap_or_default()))
            .collect();
        Ok(SourceMap {
            file: raw.file,
            sources,
            mappings: raw.mappings,
        })
    }

    /// Where `line` and `column` of the bundle (both counted from 1, as JavaScript stacks count
    /// them) came from: the last mapping of that line at or before the column, or `None` where
    /// the map says nothing (or its mappings are malformed before that line).
    pub fn original(&self, line: u32, column: u32) -> Option<OriginalPosition<'_>> {
        let target_line = usize::try_from(line.checked_sub(1)?).ok()?;
        let target_column = i64::from(column.checked_sub(1)?);
        // Source index and original line carry over from line to line (each field is relative
        // to its own last value); the generated column starts again at 0 on each.
        let mut source = 0i64;
        let mut original_line = 0i64;
        let mut found = None;
        for (index, generated) in self.mappings.split(';').enumerate() {
            if index > target_line {
                break;
            }
            let mut column = 0i64;
            for segment in generated.split(',').filter(|s| !s.is_empty()) {
                // 1, 4 or 5 fields, each under 2^32: the sums stay far from i64's bounds.
                let fields = decode_segment(segment)?;
                column = column.saturating_add(fields[0]);
                if fields.len() == 1 {
                    continue;
                }
                source = source.saturating_add(fields[1]);
                original_line = original_line.saturating_add(fields[2]);
                // The original column (fields[3]) and name (fields[4]) are not needed: a
                // stack is told by line.
                if index == target_line && column <= target_column {
                    found = Some((source, original_line));
                }
            }
        }
        let (source, original_line) = found?;
        let source = self.sources.get(usize::try_from(source).ok()?)?;
        Some(OriginalPosition {
            source,
            line: u32::try_from(original_line).ok()?.checked_add(1)?,
        })
    }
}

/// One segment's fields: 1, 4 or 5 Base64 VLQ numbers, each relative to the one before.
fn decode_segment(segment: &str) -> Option<Vec<i64>> {
    let mut fields = Vec::with_capacity(5);
    let mut value = 0i64;
    let mut shift = 0u32;
    for byte in segment.bytes() {
        let digit = i64::from(base64_digit(byte)?);
        // 32 bits of magnitude is more than any line or column; beyond is a broken map.
        if shift > 30 {
            return None;
        }
        value |= (digit & 0x1f) << shift;
        if digit & 0x20 != 0 {
            shift += 5;
            continue;
        }
        let magnitude = value >> 1;
        fields.push(if value & 1 == 1 {
            -magnitude
        } else {
            magnitude
        });
        value = 0;
        shift = 0;
    }
    let complete = shift == 0 && value == 0;
    (complete && matches!(fields.len(), 1 | 4 | 5)).then_some(fields)
}

fn base64_digit(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// The data of the component's own custom section `name` (not one of a nested module's).
fn top_level_section<'a>(bytes: &'a [u8], name: &str) -> Result<Option<&'a [u8]>, SourceMapError> {
    let unparsable = |error: wasmparser::BinaryReaderError| {
        SourceMapError::Unparsable(error.message().to_owned())
    };
    let mut parser = Parser::new(0);
    let mut rest = bytes;
    loop {
        let (consumed, payload) = match parser.parse(rest, true).map_err(unparsable)? {
            Chunk::Parsed { consumed, payload } => (consumed, payload),
            // With the whole input at hand (`eof`), the parser answers or fails.
            Chunk::NeedMoreData(_) => {
                return Err(SourceMapError::Unparsable("it ends early".to_owned()));
            }
        };
        rest = rest.get(consumed..).unwrap_or_default();
        match payload {
            Payload::CustomSection(section) if section.name() == name => {
                return Ok(Some(section.data()));
            }
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                // The parser has stepped over the nested module or component; so do the bytes.
                rest = rest.get(unchecked_range.len()..).unwrap_or_default();
            }
            Payload::End(_) => return Ok(None),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
