//! Structured logging through `tracing`, as JSON or text.

use tracing_subscriber::EnvFilter;

use crate::process::cli::LogFormat;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LoggingError {
    #[error(
        "invalid log level {level:?}: expected error, warn, info, debug, trace or a tracing filter like orca=debug"
    )]
    InvalidLevel {
        level: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
}

/// Installs the global subscriber. `level` is a level name or a full `EnvFilter` directive.
///
/// # Errors
/// [`LoggingError::InvalidLevel`] when `level` is not a valid filter.
pub fn init(level: &str, format: LogFormat) -> Result<(), LoggingError> {
    let filter = EnvFilter::try_new(level).map_err(|source| LoggingError::InvalidLevel {
        level: level.to_owned(),
        source,
    })?;
    // Colour only for a person at a terminal; log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi);
    // A second init (tests) keeps the first subscriber; that is not an error worth surfacing.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
    Ok(())
}
