//! `tollgate rls` settings for a test: every listener on 127.0.0.1 on a port
//! the kernel picks, statsd off.

#![allow(dead_code, unreachable_pub, missing_docs)]

use tollgate_rls::RlsArguments;

/// The defaults, on loopback with kernel-chosen ports and no statsd.
pub fn arguments() -> RlsArguments {
    let mut arguments = RlsArguments::defaults();
    "127.0.0.1".clone_into(&mut arguments.host);
    "127.0.0.1".clone_into(&mut arguments.grpc_host);
    "127.0.0.1".clone_into(&mut arguments.debug_host);
    arguments.port = 0;
    arguments.grpc_port = 0;
    arguments.debug_port = 0;
    arguments.use_statsd = false;
    arguments
}
