//! Serving the gateway: starting it ([`start`](crate::start)) and the handle
//! of a running one, the worker threads and their listener, serving one
//! connection of it, HTTPS on the listener, the client connection, the
//! store a configuration names, and reloading the configuration (the
//! snapshot a reload replaces).

pub(crate) mod client;
pub(crate) mod connection;
pub(crate) mod error;
pub(crate) mod listener;
pub(crate) mod reload;
pub(crate) mod reloadable;
pub(crate) mod start;
pub(crate) mod store;
pub(crate) mod tls;
pub(crate) mod workers;
