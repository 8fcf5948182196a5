//! The signals a server stops on: each server gives its own list (the
//! gateway SIGTERM and SIGINT, `tollgate rls` also SIGHUP, as the Go service
//! does); the first signal of the list begins a graceful stop, a second one
//! stops at once.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listening for a list of signals.
#[derive(Debug)]
pub struct Signals {
    streams: Vec<Signal>,
}

impl Signals {
    /// Listens for each of `kinds` from now on. A signal that cannot be
    /// listened for is logged and left out.
    ///
    /// # Errors
    ///
    /// The system's error when none of `kinds` can be listened for: a server
    /// that no signal could stop must not start.
    pub fn listen(kinds: &[SignalKind]) -> std::io::Result<Signals> {
        let mut last_error = None;
        let streams: Vec<Signal> = kinds
            .iter()
            .filter_map(|&kind| match signal(kind) {
                Ok(stream) => Some(stream),
                Err(error) => {
                    tracing::warn!(%error, signal = kind.as_raw_value(), "cannot listen for a signal");
                    last_error = Some(error);
                    None
                }
            })
            .collect();
        match (streams.is_empty(), last_error) {
            (true, Some(error)) => Err(error),
            _ => Ok(Signals { streams }),
        }
    }

    /// Resolves when one of the signals arrives (again, on a second call:
    /// the second signal). Never resolves for an empty list.
    pub async fn next(&mut self) {
        if self.streams.is_empty() {
            std::future::pending::<()>().await;
        }
        let waits = self
            .streams
            .iter_mut()
            .map(|stream| Box::pin(async move { stream.recv().await }));
        let _ = futures_util::future::select_all(waits).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_and_the_second_signal_of_the_list_are_told_apart() {
        // SIGUSR2, which nothing else in the test process listens for.
        let mut signals = Signals::listen(&[SignalKind::user_defined2()]).unwrap();
        let process_id = std::process::id().to_string();
        for _ in 0..2 {
            let sent = std::process::Command::new("kill")
                .args(["-USR2", &process_id])
                .status()
                .unwrap();
            assert!(sent.success());
            tokio::time::timeout(std::time::Duration::from_secs(10), signals.next())
                .await
                .expect("the signal arrives");
        }
    }
}
