//! Shedding the oldest idle connection when the process is out of file
//! descriptors. Without it, a flood of connections that send nothing holds
//! every descriptor until each one's idle timeout: no new client, health
//! checks included, is accepted meanwhile. With it, a listener that cannot
//! accept for want of a descriptor (`EMFILE`, `ENFILE`) closes the
//! connection of the whole process that has been idle longest (no request in
//! flight) and accepts at once, so a health check or a real client takes the
//! place of the quietest connection.
//!
//! [`Connections`] is the process's one list (every listener of every
//! worker registers its connections in it, so the admin listener can shed a
//! proxy connection); a connection is listed from its start, by its
//! [`Activity`], and leaves the list when its activity is dropped.

use std::sync::{Arc, Mutex, Weak};

use tokio::sync::watch;

use crate::idle::Activity;

/// The open connections of a process, by their activity.
#[derive(Debug, Default)]
pub struct Connections {
    listed: Mutex<Listed>,
}

#[derive(Debug, Default)]
struct Listed {
    /// Each connection, with its listener's stop signal (none for a
    /// connection listed without a listener).
    activities: Vec<(Weak<Activity>, Option<watch::Receiver<bool>>)>,
    /// The list's length after its last sweep of closed connections.
    after_sweep: usize,
}

impl Connections {
    /// An empty list, to share between every listener of a process.
    pub fn new() -> Arc<Connections> {
        Arc::new(Connections::default())
    }

    /// Lists the connection of `activity`, until the activity is dropped.
    pub fn register(&self, activity: &Arc<Activity>) {
        self.list(activity, None);
    }

    fn list(&self, activity: &Arc<Activity>, listener: Option<watch::Receiver<bool>>) {
        let Ok(mut listed) = self.listed.lock() else {
            return;
        };
        // Closed connections are swept out once the list has doubled since
        // the last sweep: a constant cost per connection on average.
        if listed.activities.len() >= 2 * listed.after_sweep + 64 {
            listed
                .activities
                .retain(|(weak, _)| weak.strong_count() > 0);
            listed.after_sweep = listed.activities.len();
        }
        listed.activities.push((Arc::downgrade(activity), listener));
    }

    /// [`Connections::register`] for a connection of the listener `stopping`
    /// belongs to, shed at once if that listener has stopped: a connection
    /// accepted just before the stop, or handed to its worker after it, is
    /// listed after [`Connections::shed_all`] ran. Only that listener's: the
    /// process's other listeners (the gateway's admin listener, which answers
    /// `/readyz` during a drain) go on listing theirs unshed.
    pub fn register_for(&self, activity: &Arc<Activity>, stopping: &crate::Stopping) {
        self.list(activity, Some(stopping.stop_signal()));
        if stopping.is_stopped() {
            activity.shed();
        }
    }

    /// How many shed connections have no request in flight but are not yet
    /// closed (their tasks have yet to run): a listener waits for them
    /// rather than shed more.
    pub fn closing(&self) -> usize {
        let Ok(listed) = self.listed.lock() else {
            return 0;
        };
        listed
            .activities
            .iter()
            .filter_map(|(weak, _)| weak.upgrade())
            .filter(|activity| activity.is_shed() && activity.in_flight() == 0)
            .count()
    }

    /// Sheds every open connection whose listener has stopped (at a stop),
    /// and those listed without a listener: each closes once none of its
    /// requests is in flight. The process's other listeners keep theirs
    /// (the gateway's admin listener answers `/readyz` during a drain, on a
    /// connection opened as the drain began). Connections listed later are
    /// shed by [`Connections::register_for`] when their own listener has
    /// stopped.
    pub fn shed_all(&self) {
        let Ok(listed) = self.listed.lock() else {
            return;
        };
        let open: Vec<Arc<Activity>> = listed
            .activities
            .iter()
            .filter(|(_, listener)| listener.as_ref().is_none_or(|stopped| *stopped.borrow()))
            .filter_map(|(weak, _)| weak.upgrade())
            .collect();
        drop(listed);
        for activity in open {
            activity.shed();
        }
    }

