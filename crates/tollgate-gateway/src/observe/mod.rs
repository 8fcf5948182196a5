//! What the gateway lets its operators see: its metrics (Prometheus text on
//! `/metrics`) and its access log.

pub(crate) mod access_log;
pub(crate) mod metrics;
