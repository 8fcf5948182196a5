//! [`KeptTimer`]: the timer a client connection keeps for the upstream
//! timeouts of its requests, reset for each one instead of a timer made,
//! registered in tokio's timer wheel (at its first poll: an exchange
//! waits, so nearly always) and removed again per request (issue 30:
//! about 600 instructions a request, `docs/PERFORMANCE.md`).

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Mutex;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::task::coop;
use tokio::time::Sleep;

/// A timer kept between the requests of one client connection.
///
/// A request takes it, resets it to its own deadline and gives it back
/// when its exchange ends. Resetting a registered timer to a later deadline
/// is, in tokio, a store into the timer (it fires at the earlier deadline
/// and is put back for the later one), where a new timer takes the wheel's
/// lock to be registered and again to be removed; to an earlier deadline,
/// or once fired, it is registered again. A kept timer left registered
/// fires at most once while kept, waking the task that last polled it for
/// nothing. The requests of an
/// HTTP/2 connection overlap: one at a time uses the kept timer and the
/// others make their own, as does a request whose future is dropped
/// before its exchange ends (its timer goes with it).
#[derive(Debug, Default)]
pub(crate) struct KeptTimer {
    timer: Mutex<Option<Pin<Box<Sleep>>>>,
}

/// The upstream did not answer within the timeout of
/// [`KeptTimer::timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl KeptTimer {
    /// A future of `future`'s output if it ends within `duration` from
    /// now, else of [`Elapsed`] (and `future` is dropped), as
    /// `tokio::time::timeout` answers: `future` is polled first, so one
    /// ready by the deadline wins, and the deadline is looked at even when
    /// `future` spent the task's budget. The deadline starts now, not at
    /// the first poll. A `duration` past what `Instant` holds waits 30
    /// years (where `tokio::time::timeout` waits for ever).
    pub(crate) fn timeout<F: Future>(&self, duration: Duration, future: F) -> Timeout<'_, F> {
        let deadline = tollgate_serve::kept_timers::deadline_in(duration);
        let timer = match self.take() {
            Some(mut timer) => {
                timer.as_mut().reset(deadline);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        };
        Timeout {
            future,
            timer: Some(timer),
            kept: self,
        }
    }

    fn take(&self) -> Option<Pin<Box<Sleep>>> {
        self.timer.lock().ok()?.take()
    }

    /// Keeps `timer` for the next request, unless another is kept already.
    fn keep(&self, timer: Pin<Box<Sleep>>) {
        if let Ok(mut kept) = self.timer.lock() {
            kept.get_or_insert(timer);
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of [`KeptTimer::timeout`]: built in place around the
    /// exchange, as `tokio::time::Timeout` is (an `async fn` would move
    /// the exchange's future into its own state, a copy of some hundreds
    /// of bytes a request).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct Timeout<'a, F> {
        #[pin]
        future: F,
        // `None` once the answer is given and the timer kept again.
        timer: Option<Pin<Box<Sleep>>>,
        kept: &'a KeptTimer,
    }
}

