//! The servers of one route, used in turn (round robin), skipping those in
//! back-off (their passive health, `upstream_health.rs`): a server that refused a connection or did not accept one within
//! `connect_timeout` is skipped for `[upstream] backoff`, then tried again.
//!
//! The turn and the health are the route's, shared by every worker thread
//! (the route is part of the reloadable snapshot): one atomic add per request
//! on a route with several servers, and a server found down by one worker is
//! skipped by all. A route with one server touches neither. A reload builds
//! new routes, so it starts every turn over and forgets every back-off.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::proxy::upstream::UpstreamTarget;

/// The servers of a route: at least one, at most 64
/// (`config::MAX_UPSTREAMS`).
#[derive(Debug)]
pub(crate) struct Servers {
    targets: Box<[Arc<UpstreamTarget>]>,
    /// The turn of the next request (modulo the number of servers).
    next: AtomicUsize,
}

const _: () = assert!(crate::config::MAX_UPSTREAMS <= u64::BITS as usize);

impl Servers {
    /// The servers `targets` (1 to 64), in the order listed.
    pub(crate) fn new(targets: Vec<Arc<UpstreamTarget>>) -> Self {
        Servers {
            targets: targets.into_boxed_slice(),
            next: AtomicUsize::new(0),
        }
    }

    /// The first server listed.
    #[cfg(test)]
    pub(crate) fn first(&self) -> Option<&Arc<UpstreamTarget>> {
        self.targets.first()
    }

    /// The servers one request tries, in order, each at most once: from the
    /// one whose turn it is, those not in back-off, then (when all of those
    /// failed, or there were none) those in back-off. This takes the turn.
    pub(crate) fn attempts(&self) -> Attempts<'_> {
        let (start, now) = if self.targets.len() > 1 {
            let turn = self.next.fetch_add(1, Ordering::Relaxed);
            (turn % self.targets.len(), Some(Instant::now()))
        } else {
            (0, None)
        };
        Attempts {
            targets: &self.targets,
            start,
            position: 0,
            skipped: 0,
            now,
        }
    }
}

/// The servers a request tries (see [`Servers::attempts`]).
pub(crate) struct Attempts<'a> {
    targets: &'a [Arc<UpstreamTarget>],
    start: usize,
    /// 0 to n - 1: first pass; n to 2n - 1: the servers skipped in it.
    position: usize,
    /// Bit i: server i was in back-off in the first pass.
    skipped: u64,
    /// When the request started; `None` for a lone server (never skipped).
    now: Option<Instant>,
}

impl<'a> Iterator for Attempts<'a> {
    type Item = &'a Arc<UpstreamTarget>;

    fn next(&mut self) -> Option<Self::Item> {
        let count = self.targets.len();
        while self.position < 2 * count {
            let first_pass = self.position < count;
            let index = (self.start + self.position % count) % count;
            self.position += 1;
            let target = &self.targets[index];
            if first_pass {
                if self.now.is_some_and(|now| target.health.is_down(now)) {
                    self.skipped |= 1 << index;
                    continue;
                }
                return Some(target);
            }
            if self.skipped & (1 << index) != 0 {
                return Some(target);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Uri;
    use std::time::Duration;

    fn servers(count: u16) -> Servers {
        let targets = (1..=count)
            .map(|port| {
                let origin: Uri = format!("http://h:{port}/").parse().unwrap();
                Arc::new(UpstreamTarget::new(origin).unwrap())
            })
            .collect();
        Servers::new(targets)
    }

    fn ports(attempts: Attempts<'_>) -> Vec<u16> {
        attempts
            .map(|target| target.origin.port_u16().unwrap())
            .collect()
    }

    #[test]
    fn each_request_starts_at_the_next_server_and_may_try_every_one() {
        let servers = servers(3);
        assert_eq!(ports(servers.attempts()), [1, 2, 3]);
        assert_eq!(ports(servers.attempts()), [2, 3, 1]);
        assert_eq!(ports(servers.attempts()), [3, 1, 2]);
        assert_eq!(ports(servers.attempts()), [1, 2, 3]);
    }

    #[test]
    fn a_server_in_back_off_is_tried_last_until_its_back_off_ends() {
        let servers = servers(3);
        let now = Instant::now();
        servers.targets[1]
            .health
            .mark_down(now, Duration::from_secs(10));
        // In back-off: after the others, as a last resort.
        let attempts = servers.attempts();
        assert_eq!(ports(attempts), [1, 3, 2]);
        let attempts = servers.attempts();
        assert_eq!(ports(attempts), [3, 1, 2]);
        // 10 s later it is up again (the attempts' clock moved by hand).
        let mut later = servers.attempts();
        later.now = Some(now + Duration::from_secs(10));
        assert_eq!(ports(later), [3, 1, 2]);
        let mut later = servers.attempts();
        later.now = Some(now + Duration::from_secs(10));
        assert_eq!(ports(later), [1, 2, 3]);
    }

    #[test]
    fn with_every_server_in_back_off_each_is_tried_once() {
        let servers = servers(2);
        let now = Instant::now();
        for target in servers.targets.iter() {
            target.health.mark_down(now, Duration::from_secs(10));
        }
        assert_eq!(ports(servers.attempts()), [1, 2]);
        servers.targets[0].health.mark_up();
        assert_eq!(ports(servers.attempts()), [1, 2]);
    }

    #[test]
    fn a_lone_server_and_a_zero_back_off_are_never_skipped() {
        let lone = servers(1);
        lone.targets[0]
            .health
            .mark_down(Instant::now(), Duration::from_secs(10));
        assert_eq!(ports(lone.attempts()), [1]);
        let two = servers(2);
        two.targets[0]
            .health
            .mark_down(Instant::now(), Duration::ZERO);
        assert_eq!(ports(two.attempts()), [1, 2]);
    }
}
