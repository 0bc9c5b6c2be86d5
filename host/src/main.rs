use std::process::ExitCode;

use clap::Parser;
use orca::config::Config;
use orca::process::cli::{Cli, Command, ConfigCommand, LogFormat};

fn main() -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run()),
        Err(error) => {
            eprintln!("orca: starting the async runtime: {error}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> ExitCode {
    let cli = Cli::parse();
    orca::support::tls::install_crypto_provider();
    // Startup errors are printed plainly, one line each cause, and exit with status 2.
    let fail = |error: &dyn std::error::Error| {
        eprintln!("orca: {}", orca::support::errors::error_chain(error));
        ExitCode::from(2)
    };
    if let Some(Command::Config(ConfigCommand::Schema)) = cli.command {
        print!("{}", orca::config::schema::schema_text());
        return ExitCode::SUCCESS;
    }
    if let Some(Command::Plugin(command)) = cli.command {
        // Log lines go to stderr; the command's answer is on stdout. What the plugin itself
        // writes (its stdout, stderr and `log` records, a panic message) and which plugin files
        // loaded are what its author needs most, so they show by default.
        let level = cli
            .log_level
            .as_deref()
            // The sigstore crate warns of every missing signature, which `check` reports itself.
            .unwrap_or("warn,orca::policy::wasm=info,orca::policy::reload=info,sigstore=error");
        if let Err(error) =
            orca::process::logging::init(level, cli.log_format.unwrap_or(LogFormat::Text))
        {
            return fail(&error);
        }
        // Plugin calls block (a plugin's stdout and stderr are flushed through the runtime), so
        // they run where the node runs them: on a blocking thread, not an async worker.
        return match tokio::task::spawn_blocking(move || orca::plugin_cli::run(command)).await {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(error)) => {
                eprintln!("orca: {error}");
                ExitCode::from(error.exit_status())
            }
            Err(crashed) => {
                eprintln!("orca: the plugin command crashed: {crashed}");
                ExitCode::FAILURE
            }
        };
    }
    let config = match Config::load(&cli.config) {
        Ok(config) => config,
        Err(error) => return fail(&error),
    };
    if let Err(error) = config.check_fits_container(&cli.config) {
        return fail(&error);
    }
    let level = cli
        .log_level
        .clone()
        .unwrap_or_else(|| config.logging.level.clone());
    if let Err(error) =
        orca::process::logging::init(&level, cli.log_format.unwrap_or(config.logging.format))
    {
        return fail(&error);
    }
    let (client, source) = match orca::cluster::connection::connect(cli.kubeconfig.as_deref()).await
    {
        Ok(connection) => connection,
        Err(error) => return fail(&error),
    };
    tracing::info!(?source, node = %config.node.name, provider = ?config.provider.kind, version = env!("CARGO_PKG_VERSION"), "starting orca");
    let orca = match orca::process::Orca::new(config, client).await {
        Ok(orca) => orca,
        Err(error) => return fail(&error),
    };
    match orca.run(orca::process::shutdown_on_signals()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error),
    }
}

/// jemalloc, for what a drained burst leaves behind (`orca::support::heap` says why).
#[global_allocator]
static ALLOCATOR: orca::support::heap::Allocator = orca::support::heap::Allocator {};

/// jemalloc reads its settings from this symbol before its first allocation (the crate's
/// symbols carry the `_rjem_` prefix). It must live in the binary: a static in the library
/// would be left out of the link, as nothing refers to it by name.
// Allowed here: jemalloc finds its settings only by this exported symbol name.
#[allow(unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static ALLOCATOR_SETTINGS: orca::support::heap::AllocatorSettings =
    orca::support::heap::ALLOCATOR_SETTINGS;
