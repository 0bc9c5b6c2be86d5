//! orca inside the test process, with EC2 replaced by a model: the real node controller, pod
//! controller, policy pipeline and aws provider, talking to the harness's real apiserver. Each
//! run has a tokio runtime of its own, so [`InProcessOrca::crash`] drops every task and every
//! byte of memory at once, as SIGKILL does to a process, while the apiserver and the model keep
//! their state, as they would.

use std::path::Path;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::Duration;

use ::orca::config::Config;
use ::orca::interruption::NoticeQueue;
use ::orca::provider::aws::api::Ec2Api;
use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

/// The in-process orca's worker threads: a freeze blocks every one.
const WORKERS: usize = 2;

/// One in-process orca.
pub struct InProcessOrca {
    runtime: Option<tokio::runtime::Runtime>,
    shutdown: CancellationToken,
    pub metrics_port: u16,
    /// Set while [`Self::freeze`] holds the workers: true until [`Self::thaw`].
    frozen: Option<Arc<(Mutex<bool>, Condvar)>>,
}

impl InProcessOrca {
    /// Starts orca with `config` (YAML, as a file would hold it), the credentials in
    /// `kubeconfig`, and `ec2` as its EC2; with `interruptions`, it reads EC2's notices from
    /// that queue, from the tests' account ([`crate::notices::ACCOUNT`]).
    ///
    /// # Errors
    /// A config orca refuses, or a runtime that cannot be built.
    pub fn start(
        config: &str,
        kubeconfig: &Path,
        ec2: Arc<dyn Ec2Api>,
        interruptions: Option<Arc<dyn NoticeQueue>>,
    ) -> Result<InProcessOrca> {
        ::orca::support::tls::install_crypto_provider();
        crate::config_schema::check_config(config)?;
        let config = Config::parse(config).context("the in-process orca's config")?;
        let metrics_port = config.metrics.port;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("orca-in-process")
            .enable_all()
            .build()?;
        let shutdown = CancellationToken::new();
        let kubeconfig = kubeconfig.to_path_buf();
        let stop = shutdown.clone();
        runtime.spawn(async move {
            let client = match ::orca::cluster::connection::connect(Some(&kubeconfig)).await {
                Ok((client, _)) => client,
                Err(error) => {
                    eprintln!("in-process orca: connecting: {error}");
                    return;
                }
            };
            match ::orca::process::Orca::with_ec2(config, client, ec2).await {
                Ok(orca) => {
                    let orca = match interruptions {
                        Some(queue) => orca.with_interruption_queue(queue, crate::notices::ACCOUNT),
                        None => orca,
                    };
                    if let Err(error) = orca.run(stop).await {
                        eprintln!(
                            "in-process orca: {}",
                            ::orca::support::errors::error_chain(&error)
                        );
                    }
                }
                Err(error) => eprintln!(
                    "in-process orca: {}",
                    ::orca::support::errors::error_chain(&error)
                ),
            }
        });
        Ok(InProcessOrca {
            runtime: Some(runtime),
            shutdown,
            metrics_port,
            frozen: None,
        })
    }

    /// Stops this orca where it is, as SIGSTOP or a frozen VM would: every worker thread of
    /// its runtime blocks until [`Self::thaw`], so none of its tasks runs (its timers, its
    /// watches, its metrics port); its connections stay open and the kernel keeps receiving
    /// for them. Returns once every worker is blocked.
    pub fn freeze(&mut self) {
        let Some(runtime) = &self.runtime else {
            return;
        };
        if self.frozen.is_some() {
            return;
        }
        let gate = Arc::new((Mutex::new(true), Condvar::new()));
        let parked = Arc::new(Barrier::new(WORKERS + 1));
        for _ in 0..WORKERS {
            let (gate, parked) = (gate.clone(), parked.clone());
            // A worker that picks this task up blocks in it, so the other worker takes the
            // next one (and every other task) until it blocks too.
            drop(runtime.spawn(async move {
                parked.wait();
                let (frozen, thawed) = &*gate;
                let mut frozen = frozen.lock().unwrap_or_else(|p| p.into_inner());
                while *frozen {
                    frozen = thawed.wait(frozen).unwrap_or_else(|p| p.into_inner());
                }
            }));
        }
        parked.wait();
        self.frozen = Some(gate);
    }

    /// Lets a frozen orca run on from where it stopped (SIGCONT): its timers due meanwhile
    /// fire at once, its watches deliver what arrived.
    pub fn thaw(&mut self) {
        if let Some(gate) = self.frozen.take() {
            let (frozen, thawed) = &*gate;
            *frozen.lock().unwrap_or_else(|p| p.into_inner()) = false;
            thawed.notify_all();
        }
    }

    /// Ends this orca as SIGKILL would: no shutdown step runs, nothing in memory survives.
    /// kube-runtime's controller may print a panic (`JoinError::Cancelled`) from a worker as
    /// its reconcile tasks are cancelled under it; a real SIGKILL has no such moment, and the
    /// panic takes nothing with it that the crash did not already.
    pub fn crash(mut self) {
        self.thaw();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }

    /// Ends this orca as SIGTERM would: the controllers finish their current steps.
    pub fn stop(mut self) {
        self.thaw();
        self.shutdown.cancel();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(15));
        }
    }

    /// The value of an unlabelled gauge or counter on orca's metrics port.
    ///
    /// # Errors
    /// The port does not answer, or has no such series.
    pub fn metric(&self, name: &str) -> Result<f64> {
        crate::metrics::scrape(self.metrics_port)?
            .lines()
            .find_map(|line| {
                let (series, value) = line.split_once(' ')?;
                (series == name).then(|| value.trim().parse().ok())?
            })
            .with_context(|| format!("no series {name} in orca's metrics"))
    }
}

impl Drop for InProcessOrca {
    fn drop(&mut self) {
        self.thaw();
        if let Some(runtime) = self.runtime.take() {
            self.shutdown.cancel();
            runtime.shutdown_background();
        }
    }
}
