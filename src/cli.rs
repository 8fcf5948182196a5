//! The command line, declared with clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// tollgate: an exact, fast rate limiter for API gateways.
#[derive(Debug, Parser)]
#[command(name = "tollgate", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Apply a JSON array of operations to a fresh gateway and print the JSON
    /// array of outputs (one per operation).
    Run(RunArguments),
    /// Run the rate-limiting gateway: a reverse proxy in front of your
    /// upstreams (built-in defaults: 127.0.0.1:8080, admin on 127.0.0.1:8081).
    Serve(ServeArguments),
    /// Envoy's rate limit service, a drop-in replacement for
    /// envoyproxy/ratelimit: gRPC `ShouldRateLimit` (0.0.0.0:8081), HTTP
    /// `/json` and `/healthcheck` (0.0.0.0:8080), debug (0.0.0.0:6070); its
    /// YAML files from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY
    /// (or --config DIR), reloaded when they change. Every flag also reads
    /// the Go service's environment variable.
    Rls(Box<RlsCommand>),
    /// Envoy's rate limit quota service (RLQS): gRPC
    /// `StreamRateLimitQuotas` (0.0.0.0:8081), `/healthcheck` (0.0.0.0:8080),
    /// debug `/rlqs` and `/metrics` (0.0.0.0:6070). It splits each bucket's
    /// limit, from `tollgate rls`'s YAML, among the Envoys that report it,
    /// by their demand. It takes `tollgate rls`'s flags and environment
    /// variables; those that mean nothing here (shadow mode, headers,
    /// refunds, store failure policy...) are refused when set. See
    /// docs/RLQS.md.
    Rlqs(Box<tollgate_rlqs::RlqsArguments>),
    /// Check a gateway configuration without starting (as `nginx -t`): print
    /// what it would put in force and every warning; exit 0 when it is
    /// valid, 2 otherwise.
    CheckConfig(CheckConfigArguments),
    /// Run one or more policies against a traffic pattern in tollgate's own
    /// engine, offline, and show what each allows and refuses over time:
    /// a picture (SVG or PNG) or the numbers (JSON). See docs/SIMULATE.md.
    Simulate(SimulateArguments),
    /// Replay access logs through a gateway configuration's plans, routes and
    /// budgets, offline, on the logs' own timestamps: the requests and
    /// would-be refusals per tier and per route, the keys most refused, the
    /// peak rates; `--compare` sets a second configuration beside it. See
    /// docs/REPLAY.md.
    Replay(ReplayArguments),
}

#[derive(Debug, Args)]
pub(crate) struct CheckConfigArguments {
    /// The gateway's TOML configuration (see docs/CONFIG.md).
    #[arg(
        value_name = "FILE",
        required_unless_present = "config_option",
        conflicts_with = "config_option"
    )]
    pub(crate) file: Option<PathBuf>,
    /// The same file, named as `serve --config` names it.
    #[arg(long = "config", id = "config_option", value_name = "FILE")]
    pub(crate) config_option: Option<PathBuf>,
    /// A Redis URL standing for `[store] url`, as `serve --store` takes it.
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
}

