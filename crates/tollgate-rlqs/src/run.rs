//! `tollgate rlqs` as a whole: read the settings, load the configuration,
//! open the listeners, watch the files (a new limit is pushed to its Envoys
//! at once), abandon idle buckets every second, and stop on a signal.

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::SignalKind;
use tollgate_core::{Clock, SystemClock};
use tollgate_rls::settings::{SettingsError, StoreSettings, refuse_unsupported};
use tollgate_rls::{
    ConfigDirError, ConfigSource, POLL_INTERVAL, RateLimitConfig, ReloadCounters, ReloadTarget,
    watch_config,
};
use tollgate_serve::Signals;

use tollgate_redis::{RedisConfig, RedisRecords};

use crate::quotas::Quotas;
use tollgate_rls::server::{SHUTDOWN_GRACE, ServerError, join_host_port};

use crate::server::{Addresses, Listening, listen};
use crate::settings::RlqsArguments;
use crate::shared::SharedState;

/// How often idle buckets are looked for.
pub const IDLE_SWEEP: Duration = Duration::from_secs(1);

/// Why `tollgate rlqs` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RlqsError {
    /// The settings are refused.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// `tollgate rls` settings that mean nothing here were set (their names).
    #[error("{0}")]
    Inapplicable(String),
    /// The Redis settings cannot be used.
    #[error(transparent)]
    Redis(#[from] tollgate_redis::RedisStoreError),
    /// A listener cannot be opened.
    #[error(transparent)]
    Listen(#[from] ServerError),
    /// The configuration directory cannot be read at start.
    #[error(transparent)]
    ConfigDirectory(#[from] ConfigDirError),
    /// None of the signals that stop the service can be listened for.
    #[error("cannot listen for SIGTERM, SIGINT or SIGHUP")]
    Signals(#[source] std::io::Error),
}

/// `tollgate rlqs` running.
pub struct Rlqs {
    listening: Listening,
    quotas: Arc<Quotas>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// A reload's target: the allocator, which pushes changed limits.
struct Reloads(Arc<Quotas>);

impl ReloadTarget for Reloads {
    fn reloaded(&self, config: RateLimitConfig) {
        tracing::info!("Successfully loaded new configuration");
        let quotas = Arc::clone(&self.0);
        tokio::spawn(async move { quotas.reload(Some(Arc::new(config))).await });
    }

    fn reload_failed(&self) {}
}

impl Rlqs {
    /// Starts on the current tokio runtime with the system clock, the files
    /// polled every second.
    ///
    /// # Errors
    ///
    /// [`RlqsError`].
    pub async fn start(arguments: &RlqsArguments) -> Result<Rlqs, RlqsError> {
        Rlqs::start_on_clock(arguments, POLL_INTERVAL, Arc::new(SystemClock::new())).await
    }

    /// [`Rlqs::start`] with the files polled every `interval` and demand
    /// read on `clock`.
    ///
    /// # Errors
    ///
    /// [`RlqsError`].
    pub async fn start_on_clock(
        arguments: &RlqsArguments,
        interval: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Rlqs, RlqsError> {
        arguments.rls.check()?;
        arguments
            .refuse_inapplicable()
            .map_err(RlqsError::Inapplicable)?;
        let shared = shared_state(arguments)?;
        let source = ConfigSource::from_arguments(&arguments.rls);
        tracing::warn!(directory = %source.describe(), "configuration files from");
        let reading = source.clone();
        let files = tokio::task::spawn_blocking(move || reading.read())
            .await
            .unwrap_or_else(|_| Ok(Default::default()))?;
        let counters = Arc::new(ReloadCounters::default());
        let config = match source.load(&files) {
            Ok(config) => Some(Arc::new(config)),
            Err(error) => {
                tracing::error!(%error, "Error loading new configuration");
                None
            }
        };
        let quotas = Quotas::shared(arguments.allocator_settings(), config, clock, shared);
        let dump_quotas = Arc::clone(&quotas);
        let addresses = Addresses {
            grpc: join_host_port(&arguments.rls.grpc_host, arguments.rls.grpc_port),
            http: join_host_port(&arguments.rls.host, arguments.rls.port),
            debug: join_host_port(&arguments.rls.debug_host, arguments.rls.debug_port),
        };
        let listening = listen(
            &addresses,
            (arguments.rls.worker_count(), arguments.rls.idle_timeout),
            &quotas,
            Arc::new(move || dump_quotas.config_dump()),
        )
        .await?;
        let sweeping = Arc::clone(&quotas);
        let tasks = vec![
            watch_config(
                source,
                interval,
                files,
                counters,
                Arc::new(Reloads(Arc::clone(&quotas))),
            ),
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(IDLE_SWEEP);
                loop {
                    ticks.tick().await;
                    sweeping.abandon_idle().await;
                }
            }),
        ];
        Ok(Rlqs {
            listening,
            quotas,
            tasks,
        })
    }

    /// The listeners.
    pub fn listening(&self) -> &Listening {
        &self.listening
    }

    /// The allocator and streams.
    pub fn quotas(&self) -> &Arc<Quotas> {
        &self.quotas
    }

    /// Stops: unhealthy, every stream ended, calls in flight given `grace`.
    pub async fn shutdown_within(self, grace: Duration) {
        for task in &self.tasks {
            task.abort();
        }
        self.listening.shutdown_within(grace).await;
    }
}

/// The start of every Redis key when `CACHE_KEY_PREFIX` is empty:
/// `tollgate-rlqs`, apart from `tollgate rls`'s and the gateway's.
pub const DEFAULT_REDIS_PREFIX: &str = "tollgate-rlqs";

/// The longest a report waits for Redis, whatever `REDIS_TIMEOUT` says.
pub const LONGEST_STORE_WAIT: Duration = Duration::from_secs(1);

/// The shared store the settings name (`REDIS_URL`), or none (memory).
fn shared_state(arguments: &RlqsArguments) -> Result<Option<SharedState>, RlqsError> {
    let StoreSettings::Redis {
        url,
        ca_file,
        timeout,
    } = arguments.rls.store_settings()?
    else {
        tracing::warn!("quota state kept in memory (one replica)");
        return Ok(None);
    };
    let mut config = RedisConfig::new(url.as_str());
    // `REDIS_TIMEOUT` (10 s by default, the Go service's), cut to
    // `LONGEST_STORE_WAIT`: a report must not wait longer than a fraction of
    // Envoy's 5 s interval.
    config.timeout = timeout.min(LONGEST_STORE_WAIT);
    config.ca_file = ca_file;
    config.prefix = if arguments.rls.cache_key_prefix.is_empty() {
        DEFAULT_REDIS_PREFIX.to_owned()
    } else {
        arguments.rls.cache_key_prefix.clone()
    };
    tracing::warn!(url = %tollgate_redis::redacted_url(url.as_str()), "quota state kept in Redis (replicas share it)");
    let records = RedisRecords::connect(&config)?;
    Ok(Some(SharedState {
        records,
        time_to_live: arguments.abandon_after + arguments.assignment_ttl + Duration::from_secs(10),
    }))
}

/// `tollgate rlqs`: refuses the Go settings tollgate does not support,
/// starts, and serves until SIGTERM, SIGINT or SIGHUP, then stops
/// gracefully (a second signal stops at once).
///
/// # Errors
///
/// [`RlqsError`] when it cannot start.
pub async fn serve(arguments: RlqsArguments) -> Result<(), RlqsError> {
    refuse_unsupported(|name| std::env::var(name).ok())?;
    let mut signals = Signals::listen(&[
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
    ])
    .map_err(RlqsError::Signals)?;
    let mut rlqs = Rlqs::start(&arguments).await?;
    tokio::select! {
        () = signals.next() => tracing::info!("Received a signal, initiating shutdown"),
        () = rlqs.listening.wait_for_failure() => tracing::error!("a listener stopped"),
    }
    tokio::select! {
        () = rlqs.shutdown_within(SHUTDOWN_GRACE) => {}
        () = signals.next() => tracing::warn!("a second signal: stopping at once"),
    }
    Ok(())
}
