//! Which requests [`admit`] answers at once and which it hands on to
//! [`Admitting::finish`](super::Admitting::finish), and that both answer as
//! the limits say, noting the same decision for the access log.

use std::sync::Arc;

use http::{HeaderMap, HeaderValue, StatusCode};
use tollgate_core::{ManualClock, MemorySlots, MemoryStore, SlotStore, Store};

use super::{Admitted, Answer, Stores, admit};
use crate::config::ServeConfig;
use crate::observe::access_log::{Admission, Outcome};
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
    fn admit<'a>(
        &'a self,
        path: &str,
        headers: &'a HeaderMap,
        outcome: &mut Outcome,
    ) -> Answer<'a> {
        let stores = Stores {
            store: &self.store,
            slots: Some(&self.slots),
            waiting: &self.waiting,
            top_keys: None,
        };
        let route = self.reloadable.routes.find(path);
        let peer = "192.0.2.7:5000".parse().unwrap();
        admit(stores, &self.reloadable, route, headers, peer, outcome)
    }

    /// The request's answer, which must come at once, and the decision
    /// noted for the access log.
    fn now(&self, path: &str, headers: &HeaderMap) -> (Result<Admitted, StatusCode>, Admission) {
        let mut outcome = Outcome::new(true);
        match self.admit(path, headers, &mut outcome) {
            Answer::Now(answer) => (
                answer.map_err(|response| response.status()),
                outcome.admission,
            ),
            Answer::Later(_) => panic!("handed on, where it should be answered at once"),
        }
    }

    /// The request's answer, which must be handed on, once finished; and
    /// the decision noted for the access log (by both steps).
    async fn later(
        &self,
        path: &str,
        headers: &HeaderMap,
    ) -> (Result<Admitted, StatusCode>, Admission) {
        let mut outcome = Outcome::new(true);
        let admitting = match self.admit(path, headers, &mut outcome) {
            Answer::Now(_) => panic!("answered at once, where it must wait"),
            Answer::Later(admitting) => admitting,
        };
        let answer = admitting.finish(&mut outcome).await;
        (
            answer.map_err(|response| response.status()),
            outcome.admission,
        )
    }
}

/// The status of a refused request (`None`: admitted) and the decision
/// noted.
fn refusal(
    (answer, admission): (Result<Admitted, StatusCode>, Admission),
) -> (Option<StatusCode>, Admission) {
    (answer.err(), admission)
}

fn with_key(key: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("x-api-key", HeaderValue::from_static(key));
    headers
}

/// A plan of `limit` requests a minute for every key, `limits` settings
/// more, and one route `/orders` with `extra` settings.
fn route(limit: u64, limits: &str, extra: &str) -> String {
    format!(
        "[limits]\n{limits}\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow_s = 60\n\
         [[routes]]\nname = \"orders\"\nprefix = \"/\"\n\
         upstream = \"http://127.0.0.1:1\"\n{extra}"
    )
}

#[test]
fn a_plan_in_memory_is_decided_at_once() {
    // One request a minute: the first is admitted, the second refused.
    let limits = Limits::new(&route(1, "", ""));
    let headers = with_key("key-one");
    let (first, admission) = limits.now("/orders", &headers);
    let first = first.unwrap();
    assert!(first.slot.is_none() && first.settlement.is_none());
    assert_eq!(admission, Admission::Allowed);
    assert_eq!(
        refusal(limits.now("/orders", &headers)),
        (Some(StatusCode::TOO_MANY_REQUESTS), Admission::Refused)
    );
    // Refused before its limits: no key on a route that needs one.
    assert_eq!(
        limits.now("/orders", &HeaderMap::new()).0.err(),
        Some(StatusCode::UNAUTHORIZED)
    );
}

#[test]
fn an_exempt_key_and_a_keyless_route_budget_are_answered_at_once() {
    let limits = Limits::new(&route(1, "exempt_keys = [\"key-ops\"]", ""));
    let ops = with_key("key-ops");
    for _ in 0..3 {
        assert_eq!(limits.now("/orders", &ops).1, Admission::Exempt);
    }
    // Keyless, per client IP, one a minute: a lone limit of one unit.
    let limits = Limits::new(&route(
        100,
        "",
        "api_key = \"none\"\nkey = \"ip\"\nrpm = 1\n",
    ));
    let keyless = HeaderMap::new();
    assert_eq!(limits.now("/orders", &keyless).1, Admission::Allowed);
    assert_eq!(
        refusal(limits.now("/orders", &keyless)),
        (Some(StatusCode::TOO_MANY_REQUESTS), Admission::Refused)
    );
}

