//! [`KeptTimers`]: hyper's timer for the HTTP/1 connections of one event
//! loop, whose timers are kept and reset rather than made anew. hyper
//! times the reading of every request's head (its `header_read_timeout`,
//! 30 s) with a timer it makes for that request and drops once the head is
//! read; with hyper-util's `TokioTimer`, each is a new tokio timer,
//! registered in the timer wheel and removed again (a lock each time) when
//! the head has to be waited for, as on a keep-alive connection it does.
//! (A tokio timer joins the wheel at its first poll: a head read at once
//! never registers one.) Here a dropped timer goes back to a list, still
//! registered if it was, and the next request's is taken from it and
//! reset: moving a registered timer's deadline later is, in tokio, a store
//! into the timer; to an earlier deadline, or once fired, it is registered
//! again (issue 30, measured by `bench/limit_cost.sh`: see
//! `docs/PERFORMANCE.md`). A timer left registered in the list fires at
//! most once, waking the task that last polled it for nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

/// The most timers a [`KeptTimers`] keeps: as many heads can be read at
/// once without a timer made; past it, a dropped timer goes.
pub const KEPT_AT_MOST: usize = 1024;

/// The instant `duration` from now; for a `duration` past what `Instant`
/// holds, 30 years from now (tokio's own far future for a `sleep`).
pub fn deadline_in(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

/// A tokio timer, boxed so that it can move between the list and a request.
type Timer = Pin<Box<tokio::time::Sleep>>;

/// hyper's [`Timer`](hyper::rt::Timer) for the connections of one event
/// loop (one tokio runtime: a timer belongs to the runtime that made it, so
/// one `KeptTimers` must not be shared by the connections of several).
/// Clones share the timers kept.
#[derive(Clone, Debug, Default)]
pub struct KeptTimers {
    kept: Arc<Mutex<Vec<Timer>>>,
}

impl KeptTimers {
    /// A timer firing at `deadline`: one kept, reset, or a new one.
    fn timer_until(&self, deadline: Instant) -> Timer {
        let kept = self.kept.lock().ok().and_then(|mut kept| kept.pop());
        match kept {
            Some(mut timer) => {
                timer.as_mut().reset(deadline);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        }
    }

    /// How many timers are kept now.
    pub fn kept(&self) -> usize {
        self.kept.lock().map_or(0, |kept| kept.len())
    }
}

impl hyper::rt::Timer for KeptTimers {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep_until(deadline_in(duration).into_std())
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(KeptSleep {
            timer: Some(self.timer_until(Instant::from_std(deadline))),
            home: self.clone(),
        })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<KeptSleep>() {
            Some(mut kept) => {
                if let Some(timer) = kept.timer.as_mut() {
                    timer.as_mut().reset(Instant::from_std(new_deadline));
                }
            }
            None => *sleep = self.sleep_until(new_deadline),
        }
    }

    fn now(&self) -> std::time::Instant {
        // tokio's clock, which tests can pause, as `TokioTimer` reads it.
        Instant::now().into_std()
    }
}

/// One timer lent to hyper: it fires as its tokio timer does, and goes
/// back to its [`KeptTimers`] when hyper drops it.
struct KeptSleep {
    /// `None` only while it is dropped.
    timer: Option<Timer>,
    home: KeptTimers,
}

impl Future for KeptSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
        match self.get_mut().timer.as_mut() {
            Some(timer) => timer.as_mut().poll(context),
            None => Poll::Ready(()),
        }
    }
}

impl hyper::rt::Sleep for KeptSleep {}

impl Drop for KeptSleep {
    fn drop(&mut self) {
        let Some(timer) = self.timer.take() else {
            return;
        };
        if let Ok(mut kept) = self.home.kept.lock()
            && kept.len() < KEPT_AT_MOST
        {
            kept.push(timer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Timer as _;

    // Time is tokio's paused clock: it moves only when every task waits.

    /// Waits for `sleep` and answers how long that took.
    async fn waited(sleep: Pin<Box<dyn hyper::rt::Sleep>>) -> Duration {
        let start = Instant::now();
        sleep.await;
        start.elapsed()
    }

    /// A timer lent by `timers` for `duration`, polled once (so registered
    /// in the wheel), then dropped: kept.
    fn keep_registered(timers: &KeptTimers, duration: Duration) {
        let mut lent = timers.sleep(duration);
        let waker = std::task::Waker::noop();
        assert!(
            lent.as_mut()
                .poll(&mut Context::from_waker(waker))
                .is_pending()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_timer_is_kept_and_the_next_fires_at_its_own_deadline() {
        let timers = KeptTimers::default();
        // A head read at once: its 30 s timer, polled once (so registered),
        // then dropped, is kept.
        keep_registered(&timers, Duration::from_secs(30));
        assert_eq!(timers.kept(), 1);
        // The next request's, 5 s later, with 30 s: fires 30 s on, at 35 s,
        // not at the first's 30 s.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let second = timers.sleep(Duration::from_secs(30));
        assert_eq!(timers.kept(), 0, "the kept timer is the one lent");
        assert_eq!(waited(second).await, Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_timer_reset_earlier_fires_earlier() {
        let timers = KeptTimers::default();
        keep_registered(&timers, Duration::from_secs(30));
        let second = timers.sleep(Duration::from_secs(2));
        assert_eq!(waited(second).await, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn hypers_reset_moves_a_lent_timer() {
        let timers = KeptTimers::default();
        let mut sleep = timers.sleep(Duration::from_secs(30));
        timers.reset(
            &mut sleep,
            (Instant::now() + Duration::from_secs(7)).into_std(),
        );
        assert_eq!(waited(sleep).await, Duration::from_secs(7));
    }

    #[tokio::test(start_paused = true)]
    async fn timers_lent_at_once_each_keep_their_deadline_and_all_come_back() {
        let timers = KeptTimers::default();
        let deadlines = [4, 1, 3];
        let sleeps: Vec<_> = deadlines
            .iter()
            .map(|&seconds| timers.sleep(Duration::from_secs(seconds)))
            .collect();
        let start = Instant::now();
        let fired = futures_util::future::join_all(sleeps.into_iter().map(|sleep| async move {
            sleep.await;
            start.elapsed()
        }))
        .await;
        assert_eq!(
            fired,
            deadlines.map(Duration::from_secs).to_vec(),
            "each fires at its own deadline"
        );
        assert_eq!(timers.kept(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn no_more_than_the_cap_are_kept() {
        let timers = KeptTimers::default();
        let sleeps: Vec<_> = (0..KEPT_AT_MOST + 5)
            .map(|_| timers.sleep(Duration::from_secs(1)))
            .collect();
        drop(sleeps);
        assert_eq!(timers.kept(), KEPT_AT_MOST);
    }
}
