//! `tollgate rlqs`: logging, the async runtime, and the quota service
//! (`tollgate_rlqs::serve`).

use anyhow::Context;
use tollgate_rlqs::RlqsArguments;

/// Serves until a signal.
pub(crate) fn rlqs(arguments: RlqsArguments) -> anyhow::Result<()> {
    crate::rls_command::init_logs(&arguments.rls)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let result = runtime.block_on(tollgate_rlqs::serve(arguments));
    runtime.shutdown_background();
    Ok(result?)
}
