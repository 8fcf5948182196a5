//! A side future beside a connection, polled only when its own waker has
//! been woken ([`OnOwnWakes`]): the idle check of [`race_idle`](crate::race_idle)
//! and the stop of [`close_when_stopped`](crate::close_when_stopped). Polled
//! at each of the connection's wakes instead, as `tokio::select!` polls every
//! branch, a side future costs its poll several times a request.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// Whether the side future has been woken since it was last polled, and the
/// task to wake when it is.
struct Woken {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// `future`, polled with a waker of its own that wakes the task polling it:
/// [`OnOwnWakes::poll`] polls `future` the first time and then only after
/// that waker has been woken.
pub(crate) struct OnOwnWakes<Side> {
    future: Side,
    woken: Arc<Woken>,
    waker: Waker,
}

impl<Side: Future + Unpin> OnOwnWakes<Side> {
    /// `future`, to be polled at the first [`OnOwnWakes::poll`].
    pub(crate) fn new(future: Side) -> Self {
        let woken = Arc::new(Woken {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(Arc::clone(&woken));
        OnOwnWakes {
            future,
            woken,
            waker,
        }
    }

    /// Polls the side future if its waker has been woken since its last
    /// poll (or it was never polled); `Pending` otherwise. `context`'s task
    /// is woken when the side future's waker is.
    pub(crate) fn poll(&mut self, context: &Context<'_>) -> Poll<Side::Output> {
        // Registered before the flag is read: a wake between the two finds
        // this task's waker and polls again.
        self.woken.task.register(context.waker());
        if !self.woken.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        Pin::new(&mut self.future).poll(&mut Context::from_waker(&self.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A side future that counts its polls and is ready at its third.
    struct CountedPolls(Arc<AtomicUsize>);

    impl Future for CountedPolls {
        type Output = ();

        fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<()> {
            let polls = self.0.fetch_add(1, Ordering::Relaxed) + 1;
            if polls == 3 {
                return Poll::Ready(());
            }
            context.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn the_side_future_is_polled_first_then_only_after_its_own_wake() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut side = OnOwnWakes::new(CountedPolls(Arc::clone(&polls)));
        let task = Waker::noop();
        let context = Context::from_waker(task);
        // First poll: polled (1), and it wakes its own waker.
        assert!(side.poll(&context).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 1);
        // Woken: polled again (2), and wakes again.
        assert!(side.poll(&context).is_pending());
        assert_eq!(polls.load(Ordering::Relaxed), 2);
        // Woken: the third poll is ready.
        assert!(side.poll(&context).is_ready());
        assert_eq!(polls.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn without_its_own_wake_the_side_future_is_not_polled() {
        let polls = Arc::new(AtomicUsize::new(0));
        let mut side = OnOwnWakes::new(std::future::poll_fn(|_| {
            polls.fetch_add(1, Ordering::Relaxed);
            Poll::<()>::Pending
        }));
        let context = Context::from_waker(Waker::noop());
        for _ in 0..5 {
            assert!(side.poll(&context).is_pending());
        }
        // Polled once, at the first poll: it never woke its waker.
        assert_eq!(polls.load(Ordering::Relaxed), 1);
    }
}