impl<F: Future> Future for Timeout<'_, F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // Polled after its answer (the future is not polled again): it has
        // none left to give.
        let Some(timer) = this.timer.as_mut() else {
            return Poll::Pending;
        };
        let had_budget_before = coop::has_budget_remaining();
        let answered = match this.future.poll(context) {
            Poll::Ready(output) => Ok(output),
            Poll::Pending => {
                if had_budget_before && !coop::has_budget_remaining() {
                    // The exchange spent the task's budget: the deadline is
                    // still looked at (a timer polled without budget is
                    // pending whatever the time), as `tokio::time::timeout`
                    // does.
                    ready!(pin!(coop::unconstrained(timer.as_mut())).poll(context));
                } else {
                    ready!(timer.as_mut().poll(context));
                }
                Err(Elapsed)
            }
        };
        if let Some(timer) = this.timer.take() {
            this.kept.keep(timer);
        }
        Poll::Ready(answered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    // Time is tokio's paused clock: it moves only when every task waits.

    /// `value`, on the second poll: the timeout polls its timer (which
    /// registers it) once before the answer.
    async fn answer_after_a_wait(value: u32) -> u32 {
        tokio::task::yield_now().await;
        value
    }

    #[tokio::test(start_paused = true)]
    async fn an_exchange_that_spends_the_tasks_budget_still_times_out() {
        // Every poll of this exchange spends the task's whole budget, then
        // moves the clock a second on and waits (`advance` yields): a timer
        // polled without budget would never say it fired. It gives up
        // (answering 100) after 100 rounds.
        let exchange = async {
            for _ in 0..100 {
                while tokio::task::coop::has_budget_remaining() {
                    tokio::task::coop::consume_budget().await;
                }
                tokio::time::advance(Duration::from_secs(1)).await;
            }
            100
        };
        let kept = KeptTimer::default();
        assert_eq!(
            kept.timeout(Duration::from_secs(5), exchange).await,
            Err(Elapsed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_within_the_timeout_is_given_and_the_timer_kept() {
        let kept = KeptTimer::default();
        let start = Instant::now();
        let answered = kept
            .timeout(Duration::from_secs(5), async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                7
            })
            .await;
        assert_eq!(answered, Ok(7));
        assert_eq!(start.elapsed(), Duration::from_secs(2));
        assert!(
            kept.take().is_some(),
            "the timer is kept for the next request"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_timer_times_out_at_the_next_requests_own_deadline() {
        let kept = KeptTimer::default();
        // The first request answers on its second poll, its timer polled
        // once (so registered, for 10 s) and kept.
        assert_eq!(
            kept.timeout(Duration::from_secs(10), answer_after_a_wait(1))
                .await,
            Ok(1)
        );
        // The next, at 3 s, with a timeout of 4 s: it times out at 7 s, not
        // at the first request's 10 s.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let start = Instant::now();
        let answered = kept
            .timeout(Duration::from_secs(4), std::future::pending::<()>())
            .await;
        assert_eq!(answered, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_secs(4));
        // And one later still, with 20 s: its deadline is 20 s on, later
        // than the fired timer's.
        let start = Instant::now();
        let answered = kept
            .timeout(Duration::from_secs(20), std::future::pending::<()>())
            .await;
        assert_eq!(answered, Err(Elapsed));
        assert_eq!(start.elapsed(), Duration::from_secs(20));
    }

    #[tokio::test(start_paused = true)]
    async fn a_later_deadline_after_an_answered_request_is_not_cut_short() {
        // The kept timer was registered for 1 s; the next request, at once,
        // gets 6 s and must not be timed out at the first's 1 s.
        let kept = KeptTimer::default();
        assert_eq!(
            kept.timeout(Duration::from_secs(1), answer_after_a_wait(1))
                .await,
            Ok(1)
        );
        let start = Instant::now();
        let answered = kept
            .timeout(Duration::from_secs(6), async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                2
            })
            .await;
        assert_eq!(answered, Ok(2));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_requests_each_keep_their_own_deadline() {
        // An HTTP/2 connection's requests overlap: the second makes its own
        // timer while the first holds the kept one.
        let kept = KeptTimer::default();
        let start = Instant::now();
        let (first, second) = tokio::join!(
            kept.timeout(Duration::from_secs(3), std::future::pending::<()>()),
            kept.timeout(Duration::from_secs(8), async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                9
            }),
        );
        assert_eq!(first, Err(Elapsed));
        assert_eq!(second, Ok(9));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_future_ready_at_the_deadline_wins() {
        let kept = KeptTimer::default();
        let answered = kept
            .timeout(Duration::from_secs(2), async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                3
            })
            .await;
        assert_eq!(answered, Ok(3));
    }
}
