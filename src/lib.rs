//! The `tollgate` binary's internals, as a library for its tests: the gateway
//! server (`tollgate serve`).

#![forbid(unsafe_code)]

pub mod serve;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
