//! What the answer needs of one descriptor besides its status: whether it
//! is limited or unlimited, its quota mode, metadata and the name the IETF
//! fields give it.

use crate::config::metadata::Metadata;

/// What the answer needs of one descriptor besides its status.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Held<'a> {
    /// The descriptor is unlimited.
    pub(crate) unlimited: bool,
    /// A limit applies (none when none matched, it was replaced, or unlimited).
    pub(crate) limited: bool,
    /// The limit's `quota_mode`.
    pub(crate) quota_mode: bool,
    /// The limit's `metadata`.
    pub(crate) metadata: Option<&'a Metadata>,
    /// The name the IETF fields give the limit.
    pub(crate) policy_name: Option<&'a str>,
}
