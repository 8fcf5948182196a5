//! Policies prepared for the store once and reused: a configuration has few
//! distinct limits, request overrides add some; the set is bounded (cleared
//! when it passes [`MAX_PREPARED`]).

use std::collections::HashMap;

use parking_lot::Mutex;
use tollgate_core::{Policy, PolicyError, PreparedPolicy, Store};

/// The most prepared policies kept.
const MAX_PREPARED: usize = 4_096;

/// Prepared policies by policy.
#[derive(Debug, Default)]
pub(crate) struct PreparedPolicies {
    prepared: Mutex<HashMap<Policy, PreparedPolicy>>,
}

impl PreparedPolicies {
    /// `policy` prepared for `store`.
    ///
    /// # Errors
    ///
    /// The store's [`PolicyError`] when it cannot hold the policy.
    pub(crate) fn get(
        &self,
        store: &dyn Store,
        policy: Policy,
    ) -> Result<PreparedPolicy, PolicyError> {
        if let Some(prepared) = self.prepared.lock().get(&policy) {
            return Ok(*prepared);
        }
        let prepared = store.prepare(policy)?;
        let mut cache = self.prepared.lock();
        if cache.len() >= MAX_PREPARED {
            cache.clear();
        }
        cache.insert(policy, prepared);
        Ok(prepared)
    }
}
