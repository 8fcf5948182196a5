//! The `tollgate` binary's internals, as a library for its tests: the gateway
//! server (`tollgate serve`).

#![forbid(unsafe_code)]

pub mod serve;
