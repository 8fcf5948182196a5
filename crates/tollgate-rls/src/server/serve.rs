//! `tollgate rls`: read the settings, open the store, load the configuration,
//! bind and serve the listeners, watch the files, and stop on a signal, as
//! envoyproxy/ratelimit's runner (src/service_cmd/runner/runner.go) does.

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::SignalKind;
use tollgate_core::{Clock, LimiterConfig, Store, SystemClock};
use tollgate_redis::{RedisConfig, TimeSource};
use tollgate_serve::{OpenStoreError, Signals, StoreLocation};

use super::ServerError;
use super::stats_export::{CounterSource, prometheus_page, spawn_statsd};
use super::{DebugPages, Decide, DecideFuture, Health, ListenAddresses, Listeners, RunningServer};
use crate::config::files::{ConfigDirError, ConfigSource, POLL_INTERVAL, ReloadCounters, watch};
use crate::proto::RateLimitRequest;
use crate::service::RateLimitService;
use crate::settings::{RlsArguments, SettingsError, StoreSettings, refuse_unsupported};

/// Why `tollgate rls` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RlsError {
    /// The settings are refused.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A listener cannot be bound.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// The store cannot be opened (Redis, or the in-memory store).
    #[error(transparent)]
    Store(#[from] OpenStoreError),
    /// None of the signals that stop the service can be listened for.
    #[error("cannot listen for SIGTERM, SIGINT or SIGHUP")]
    Signals(#[source] std::io::Error),
    /// The configuration directory cannot be read at start.
    #[error(transparent)]
    ConfigDirectory(ConfigDirError),
}

/// The start of every Redis key when `CACHE_KEY_PREFIX` is empty:
/// `tollgate-rls`, not the gateway's `tollgate`, so that a gateway and a rate
/// limit service sharing one Redis never read each other's state (the
/// store's shared default policy, `PREFIX:config`, above all: a gateway on
/// the service's prefix adopted the service's built-in 5 per 60 s).
pub const DEFAULT_REDIS_PREFIX: &str = "tollgate-rls";

/// The longest unit's window (a year): the in-memory store keeps an idle
/// key's window this long, so no window is forgotten before it ends.
const LONGEST_WINDOW_S: u64 = 31_536_000;

impl Decide for RateLimitService {
    fn decide<'a>(&'a self, request: &'a RateLimitRequest) -> DecideFuture<'a> {
        Box::pin(async move {
            self.should_rate_limit(request)
                .await
                .map_err(|error| error.to_string())
        })
    }
}

/// `tollgate rls` running: its listeners, service and background tasks.
pub struct Rls {
    server: RunningServer,
    service: Arc<RateLimitService>,
    counters: Arc<ReloadCounters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    prometheus: Option<RunningServer>,
}

impl Rls {
    /// Starts the service these settings describe on the current tokio
    /// runtime (the environment is not read: see [`serve`] for that). The
    /// configuration files are polled every second.
    ///
    /// A configuration that does not load at start is logged and counted,
    /// and the service starts without one (every request then fails with `no
    /// rate limit configuration loaded` until the files are fixed), as the Go
    /// service does.
    ///
    /// # Errors
    ///
    /// [`RlsError`]: refused settings, a store that cannot be opened, a
    /// configuration directory that cannot be read, a listener that cannot be
    /// bound.
    pub async fn start(arguments: &RlsArguments) -> Result<Rls, RlsError> {
        Rls::start_polling(arguments, POLL_INTERVAL).await
    }

    /// [`Rls::start`], polling the files every `interval`.
    ///
    /// # Errors
    ///
    /// As [`Rls::start`].
    pub async fn start_polling(
        arguments: &RlsArguments,
        interval: Duration,
    ) -> Result<Rls, RlsError> {
        Rls::start_on_clock(arguments, interval, Arc::new(SystemClock::new())).await
    }

    /// [`Rls::start_polling`] with windows, resets and store times read from
    /// `clock` (a [`ManualClock`](tollgate_core::ManualClock) in tests, so
    /// that no window boundary falls inside one) instead of the system clock.
    ///
    /// # Errors
    ///
    /// As [`Rls::start`].
    pub async fn start_on_clock(
        arguments: &RlsArguments,
        interval: Duration,
        clock: Arc<dyn Clock>,
    ) -> Result<Rls, RlsError> {
        arguments.check()?;
        let store_settings = arguments.store_settings()?;
        let store = open_store(
            &store_settings,
            &arguments.cache_key_prefix,
            Arc::clone(&clock),
        )?;

        let source = ConfigSource::from_arguments(arguments);
        tracing::info!(directory = %source.describe(), "configuration files from");
        let reading = source.clone();
        let files = tokio::task::spawn_blocking(move || reading.read())
            .await
            .unwrap_or_else(|_| Ok(Default::default()))
            .map_err(RlsError::ConfigDirectory)?;
        for skipped in &files.skipped {
            tracing::warn!(file = %skipped, "runtime: error processing a configuration file");
        }
        let settings = arguments.service_settings();
        let counters = Arc::new(ReloadCounters::default());
        let service = match source.load(&files) {
            Ok(config) => {
                counters
                    .successes
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::info!("Successfully loaded the initial ratelimit configs");
                RateLimitService::new(store, config, settings, clock)
            }
            Err(error) => {
                counters
                    .errors
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::error!(%error, "Error loading new configuration");
                let service = RateLimitService::without_config(store, settings, clock);
                service.reload_failed();
                service
            }
        };
        let service = Arc::new(service);

        let addresses = ListenAddresses {
            grpc: join_host_port(&arguments.grpc_host, arguments.grpc_port),
            http: join_host_port(&arguments.host, arguments.port),
            debug: Some(join_host_port(&arguments.debug_host, arguments.debug_port)),
        };
        let listeners = Listeners::bind(&addresses)
            .await?
            .with_idle_timeout(arguments.idle_timeout);
        let stats_service = Arc::clone(&service);
        let counter_source: CounterSource = Arc::new(move || stats_service.stats());
        let prometheus = if arguments.use_prometheus && !arguments.disable_stats {
            Some(
                serve_prometheus(
                    arguments,
                    Arc::clone(&counter_source),
                    listeners.connections(),
                )
                .await?,
            )
        } else {
            None
        };
        let health = Health::new(
            arguments.healthy_with_at_least_one_config_loaded,
            service.config_has_domains(),
        )
        .await;
        let pages = debug_pages(
            Arc::clone(&counter_source),
            Arc::clone(&service),
            arguments.settings_dump(),
        );
        let health_of_reloads = health.clone();
        let server = listeners.serve(
            arguments.worker_count(),
            Arc::clone(&service) as Arc<dyn Decide>,
            health,
            pages,
        )?;

        let mut tasks = vec![watch(
            source,
            interval,
            files,
            Arc::clone(&counters),
            Arc::new(HealthyReloads {
                service: Arc::clone(&service),
                health: health_of_reloads,
            }) as Arc<dyn crate::config::files::ReloadTarget>,
        )];
        if arguments.use_statsd && !arguments.disable_stats {
            let address = join_host_port(&arguments.statsd_host, arguments.statsd_port);
            // On by the Go service's default: say so once, and where.
            tracing::info!(
                %address,
                "stats sent to statsd (USE_STATSD is true by default, as in the Go service; \
                 USE_STATSD=false stops them, USE_PROMETHEUS=true serves a Prometheus page \
                 instead)"
            );
            tasks.push(spawn_statsd(
                address,
                arguments.stats_flush_interval,
                counter_source,
                statsd_asked_for(),
            ));
        }
        Ok(Rls {
            server,
            service,
            counters,
            tasks,
            prometheus,
        })
    }

    /// The listeners.
    pub fn server(&self) -> &RunningServer {
        &self.server
    }

    /// The service answering.
    pub fn service(&self) -> &Arc<RateLimitService> {
        &self.service
    }

    /// Reloads so far (the start's included).
    pub fn reload_counters(&self) -> &Arc<ReloadCounters> {
        &self.counters
    }

    /// Reports unhealthy, stops the listeners (requests in flight finish
    /// within [`SHUTDOWN_GRACE`](super::SHUTDOWN_GRACE), then their
    /// connections are closed) and the background tasks.
    pub async fn shutdown(self) {
        self.shutdown_within(super::SHUTDOWN_GRACE).await;
    }

    /// [`Rls::shutdown`] with a grace period of `grace`.
    pub async fn shutdown_within(self, grace: Duration) {
        for task in &self.tasks {
            task.abort();
        }
        if let Some(prometheus) = self.prometheus {
            prometheus.shutdown_within(grace).await;
        }
        self.server.shutdown_within(grace).await;
    }
}

/// `tollgate rls`: refuses the Go settings tollgate does not support (read
/// from the process's environment), starts ([`Rls::start`]) and serves until
/// SIGTERM, SIGINT or SIGHUP (the Go service stops on all three), then stops
/// gracefully.
///
/// # Errors
///
/// [`RlsError`] when the service cannot start.
pub async fn serve(arguments: RlsArguments) -> Result<(), RlsError> {
    refuse_unsupported(|name| std::env::var(name).ok())?;
    let mut signals = Signals::listen(&[
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
    ])
    .map_err(RlsError::Signals)?;
    let mut rls = Rls::start(&arguments).await?;
    tokio::select! {
        () = signals.next() => tracing::info!("Received a signal, initiating shutdown"),
        () = rls.server.wait_for_failure() => tracing::error!("a listener stopped"),
    }
    tokio::select! {
        () = rls.shutdown() => {}
        () = signals.next() => tracing::warn!("a second signal: stopping at once"),
    }
    Ok(())
}

/// The store `settings` name. In Redis, every key starts with
/// `CACHE_KEY_PREFIX` (as the Go service's keys do; [`DEFAULT_REDIS_PREFIX`] when empty),
/// followed by a hash of the service's key.
fn open_store(
    settings: &StoreSettings,
    cache_key_prefix: &str,
    clock: Arc<dyn Clock>,
) -> Result<Arc<dyn Store>, RlsError> {
    let limits = LimiterConfig {
        policy_lists: Default::default(),
        idle_eviction_s: LONGEST_WINDOW_S,
        ..LimiterConfig::default()
    };
    let location = match settings {
        StoreSettings::Memory => StoreLocation::Memory,
        StoreSettings::Redis {
            url,
            ca_file,
            timeout,
        } => {
            let mut redis = RedisConfig::new(url.as_str());
            redis.timeout = *timeout;
            redis.ca_file.clone_from(ca_file);
            redis.prefix = if cache_key_prefix.is_empty() {
                DEFAULT_REDIS_PREFIX.to_owned()
            } else {
                cache_key_prefix.to_owned()
            };
            // Windows follow this process's clock, as the Go service's do.
            redis.time = TimeSource::Clock(Arc::clone(&clock));
            StoreLocation::Redis(Box::new(redis))
        }
    };
    Ok(tollgate_serve::open_store(&location, &limits, clock)?)
}

/// Go's `net.JoinHostPort`: an IPv6 host in brackets.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn debug_pages(
    counters: CounterSource,
    service: Arc<RateLimitService>,
    settings: String,
) -> DebugPages {
    DebugPages {
        settings: Arc::new(move || settings.clone()),
        stats: Arc::new(move || {
            counters()
                .iter()
                .map(|(name, value)| format!("{name}: {value}\n"))
                .collect()
        }),
        config: Arc::new(move || service.config_dump()),
    }
}

