//! Worker threads: each runs one single-threaded event loop, so that a
//! connection, its requests and the store calls they make never change
//! threads; and the one rule for how many there are.
//!
//! A worker's end is bounded: once its future has returned (or the loop was
//! told to stop), the event loop drops its tasks and waits at most
//! [`EVENT_LOOP_END`] for blocking tasks (a DNS lookup, a file read) before
//! the thread ends, so that a stopping server never hangs on one.

use std::future::Future;
use std::time::Duration;

use tokio::sync::oneshot;

/// The most worker threads a setting may ask for.
pub const MAX_WORKERS: usize = 1024;

/// The longest a worker's ended event loop waits for its blocking tasks.
pub const EVENT_LOOP_END: Duration = Duration::from_millis(500);

/// The worker count for `setting`: the setting when given, else the CPUs
/// this process may use (1 when the system cannot tell), always from 1 to
/// [`MAX_WORKERS`].
pub fn worker_count(setting: Option<usize>) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    worker_count_on(setting, cpus)
}

/// [`worker_count`] on a machine of `cpus` CPUs.
pub fn worker_count_on(setting: Option<usize>, cpus: usize) -> usize {
    setting.unwrap_or(cpus).clamp(1, MAX_WORKERS)
}

/// A worker thread, and a receiver that resolves (with an error) as it ends,
/// its event loop and that loop's tasks and connections dropped.
#[derive(Debug)]
pub struct WorkerThread {
    thread: std::thread::JoinHandle<()>,
    end: oneshot::Receiver<()>,
}

impl WorkerThread {
    /// Waits until the thread has ended: without holding a thread of the
    /// caller's runtime until its end is near, then joining it.
    pub async fn ended(self) {
        let _ = self.end.await;
        let thread = self.thread;
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// Starts a thread named `name` running a single-threaded event loop (timers
/// and I/O enabled) on the future `make` returns, built on that thread, so it
/// need not be `Send`. When the future returns, the loop's remaining tasks
/// are dropped and its blocking tasks waited for at most
/// [`EVENT_LOOP_END`]. An event loop that cannot be built is logged as an
/// error and the thread ends.
///
/// # Errors
///
/// The system's error when the thread cannot be started.
pub fn spawn_event_loop<Make, Served>(name: String, make: Make) -> std::io::Result<WorkerThread>
where
    Make: FnOnce() -> Served + Send + 'static,
    Served: Future<Output = ()> + 'static,
{
    let (ends, end) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name(name).spawn(move || {
        // Dropped last, after the event loop and its connections: the
        // thread's end is reported however it ends.
        let _ends = ends;
        let event_loop = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(event_loop) => event_loop,
            Err(error) => {
                tracing::error!(%error, "a worker cannot start its event loop");
                return;
            }
        };
        event_loop.block_on(make());
        event_loop.shutdown_timeout(EVENT_LOOP_END);
    })?;
    Ok(WorkerThread { thread, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_the_setting_else_the_cpus_from_one_to_the_most() {
        assert_eq!(worker_count_on(Some(3), 8), 3);
        assert_eq!(worker_count_on(None, 8), 8);
        assert_eq!(worker_count_on(None, 0), 1);
        assert_eq!(worker_count_on(Some(0), 8), 1);
        assert_eq!(worker_count_on(Some(5000), 8), 1024);
    }

    #[tokio::test]
    async fn a_worker_runs_its_future_on_its_own_thread_and_reports_its_end() {
        let (sender, receiver) = oneshot::channel();
        let worker = spawn_event_loop("test-worker".to_owned(), move || async move {
            let name = std::thread::current().name().map(str::to_owned);
            let _ = sender.send(name);
        })
        .unwrap();
        assert_eq!(receiver.await.unwrap().as_deref(), Some("test-worker"));
        worker.ended().await;
    }

    #[tokio::test]
    async fn an_ended_worker_waits_a_bounded_time_for_a_blocking_task() {
        let started = std::time::Instant::now();
        let worker = spawn_event_loop("test-blocking".to_owned(), || async {
            // A blocking task that would hold the loop's end for 30 s.
            tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_secs(30)));
            tokio::task::yield_now().await;
        })
        .unwrap();
        worker.ended().await;
        // Bounded by EVENT_LOOP_END (500 ms): well under 5 s, where the
        // task alone would hold the end 30 s.
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