    /// Sheds the open connection idle longest (none of its requests in
    /// flight, not shed already): it closes as if its idle timeout had
    /// passed. `false` when there is none.
    pub fn shed_oldest_idle(&self) -> bool {
        let Ok(listed) = self.listed.lock() else {
            return false;
        };
        let oldest = listed
            .activities
            .iter()
            .filter_map(|(weak, _)| weak.upgrade())
            .filter(|activity| activity.in_flight() == 0 && !activity.is_shed())
            .min_by_key(|activity| activity.last_byte());
        drop(listed);
        match oldest {
            Some(activity) => {
                activity.shed();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::idle::{InFlight, Tracked, idle};
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn the_connection_idle_longest_is_shed_and_closes_at_once() {
        let connections = Connections::new();
        // Three connections; the second moves a byte at 10 s, the third has
        // a request in flight; the first is idle longest.
        let first = Activity::new();
        let second = Activity::new();
        let third = Activity::new();
        for activity in [&first, &second, &third] {
            connections.register(activity);
        }
        let (mut client, server) = tokio::io::duplex(8);
        let mut server = Tracked::new(server, &second);
        tokio::time::advance(Duration::from_secs(10)).await;
        client.write_all(b"x").await.unwrap();
        server.read_exact(&mut [0]).await.unwrap();
        let _request = InFlight::start(&third);
        assert!(connections.shed_oldest_idle());
        assert!(first.is_shed() && !second.is_shed() && !third.is_shed());
        // Its wait for idleness ends now, not at its timeout.
        let start = tokio::time::Instant::now();
        idle(&first, Duration::from_secs(30)).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        // Then the second; the third is never shed while in flight.
        assert!(connections.shed_oldest_idle());
        assert!(second.is_shed());
        assert!(!connections.shed_oldest_idle());
    }

    #[tokio::test(start_paused = true)]
    async fn a_shed_connection_with_a_request_in_flight_closes_when_it_ends() {
        let connections = Connections::new();
        let activity = Activity::new();
        connections.register(&activity);
        assert!(connections.shed_oldest_idle());
        // A request that began just after the choice: its connection stays
        // open until the request ends, at 100 s, however long its timeout.
        let request = InFlight::start(&activity);
        let start = tokio::time::Instant::now();
        let waiting = {
            let activity = Arc::clone(&activity);
            tokio::spawn(async move { idle(&activity, Duration::from_secs(3600)).await })
        };
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert!(!waiting.is_finished());
        drop(request);
        waiting.await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_secs(100));
    }

    #[test]
    fn after_a_stop_only_the_stopped_listeners_connections_are_shed_as_listed() {
        let connections = Connections::new();
        let (stopped, stopped_listener) = crate::Shutdown::new();
        let (_running, running_listener) = crate::Shutdown::new();
        let before = Activity::new();
        connections.register_for(&before, &stopped_listener);
        // The other listener's connection, open as the stop comes.
        let admin_before = Activity::new();
        connections.register_for(&admin_before, &running_listener);
        stopped.stop();
        connections.shed_all();
        let after = Activity::new();
        connections.register_for(&after, &stopped_listener);
        // Another listener of the process (the gateway's admin) still
        // answers: its new connection is listed unshed.
        let admin = Activity::new();
        connections.register_for(&admin, &running_listener);
        assert!(before.is_shed() && after.is_shed());
        assert!(!admin.is_shed() && !admin_before.is_shed());
    }

    #[test]
    fn closed_connections_leave_the_list() {
        let connections = Connections::new();
        for _ in 0..1_000 {
            connections.register(&Activity::new());
        }
        let kept = Activity::new();
        connections.register(&kept);
        let listed = connections.listed.lock().unwrap().activities.len();
        // Every one closes at once, so each sweep (at 64 listed) empties the
        // list: the last, at the 961st, leaves it and the 39 after it (40),
        // and the one kept.
        assert_eq!(listed, 41);
        assert!(connections.shed_oldest_idle());
        assert!(kept.is_shed());
    }
}
