//! `tollgate rls run --config DIR FILE|-`: the rate limit service driven by a
//! JSON list of steps, on a clock set by each step and an in-memory store
//! (or any store, through [`run_on`]).
//!
//! Input, a JSON array; each step is one of
//!
//! - `{"now": S, "request": R}`: `R` a `RateLimitRequest` in proto3 JSON;
//!   output `{"response": <RateLimitResponse in proto3 JSON>, "stats": {...}}`
//!   or `{"error": "<the Go service's message>", "stats": {...}}`;
//! - `{"now": S, "add_config": {"name": "f.yaml", "yaml": "..."}}` (adds or
//!   replaces a file) and `{"now": S, "remove_config": "f.yaml"}`: the file set
//!   is reloaded; output `{"config": "loaded", "stats": {...}}` or
//!   `{"config_error": "<file>: <message>", "stats": {...}}`, and after an
//!   error the previous configuration stays in force (the file stays in the
//!   set, as a bad file stays in a watched directory).
//!
//! `now` is unix seconds (up to 18,446,744,073: nanoseconds fit in 64 bits),
//! never before the previous step's. `stats` holds every counter that is not 0
//! so far, by full statsd name. Files load in name order. A directory without
//! files starts with no configuration (requests fail with `no rate limit
//! configuration loaded` until a file is added); the files given load at the
//! start, which counts one `config_load_success`.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tollgate_core::{Clock, LimiterConfig, ManualClock, MemoryStore, Store};

use crate::config::error::ConfigError;
use crate::config::loader::LoaderOptions;
use crate::config::tree::RateLimitConfig;
use crate::proto::RateLimitRequest;
use crate::service::{RateLimitService, ServiceSettings};

/// Why the harness could not run.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The input is not a JSON array.
    #[error("the input is not a JSON array of steps: {0}")]
    Input(String),
    /// A step is malformed: not an object, no valid `now`, not exactly one of
    /// `request`, `add_config`, `remove_config`, or a request that is not a
    /// `RateLimitRequest` in proto3 JSON. `index` counts from 0.
    #[error("step {index}: {message}")]
    Step {
        /// The step's index.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The configuration files given at the start do not load. Its text
    /// holds the configuration error's (not a source as well, so a chain of
    /// causes prints it once).
    #[error("the initial configuration does not load: {0}")]
    Config(ConfigError),
    /// The in-memory store could not be built (never, with its defaults).
    #[error("the store cannot be built: {0}")]
    Store(String),
}

impl From<ConfigError> for HarnessError {
    fn from(error: ConfigError) -> Self {
        HarnessError::Config(error)
    }
}

/// Runs `input` (a JSON array of steps) against a fresh service with the
/// configuration files `config_dir_files` (`(name, yaml)`) and `settings`;
/// returns the JSON array of outputs, one per step.
///
/// # Errors
///
/// [`HarnessError`]: the input or a step is malformed, or the initial files do
/// not load. Service errors and reload errors are outputs, not errors.
pub fn run(
    config_dir_files: Vec<(String, String)>,
    settings: ServiceSettings,
    loader: LoaderOptions,
    input: &[u8],
) -> Result<Vec<u8>, HarnessError> {
    let clock = Arc::new(ManualClock::new(0));
    let store = MemoryStore::new(&LimiterConfig::default(), clock.clone())
        .map_err(|error| HarnessError::Store(error.to_string()))?;
    let store: Arc<dyn Store> = Arc::new(store);
    block_on(run_on(
        store,
        clock,
        config_dir_files,
        settings,
        loader,
        input,
    ))
}

/// [`run`] on `store`, which decides on `clock`'s time: the harness moves
/// `clock` to each step's `now` (a store on another clock would decide at
/// other times than the steps say). A store that needs a Tokio runtime (the
/// Redis store) is polled in the caller's.
///
/// # Errors
///
/// As [`run`].
pub async fn run_on(
    store: Arc<dyn Store>,
    clock: Arc<ManualClock>,
    config_dir_files: Vec<(String, String)>,
    settings: ServiceSettings,
    loader: LoaderOptions,
    input: &[u8],
) -> Result<Vec<u8>, HarnessError> {
    let steps: Vec<Value> =
        serde_json::from_slice(input).map_err(|error| HarnessError::Input(error.to_string()))?;
    let files: BTreeMap<String, String> = config_dir_files.into_iter().collect();
    let service = if files.is_empty() {
        RateLimitService::without_config(store, settings, clock.clone())
    } else {
        let config = load(&files, &loader)?;
        RateLimitService::new(store, config, settings, clock.clone())
    };
    let mut harness = Harness {
        service,
        clock,
        files,
        loader,
    };
    let mut outputs = Vec::with_capacity(steps.len());
    for (index, step) in steps.iter().enumerate() {
        let output = harness
            .step(step)
            .await
            .map_err(|message| HarnessError::Step { index, message })?;
        outputs.push(output);
    }
    serde_json::to_vec(&outputs).map_err(|error| HarnessError::Input(error.to_string()))
}