impl CheckConfigArguments {
    /// The file to check, given either way (clap requires one of the two).
    pub(crate) fn config(&self) -> &std::path::Path {
        self.file
            .as_deref()
            .or(self.config_option.as_deref())
            .unwrap_or(std::path::Path::new(""))
    }
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = false)]
pub(crate) struct RlsCommand {
    #[command(subcommand)]
    pub(crate) command: Option<RlsSubcommand>,
    #[command(flatten)]
    pub(crate) arguments: tollgate_rls::RlsArguments,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RlsSubcommand {
    /// Drive the rate limit service (in memory, on a clock each step sets)
    /// with a JSON array of steps and print the JSON array of outputs.
    Run(RlsRunArguments),
}

#[derive(Debug, Args)]
pub(crate) struct RlsRunArguments {
    /// The steps file; `-` reads standard input.
    #[arg(value_name = "FILE|-")]
    pub(crate) input: PathBuf,
    /// The directory of the YAML configuration files loaded at the start
    /// (named by their path in it); none when absent.
    #[arg(long, value_name = "DIR")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArguments {
    /// The gateway's TOML configuration (see docs/CONFIG.md); the built-in
    /// defaults when absent.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Keep the limits in Redis, shared by every gateway using it
    /// (`redis://host:port`, or `redis-cluster://host:port,host:port` for a
    /// Redis Cluster); overrides `[store] url` of the config.
    #[arg(long, value_name = "URL")]
    pub(crate) store: Option<String>,
    /// Log format on stderr; the level comes from RUST_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub(crate) log_format: LogFormat,
}

/// How logs are written.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct RunArguments {
    /// The operations file; `-` reads standard input.
    #[arg(value_name = "FILE|-")]
    pub(crate) input: PathBuf,
    /// A TOML file of limiter settings (default policy, tiers, exempt keys,
    /// eviction, key cap); the built-in defaults when absent.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct SimulateArguments {
    /// A policy, `[NAME=]ALGORITHM:LIMIT/WINDOW[,burst=N]`, as
    /// `free=token_bucket:100/1m,burst=20`; repeat it to compare policies
    /// on one time axis.
    #[arg(long = "policy", value_name = "POLICY", required = true)]
    pub(crate) policies: Vec<String>,
    /// The traffic: `steady:RATE`, `bursts:SIZE/EVERY`, `idle-burst:IDLE,SIZE`,
    /// `poisson:RATE[,seed=N]` or `file:PATH` (a timestamp per line); a RATE
    /// is COUNT/SPAN, as `10/s` or `600/1m`. At most 10,000,000 requests.
    #[arg(long, value_name = "PATTERN")]
    pub(crate) pattern: String,
    /// How long to run, as `60s` or `10m`: 60s by default; a file of
    /// timestamps runs from its first to past its last unless given.
    #[arg(long, value_name = "SPAN")]
    pub(crate) duration: Option<String>,
    /// The time each point of the result counts over, as `1s` or `500ms`
    /// (default: a hundredth of the run, in whole milliseconds).
    #[arg(long, value_name = "SPAN")]
    pub(crate) step: Option<String>,
    /// `json` (the numbers, to standard output unless --output), `svg` or
    /// `png` (a picture; `png` needs --output). Default: from --output's
    /// extension, else `json`.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) format: Option<String>,
    /// Where to write the result; standard output when absent.
    #[arg(long, value_name = "FILE")]
    pub(crate) output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct ReplayArguments {
    /// The gateway configuration to replay through (see docs/CONFIG.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,
    /// A second configuration, shown beside the first.
    #[arg(long, value_name = "FILE")]
    pub(crate) compare: Option<PathBuf>,
    /// The access logs, read in time order together (`-` reads standard
    /// input).
    #[arg(value_name = "LOG", required = true)]
    pub(crate) logs: Vec<PathBuf>,
    /// The logs' format: `tollgate` (its access log, JSON or text), `nginx`
    /// (`combined`) or `envoy` (a JSON access log).
    #[arg(long, value_name = "FORMAT", default_value = "tollgate")]
    pub(crate) log_format: String,
    /// Where the key is: for nginx `remote_user` (default) or `field:N` (the
    /// N-th field after the user agent); for Envoy the JSON field's name
    /// (default `api_key`).
    #[arg(long, value_name = "FIELD")]
    pub(crate) key_field: Option<String>,
    /// `table` (default) or `json`.
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    pub(crate) format: String,
    /// Draw the requests allowed and refused over time to FILE (`.svg` or
    /// `.png`).
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    /// What the picture has a panel for: each configuration's requests
    /// (`overall`), or each tier or route (the 12 most refused), each
    /// configuration's in turn.
    #[arg(long, value_name = "GROUP", default_value = "overall",
        value_parser = ["overall", "tier", "route"])]
    pub(crate) plot_by: String,
    /// How many of the keys most often refused to list, 1 to 1000.
    #[arg(long, value_name = "N", default_value_t = 10,
        value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub(crate) top: u16,
    /// How far out of order a log's lines are put back in order, as `60s`:
    /// its lines are held in memory meanwhile.
    #[arg(long, value_name = "SPAN", default_value = "60s")]
    pub(crate) window: String,
}
