//! A route layer whose budget is a calendar quota (issue #29): 2 requests
//! per Berlin day per client IP, across the night into the 23-hour day of
//! the spring change (Sunday 2025-03-30 runs from 2025-03-29T23:00:00Z,
//! 1743289200, to 2025-03-30T22:00:00Z, 1743372000: GNU `date -u -d`).
//! A manual clock; expected values by hand.

mod support;

use tollgate_core::{Calendar, CalendarPeriod, ManualClock};
use tollgate_tower::{Budget, HostLimits, KeySelector};
use tower::ServiceBuilder;

use support::{Backend, from, header, send};

#[tokio::test]
async fn a_calendar_budget_ends_at_local_midnight() {
    let clock = ManualClock::new((1_743_289_200 - 1) * 1_000_000_000);
    let limits = HostLimits::builder().clock(clock.clone()).build().unwrap();
    let day = Calendar::new(CalendarPeriod::Day, "Europe/Berlin", None).unwrap();
    let layer = limits
        .route("site")
        .budget(Budget::calendar(2, day).unwrap())
        .unwrap()
        .key(KeySelector::Ip);
    let backend = Backend::default();
    let service = ServiceBuilder::new()
        .layer(layer)
        .service(backend.service());
    let peer = "192.0.2.7:5000";
    let mut seen = Vec::new();
    for _ in 0..3 {
        let response = send(&service, from(peer)).await;
        seen.push((
            response.status().as_u16(),
            header(&response, "ratelimit").map(str::to_owned),
            header(&response, "retry-after").map(str::to_owned),
        ));
    }
    let state = |text: &str| Some(text.to_owned());
    assert_eq!(
        seen,
        [
            (200, state("\"site\";r=1;t=1"), None),
            (200, state("\"site\";r=0;t=1"), None),
            (429, state("\"site\";r=0;t=1"), Some("1".to_owned())),
        ]
    );
    // Midnight in Berlin: a day of 23 hours, 82,800 s.
    clock.advance_by("1s").unwrap();
    let response = send(&service, from(peer)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "ratelimit-policy"),
        Some("\"site\";q=2;w=86400")
    );
    assert_eq!(header(&response, "ratelimit"), Some("\"site\";r=1;t=82800"));
    assert_eq!(backend.calls(), 3);
}
