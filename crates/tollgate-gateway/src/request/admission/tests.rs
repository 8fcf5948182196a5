//! Which requests [`admit`] answers at once and which it hands on to
//! [`Admitting::finish`], and that both answer as the limits say.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, StatusCode};
use tollgate_core::{ManualClock, MemorySlots, MemoryStore, SlotStore, Store};

use super::{Admitted, Answer, Stores, admit};
use crate::config::ServeConfig;
use crate::observe::access_log::Outcome;
use crate::request::delay::WaitingRoom;
use crate::serve::reloadable::Reloadable;

/// A gateway's limits in memory, as `tollgate serve` builds them from
/// `toml`, its clock standing at 0.
struct Limits {
    store: Arc<dyn Store>,
    slots: Arc<dyn SlotStore>,
    waiting: Arc<WaitingRoom>,
    reloadable: Reloadable,
}

impl Limits {
    fn new(toml: &str) -> Self {
        let config = ServeConfig::from_toml_str(toml).unwrap();
        let clock = Arc::new(ManualClock::new(0));
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new(&config.limits, clock).unwrap());
        let reloadable = Reloadable::build(&config, store.as_ref(), None).unwrap();
        Limits {
            store,
            slots: Arc::new(MemorySlots::new()),
            waiting: Arc::default(),
            reloadable,
        }
    }

    /// What [`admit`] answers for a request to `path` carrying `headers`.
    fn admit<'a>(&'a self, path: &str, headers: &'a HeaderMap) -> Answer<'a> {
        let stores = Stores {
            store: &self.store,
            slots: Some(&self.slots),
            waiting: &self.waiting,
            top_keys: None,
        };
        let route = self.reloadable.routes.find(path);
        let peer = "192.0.2.7:5000".parse().unwrap();
        admit(
            stores,
            &self.reloadable,
            route,
            headers,
            peer,
            &mut Outcome::new(false),
        )
    }
}

fn with_key(key: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", HeaderValue::from_static(key));
    headers
}

/// The answer, which must have come at once.
fn now(answer: Answer<'_>) -> Result<Admitted, StatusCode> {
    match answer {
        Answer::Now(answer) => answer.map_err(|response| response.status()),
        Answer::Later(_) => panic!("handed on, where it should be answered at once"),
    }
}

/// The answer, which must have been handed on, once finished.
async fn later(answer: Answer<'_>) -> Result<Admitted, StatusCode> {
    match answer {
        Answer::Now(_) => panic!("answered at once, where it must wait"),
        Answer::Later(admitting) => admitting
            .finish(&mut Outcome::new(false))
            .await
            .map_err(|response| response.status()),
    }
}

/// A plan of `limit` requests a minute for every key, and one route with
/// `extra` settings.
fn route(limit: u64, extra: &str) -> String {
    format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow_s = 60\n\
         [[routes]]\nname = \"orders\"\nprefix = \"/\"\n\
         upstream = \"http://127.0.0.1:1\"\n{extra}"
    )
}

#[test]
fn a_plan_in_memory_is_decided_at_once() {
    // One request a minute: the first is admitted, the second refused.
    let limits = Limits::new(&route(1, ""));
    let headers = with_key("key-one");
    let first = now(limits.admit("/orders", &headers)).unwrap();
    assert!(first.slot.is_none() && first.settlement.is_none());
    assert_eq!(
        now(limits.admit("/orders", &headers)).err(),
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
    // Refused before its limits: no key on a route that needs one.
    assert_eq!(
        now(limits.admit("/orders", &HeaderMap::new())).err(),
        Some(StatusCode::UNAUTHORIZED)
    );
}

#[tokio::test]
async fn a_concurrency_slot_taken_first_is_waited_for() {
    let limits = Limits::new(&route(100, "max_in_flight = 1\n"));
    let headers = with_key("key-one");
    let admitted = later(limits.admit("/orders", &headers)).await.unwrap();
    assert!(admitted.slot.is_some());
    // The slot held, a second request is refused before its rates (its
    // plan would allow 100), with the status of refusals (`[refusal]
    // status`, 429 unless set).
    assert_eq!(
        later(limits.admit("/orders", &headers)).await.err(),
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
}

#[tokio::test]
async fn a_plan_and_a_route_budget_are_decided_together_through_the_store() {
    // The key's plan (one a minute) and the route's own budget (60 a
    // minute): two limits, decided in one store call.
    let limits = Limits::new(&route(1, "rpm = 60\n"));
    let headers = with_key("key-one");
    assert!(later(limits.admit("/orders", &headers)).await.is_ok());
    assert_eq!(
        later(limits.admit("/orders", &headers)).await.err(),
        Some(StatusCode::TOO_MANY_REQUESTS)
    );
}

#[tokio::test]
async fn a_route_with_a_delay_books_its_turn() {
    // Per client IP, one a second with a burst of one, waiting up to 2 s:
    // the first is served at once (its turn is now).
    let limits = Limits::new(&route(
        1,
        "api_key = \"none\"\nkey = \"ip\"\nrpm = 60\nburst = 1\ndelay = \"2s\"\n",
    ));
    let headers = HeaderMap::new();
    assert!(later(limits.admit("/orders", &headers)).await.is_ok());
}