/// Serves the Prometheus page at `PROMETHEUS_ADDR` + `PROMETHEUS_PATH`.
async fn serve_prometheus(
    arguments: &RlsArguments,
    counters: CounterSource,
    connections: Arc<tollgate_serve::Connections>,
) -> Result<RunningServer, RlsError> {
    let address = match arguments.prometheus_addr.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => arguments.prometheus_addr.clone(),
    };
    let path = if arguments.prometheus_path.starts_with('/') {
        arguments.prometheus_path.clone()
    } else {
        format!("/{}", arguments.prometheus_path)
    };
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|source| ServerError::Bind {
            listener: "Prometheus",
            address: address.clone(),
            source,
        })?;
    Ok(RunningServer::serve_router(
        listener,
        Health::serving().await,
        axum::Router::new().route(
            &path,
            axum::routing::get(move || {
                let counters = Arc::clone(&counters);
                async move { prometheus_page(&counters()) }
            }),
        ),
        (arguments.idle_timeout, connections),
    ))
}

/// Reloads put in force by the service, and the health told whether the
/// configuration now in force has a domain (`HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`).
struct HealthyReloads {
    service: Arc<RateLimitService>,
    health: Health,
}

impl crate::config::files::ReloadTarget for HealthyReloads {
    fn reloaded(&self, config: crate::RateLimitConfig) {
        let loaded = !config.is_empty();
        self.service.reload(config);
        // The flag now, in reload order; the gRPC status after.
        self.health.set_config_loaded(loaded);
        let health = self.health.clone();
        tokio::spawn(async move { health.report_now().await });
    }

    fn reload_failed(&self) {
        self.service.reload_failed();
    }
}

/// Whether this process was asked for statsd (`USE_STATSD` in its
/// environment, or `--use-statsd` on its command line), rather than having
/// it on by the Go service's default: an unreachable statsd is then worth
/// a warning.
fn statsd_asked_for() -> bool {
    std::env::var_os("USE_STATSD").is_some()
        || std::env::args_os().any(|argument| {
            argument
                .to_str()
                .is_some_and(|argument| argument.starts_with("--use-statsd"))
        })
}