#[test]
fn a_refusal_in_shadow_mode_is_let_through_at_once() {
    // Every plan in shadow mode: the second request of one a minute is let
    // through, noted as such.
    let limits = Limits::new(&format!("{}[refusal]\nshadow = true\n", route(1, "", "")));
    let headers = with_key("key-one");
    assert_eq!(limits.now("/orders", &headers).1, Admission::Allowed);
    let (second, admission) = limits.now("/orders", &headers);
    assert!(second.is_ok());
    assert_eq!(admission, Admission::Shadow);
}

#[tokio::test]
async fn a_concurrency_slot_taken_first_is_waited_for() {
    let limits = Limits::new(&route(100, "", "max_in_flight = 1\n"));
    let headers = with_key("key-one");
    // The first request's slot is given up as soon as it is checked (its
    // answer is not kept); the second's is held.
    let (admitted, admission) = limits.later("/orders", &headers).await;
    assert!(admitted.unwrap().slot.is_some());
    assert_eq!(admission, Admission::Allowed);
    let held = limits.later("/orders", &headers).await.0.unwrap();
    // The slot held, a third request is refused before its rates (its
    // plan would allow 100), with the status of refusals (`[refusal]
    // status`, 429 unless set).
    assert_eq!(
        refusal(limits.later("/orders", &headers).await),
        (
            Some(StatusCode::TOO_MANY_REQUESTS),
            Admission::InFlightRefused
        )
    );
    drop(held);
}

#[tokio::test]
async fn a_tiers_concurrency_slot_is_taken_after_its_rates_reserved() {
    // Two a minute, and the default plan's tier allows one in flight: a
    // slot taken after the rates, which are reserved so that a request
    // refused its slot gives its unit back.
    let limits = Limits::new(&route(
        2,
        "[limits.tier_defaults.default]\nmax_in_flight = 1",
        "",
    ));
    let headers = with_key("key-one");
    let (first, admission) = limits.later("/orders", &headers).await;
    let first = first.unwrap();
    assert!(first.slot.is_some());
    assert_eq!(admission, Admission::Allowed);
    assert_eq!(
        refusal(limits.later("/orders", &headers).await),
        (
            Some(StatusCode::TOO_MANY_REQUESTS),
            Admission::InFlightRefused
        )
    );
    drop(first);
    // The refused request's unit was given back: the second unit of the
    // minute is there for this one, and the minute is then spent.
    assert_eq!(
        limits.later("/orders", &headers).await.1,
        Admission::Allowed
    );
    assert_eq!(
        refusal(limits.later("/orders", &headers).await),
        (Some(StatusCode::TOO_MANY_REQUESTS), Admission::Refused)
    );
}

#[tokio::test]
async fn two_limits_or_more_than_one_unit_are_decided_through_the_store() {
    // The key's plan (one a minute) and the route's own budget (60 a
    // minute): two limits, decided in one store call.
    let limits = Limits::new(&route(1, "", "rpm = 60\n"));
    let headers = with_key("key-one");
    assert_eq!(
        limits.later("/orders", &headers).await.1,
        Admission::Allowed
    );
    assert_eq!(
        refusal(limits.later("/orders", &headers).await),
        (Some(StatusCode::TOO_MANY_REQUESTS), Admission::Refused)
    );
    // A lone plan of three a minute, each request costing two units.
    let limits = Limits::new(&route(3, "", "cost = 2\n"));
    assert_eq!(
        limits.later("/orders", &headers).await.1,
        Admission::Allowed
    );
    assert_eq!(
        refusal(limits.later("/orders", &headers).await),
        (Some(StatusCode::TOO_MANY_REQUESTS), Admission::Refused)
    );
}

#[tokio::test(start_paused = true)]
async fn a_route_with_a_delay_books_its_turn() {
    // Per client IP, one a second with a burst of one, waiting up to 2 s:
    // the first is served at once (its turn is now); the second, at the
    // same instant, waits 1 s for its turn (the timer's time is paused and
    // runs ahead only while nothing else can).
    let limits = Limits::new(&route(
        1,
        "",
        "api_key = \"none\"\nkey = \"ip\"\nrpm = 60\nburst = 1\ndelay = \"2s\"\n",
    ));
    let headers = HeaderMap::new();
    let (first, admission) = limits.later("/orders", &headers).await;
    assert!(first.is_ok());
    assert_eq!(admission, Admission::Allowed);
    let mut outcome = Outcome::new(true);
    let Answer::Later(admitting) = limits.admit("/orders", &headers, &mut outcome) else {
        panic!("answered at once, where it must wait");
    };
    assert!(admitting.finish(&mut outcome).await.is_ok());
    assert_eq!(outcome.admission, Admission::Delayed);
    assert_eq!(outcome.waited, std::time::Duration::from_secs(1));
}
