//! What the gateway lets its operators see: its metrics (Prometheus text on
//! `/metrics`), its access log and the keys most active and refused
//! (`/admin/top`).

pub(crate) mod access_log;
pub(crate) mod metrics;
pub(crate) mod top_keys;
