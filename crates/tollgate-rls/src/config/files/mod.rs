//! Where the configuration files are, how they are named, and reloading them
//! when they change.
//!
//! envoyproxy/ratelimit reads its files through lyft/goruntime: every file
//! under `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`, recursively, named by its path
//! there with `/` made `.` (its runtime key: `config.basic.yaml` for
//! `config/basic.yaml`), keeping those under `RUNTIME_APPDIRECTORY`
//! (`RUNTIME_WATCH_ROOT=true`, the default); with `RUNTIME_WATCH_ROOT=false`
//! the files under `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`,
//! named by their path there (`basic.yaml`). Files are read whatever their
//! extension; a symbolic link to a file is read, one to a directory is not
//! followed (goruntime walks with `lstat`); `RUNTIME_IGNOREDOTFILES` skips
//! names starting with `.`. That name is the one errors give.
//!
//! [`ConfigSource::directory`] (`--config DIR`, a tollgate extension) reads
//! DIR the same way, names its files `config.<path>`, and always skips dot
//! files, so a Kubernetes ConfigMap volume (files that are links into a
//! `..data` link to a `..<timestamp>` directory) is read once.
//!
//! [`watch`] polls the files' resolved contents every second and reloads when
//! they differ, which sees any edit, a `RUNTIME_ROOT` symlink swap and a
//! ConfigMap's `..data` swap alike (the Go service reloads on filesystem
//! events: with `RUNTIME_WATCH_ROOT=true` only when the root link changes). A
//! configuration that does not load is logged and counted
//! (`ratelimit.service.config_load_error`), and the one in force stays.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::error::ConfigError;
use crate::config::loader::LoaderOptions;
use crate::config::tree::RateLimitConfig;

/// The largest configuration file read (bigger ones are skipped and logged).
pub const MAX_CONFIG_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How often [`watch`] reads the files by default.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Where the configuration files are and how they are loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSource {
    location: Location,
    options: LoaderOptions,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Location {
    /// Walk `base`; name files `prefix` + their path with `/` as `.`; keep the
    /// names starting with `keep` (when set).
    Walk {
        base: PathBuf,
        prefix: String,
        keep: Option<String>,
        ignore_dot_files: bool,
    },
    /// goruntime's nil loader: an empty root or subdirectory names no files.
    Nothing { why: &'static str },
}

/// One configuration file read: its name (runtime key) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigFile {
    /// The name errors give (`config.basic.yaml`).
    pub name: String,
    /// The file's text.
    pub content: String,
}

/// The files of one read, in name order, with what could not be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigFiles {
    /// The files read.
    pub files: Vec<ConfigFile>,
    /// Paths skipped and why (unreadable, not UTF-8, too big, a link to a
    /// directory); goruntime logs and skips them too.
    pub skipped: Vec<String>,
}

