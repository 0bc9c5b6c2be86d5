//! The signals that ask orca to stop.

use tokio_util::sync::CancellationToken;

/// Cancels the returned token on the first SIGTERM or SIGINT.
pub fn shutdown_on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT received; shutting down"),
            () = terminate => tracing::info!("SIGTERM received; shutting down"),
        }
        cancel.cancel();
    });
    token
}
