//! The service's settings: envoyproxy/ratelimit's environment variables
//! (src/settings/settings.go), each also a command-line flag, with the Go
//! service's names and defaults.
//!
//! Every setting is read once, at start, as the Go service reads its
//! environment once (`settings.NewSettings()`); only the rate limit rules (the
//! YAML files) are reloaded while the service runs (see [`crate::ConfigSource`]).
//! A flag given on the command line wins over its environment variable.
//!
//! Settings the Go service has and tollgate does not support (memcache, xDS,
//! TLS on the listeners, ...) are refused at start, by name,
//! when they are set to anything but their default ([`refuse_unsupported`]).

mod arguments;
mod behaviour;
mod config_source;
mod debug_page;
mod error;
mod log;
mod secret;
mod store;
mod unsupported;

pub use arguments::{RlsArguments, go_bool, go_duration, positive_go_duration};
pub use error::SettingsError;
pub use log::LogFormat;
pub use secret::Secret;
pub use store::StoreSettings;
pub use unsupported::{UNSUPPORTED, Unsupported, refuse_unsupported};