/// A configuration that cannot be read or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigDirError {
    /// A file breaks a rule (named by its runtime key).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The directory itself cannot be read.
    #[error("cannot read the configuration directory {path}: {source}")]
    Directory {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

impl ConfigSource {
    /// The files of `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`,
    /// named as the Go service names them (see the module's documentation).
    pub fn runtime(
        root: &Path,
        subdirectory: &str,
        app_directory: &str,
        ignore_dot_files: bool,
        watch_root: bool,
        options: LoaderOptions,
    ) -> ConfigSource {
        let location = if watch_root {
            if root.as_os_str().is_empty() || subdirectory.is_empty() {
                Location::Nothing {
                    why: "RUNTIME_ROOT or RUNTIME_SUBDIRECTORY is empty",
                }
            } else {
                Location::Walk {
                    base: root.join(subdirectory),
                    prefix: String::new(),
                    keep: Some(format!("{app_directory}.")),
                    ignore_dot_files,
                }
            }
        } else if app_directory.is_empty() {
            Location::Nothing {
                why: "RUNTIME_APPDIRECTORY is empty",
            }
        } else {
            Location::Walk {
                base: root.join(subdirectory).join(app_directory),
                prefix: String::new(),
                keep: None,
                ignore_dot_files,
            }
        };
        ConfigSource { location, options }
    }

    /// The files under `directory` (recursively, dot files skipped), named
    /// `config.<path>`.
    pub fn directory(directory: &Path, options: LoaderOptions) -> ConfigSource {
        ConfigSource {
            location: Location::Walk {
                base: directory.to_owned(),
                prefix: "config.".to_owned(),
                keep: None,
                ignore_dot_files: true,
            },
            options,
        }
    }

    /// The directory read, for logs (`none: ...` when no directory is named).
    pub fn describe(&self) -> String {
        match &self.location {
            Location::Walk { base, .. } => base.display().to_string(),
            Location::Nothing { why } => format!("none ({why})"),
        }
    }

    /// The loader options.
    pub fn options(&self) -> LoaderOptions {
        self.options
    }

    /// Reads every file now (blocking file I/O).
    ///
    /// # Errors
    ///
    /// [`ConfigDirError::Directory`] when the base directory itself cannot be
    /// listed; a file that cannot be read is skipped instead (see
    /// [`ConfigFiles::skipped`]).
    pub fn read(&self) -> Result<ConfigFiles, ConfigDirError> {
        let Location::Walk {
            base,
            prefix,
            keep,
            ignore_dot_files,
        } = &self.location
        else {
            return Ok(ConfigFiles::default());
        };
        let mut files = ConfigFiles::default();
        let entries = fs::read_dir(base).map_err(|source| ConfigDirError::Directory {
            path: base.display().to_string(),
            source,
        })?;
        let walker = Walker {
            prefix,
            keep: keep.as_deref(),
            ignore_dot_files: *ignore_dot_files,
        };
        walker.walk_entries(entries, base, "", &mut files, 0);
        files.files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(files)
    }

    /// Loads files already read, in name order.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`], naming its file by runtime key.
    pub fn load(&self, files: &ConfigFiles) -> Result<RateLimitConfig, ConfigError> {
        let sources: Vec<(&str, &str)> = files
            .files
            .iter()
            .map(|file| (file.name.as_str(), file.content.as_str()))
            .collect();
        RateLimitConfig::from_sources(&sources, &self.options)
    }

    /// Reads and loads the files now.
    ///
    /// # Errors
    ///
    /// As [`ConfigSource::read`] and [`ConfigSource::load`].
    pub fn read_and_load(&self) -> Result<(RateLimitConfig, ConfigFiles), ConfigDirError> {
        let files = self.read()?;
        let config = self.load(&files)?;
        Ok((config, files))
    }
}

/// Deepest directory nesting walked (links to directories are not followed,
/// so only a real tree this deep is cut).
const MAX_DEPTH: usize = 64;

struct Walker<'a> {
    prefix: &'a str,
    keep: Option<&'a str>,
    ignore_dot_files: bool,
}

impl Walker<'_> {
    fn walk_entries(
        &self,
        entries: fs::ReadDir,
        directory: &Path,
        relative: &str,
        files: &mut ConfigFiles,
        depth: usize,
    ) {
        let mut names: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries {
            match entry {
                Ok(entry) => match entry.file_name().into_string() {
                    Ok(name) => names.push((name, entry.path())),
                    Err(name) => files.skipped.push(format!(
                        "{}: the name is not UTF-8",
                        directory.join(name).display()
                    )),
                },
                Err(error) => files
                    .skipped
                    .push(format!("{}: {error}", directory.display())),
            }
        }
        names.sort();
        for (name, path) in names {
            if self.ignore_dot_files && name.starts_with('.') {
                continue;
            }
            let key = if relative.is_empty() {
                name.clone()
            } else {
                format!("{relative}.{name}")
            };
            let metadata = match fs::symlink_metadata(&path) {
                Ok(metadata) => metadata,
                Err(error) => {
                    files.skipped.push(format!("{}: {error}", path.display()));
                    continue;
                }
            };
            if metadata.is_dir() {
                if depth >= MAX_DEPTH {
                    files
                        .skipped
                        .push(format!("{}: nested too deeply", path.display()));
                    continue;
                }
                match fs::read_dir(&path) {
                    Ok(entries) => self.walk_entries(entries, &path, &key, files, depth + 1),
                    Err(error) => files.skipped.push(format!("{}: {error}", path.display())),
                }
                continue;
            }
            let name = format!("{}{key}", self.prefix);
            if self.keep.is_some_and(|keep| !name.starts_with(keep)) {
                continue;
            }
            match read_file(&path) {
                Ok(content) => files.files.push(ConfigFile { name, content }),
                Err(why) => files.skipped.push(format!("{}: {why}", path.display())),
            }
        }
    }
}

