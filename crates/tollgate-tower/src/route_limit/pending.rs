//! The limits of stacked layers, gathered in the request's extensions so the
//! outermost layer decides them all in one [`Store::acquire`] call, all or
//! nothing.
//!
//! [`Store::acquire`]: tollgate_core::Store::acquire

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use super::route::PendingLimit;

/// The limits gathered for one request, shared between the layer that opened
/// the list (the outermost) and the layers further in, which find it in the
/// request's extensions while the outermost calls its inner service.
#[derive(Clone, Debug)]
pub(crate) struct PendingLimits(Arc<Mutex<Pending>>);

#[derive(Debug)]
struct Pending {
    /// The store the limits are decided in (the address of its data).
    store: usize,
    /// Decided already, or about to be: no limit may join.
    sealed: bool,
    /// A layer further in refused the request before any budget was used (a
    /// 401 or 500): the outermost uses none either.
    refused: bool,
    /// The outermost layer's limit.
    first: Option<PendingLimit>,
    /// Those of the layers further in, outermost first.
    more: Vec<PendingLimit>,
    /// Set once the opening layer's decision charged every gathered limit
    /// (not when the store failed open): what a settlement by usage of any
    /// of them checks first. Made only when a route charged by usage asks
    /// for it (most requests have none).
    charged: Option<Arc<AtomicBool>>,
}

/// What a sealed list holds.
#[derive(Debug)]
pub(crate) struct Gathered {
    /// The outermost layer's limit.
    pub(crate) first: PendingLimit,
    /// Those of the layers further in, outermost first.
    pub(crate) more: Vec<PendingLimit>,
    /// Whether a layer further in refused the request.
    pub(crate) refused: bool,
    /// The flag to set once the limits are charged, when a settlement
    /// asked for one.
    pub(crate) charged: Option<Arc<AtomicBool>>,
}

impl PendingLimits {
    /// A list opened by the layer holding `first`, for `store`, with the
    /// flag of `first`'s settlement if it has one.
    pub(crate) fn open(
        store: usize,
        first: PendingLimit,
        charged: Option<Arc<AtomicBool>>,
    ) -> Self {
        PendingLimits(Arc::new(Mutex::new(Pending {
            store,
            sealed: false,
            refused: false,
            first: Some(first),
            more: Vec::new(),
            charged,
        })))
    }

    /// The flag set once the opening layer's decision charged every
    /// gathered limit (see `Pending::charged`), made at the first ask.
    pub(crate) fn charged(&self) -> Arc<AtomicBool> {
        Arc::clone(
            self.lock()
                .charged
                .get_or_insert_with(|| Arc::new(AtomicBool::new(false))),
        )
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds the limit of a layer further in, when the list is still open, on
    /// the same store, and holds no limit of the same key (which one call
    /// could not decide all or nothing). Otherwise gives `limit` back: its
    /// layer decides alone.
    pub(crate) fn join(&self, store: usize, limit: PendingLimit) -> Result<(), PendingLimit> {
        let mut pending = self.lock();
        let same_key = pending
            .first
            .iter()
            .chain(&pending.more)
            .any(|other| other.key.text == limit.key.text);
        if pending.sealed || pending.store != store || same_key {
            return Err(limit);
        }
        pending.more.push(limit);
        Ok(())
    }

    /// Marks the request refused by a layer further in, if the list is open.
    pub(crate) fn refuse(&self) {
        let mut pending = self.lock();
        if !pending.sealed {
            pending.refused = true;
        }
    }

    /// Closes the list and takes what it holds (once: the opening layer).
    pub(crate) fn seal(&self) -> Option<Gathered> {
        let mut pending = self.lock();
        pending.sealed = true;
        let first = pending.first.take()?;
        Some(Gathered {
            first,
            more: std::mem::take(&mut pending.more),
            refused: pending.refused,
            charged: pending.charged.clone(),
        })
    }
}