struct Harness {
    service: RateLimitService,
    clock: Arc<ManualClock>,
    files: BTreeMap<String, String>,
    loader: LoaderOptions,
}

impl Harness {
    async fn step(&mut self, step: &Value) -> Result<Value, String> {
        let object = step.as_object().ok_or("a step must be a JSON object")?;
        self.set_now(object)?;
        let actions: Vec<&str> = object
            .keys()
            .map(String::as_str)
            .filter(|key| *key != "now")
            .collect();
        let mut output = match actions.as_slice() {
            ["request"] => self.request(&object["request"]).await?,
            ["add_config"] => {
                let add = &object["add_config"];
                let name = add["name"]
                    .as_str()
                    .ok_or("add_config needs a string name")?;
                let yaml = add["yaml"]
                    .as_str()
                    .ok_or("add_config needs a string yaml")?;
                if add.as_object().is_some_and(|add| add.len() != 2) {
                    return Err("add_config takes name and yaml only".to_owned());
                }
                self.files.insert(name.to_owned(), yaml.to_owned());
                self.reload()
            }
            ["remove_config"] => {
                let name = object["remove_config"]
                    .as_str()
                    .ok_or("remove_config needs a file name")?;
                self.files.remove(name);
                self.reload()
            }
            _ => {
                return Err(format!(
                    "a step needs now and exactly one of request, add_config, remove_config; got {actions:?}"
                ));
            }
        };
        output.insert("stats".to_owned(), json!(self.service.stats()));
        Ok(Value::Object(output))
    }

    fn set_now(&self, object: &Map<String, Value>) -> Result<(), String> {
        let now_s = object
            .get("now")
            .and_then(Value::as_u64)
            .ok_or("now must be an unsigned integer (unix seconds)")?;
        let now = now_s
            .checked_mul(1_000_000_000)
            .ok_or_else(|| format!("now {now_s} is too late (nanoseconds pass 2^64)"))?;
        let current = self.clock.now_nanos();
        if now < current {
            return Err(format!(
                "now {now_s} is before the previous step's {}",
                current / 1_000_000_000
            ));
        }
        self.clock.advance(Duration::from_nanos(now - current));
        Ok(())
    }

    async fn request(&self, request: &Value) -> Result<Map<String, Value>, String> {
        let request: RateLimitRequest = serde_json::from_value(request.clone())
            .map_err(|error| format!("not a RateLimitRequest: {error}"))?;
        let mut output = Map::new();
        match self.service.should_rate_limit(&request).await {
            Ok(response) => {
                let response = serde_json::to_value(&response).map_err(|e| e.to_string())?;
                output.insert("response".to_owned(), response);
            }
            Err(error) => {
                output.insert("error".to_owned(), json!(error.to_string()));
            }
        }
        Ok(output)
    }

    fn reload(&self) -> Map<String, Value> {
        let mut output = Map::new();
        match load(&self.files, &self.loader) {
            Ok(config) => {
                self.service.reload(config);
                output.insert("config".to_owned(), json!("loaded"));
            }
            Err(error) => {
                self.service.reload_failed();
                output.insert("config_error".to_owned(), json!(error.to_string()));
            }
        }
        output
    }
}

fn load(
    files: &BTreeMap<String, String>,
    loader: &LoaderOptions,
) -> Result<RateLimitConfig, ConfigError> {
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(name, yaml)| (name.as_str(), yaml.as_str()))
        .collect();
    RateLimitConfig::from_sources(&files, loader)
}

/// Runs a future to completion on this thread (the in-memory store's futures
/// are ready at once; any other future is polled whenever it wakes the
/// thread).
pub fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}