/// A file's text, following a link: only a regular file of at most
/// [`MAX_CONFIG_FILE_BYTES`] in UTF-8 is read (`tollgate_serve::read_regular_file`);
/// a directory, a FIFO (whose read would wait for a writer and hold every
/// later reload), a device or a socket is skipped, and the skip is logged.
fn read_file(path: &Path) -> Result<String, String> {
    let bytes = tollgate_serve::read_regular_file(path, MAX_CONFIG_FILE_BYTES)
        .map_err(|error| error.to_string())?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// Counts of reloads, shared with whoever reports them.
#[derive(Debug, Default)]
pub struct ReloadCounters {
    /// Configurations loaded and put in force (the first included).
    pub successes: AtomicU64,
    /// Configurations that did not load (the one in force stayed).
    pub errors: AtomicU64,
}

impl ReloadCounters {
    /// Configurations loaded so far.
    pub fn successes(&self) -> u64 {
        self.successes.load(Ordering::Relaxed)
    }

    /// Configurations refused so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// Where [`watch`] puts what it loads: the service
/// ([`crate::RateLimitService::reload`] and `reload_failed`, which count
/// `config_load_success` and `config_load_error`).
pub trait ReloadTarget: Send + Sync + 'static {
    /// Puts a configuration that loaded in force.
    fn reloaded(&self, config: RateLimitConfig);
    /// Records a configuration that did not load; the one in force stays.
    fn reload_failed(&self);
}

/// Polls `source` every `interval` and gives `target` each new configuration
/// whose files differ from the last read (`last`: the files the configuration
/// in force was loaded from). A read or load error is logged (`warn`, with
/// the file's runtime key), counted in `counters` and reported to `target`,
/// and the configuration in force stays; the same files are not tried again
/// until they change.
///
/// Runs until the returned task is aborted; file I/O runs on tokio's blocking
/// pool.
pub fn watch(
    source: ConfigSource,
    interval: Duration,
    last: ConfigFiles,
    counters: Arc<ReloadCounters>,
    target: Arc<dyn ReloadTarget>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let source = Arc::new(source);
        let mut last_files = last.files;
        let mut last_skipped = last.skipped;
        let mut last_error: Option<String> = None;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let reading = Arc::clone(&source);
            let read = match tokio::task::spawn_blocking(move || reading.read()).await {
                Ok(read) => read,
                Err(error) => {
                    tracing::error!(%error, "reading the configuration failed");
                    continue;
                }
            };
            let files = match read {
                Ok(files) => files,
                Err(error) => {
                    let text = error.to_string();
                    if last_error.as_deref() != Some(text.as_str()) {
                        tracing::warn!(error = %text, "Error loading new configuration");
                        counters.errors.fetch_add(1, Ordering::Relaxed);
                        target.reload_failed();
                        last_error = Some(text);
                        // Read again from scratch once the directory is back.
                        last_files.clear();
                    }
                    continue;
                }
            };
            if files.skipped != last_skipped {
                for skipped in &files.skipped {
                    tracing::warn!(file = %skipped, "runtime: error processing a configuration file");
                }
                last_skipped.clone_from(&files.skipped);
            }
            if files.files == last_files {
                continue;
            }
            last_files = files.files.clone();
            match source.load(&files) {
                Ok(config) => {
                    counters.successes.fetch_add(1, Ordering::Relaxed);
                    last_error = None;
                    tracing::info!(
                        files = files.files.len(),
                        "Successfully loaded new configuration"
                    );
                    target.reloaded(config);
                }
                Err(error) => {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    target.reload_failed();
                    tracing::warn!(%error, "Error loading new configuration");
                    last_error = Some(error.to_string());
                }
            }
        }
    })
}

#[cfg(test)]
mod tests;
