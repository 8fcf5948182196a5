//! Calendar windows (`Policy::calendar`): days, weeks, months and years of a
//! time zone as the fixed window's boundaries. Every expected boundary was
//! worked out by hand from the zone's rules and checked with GNU `date -u -d
//! ... +%s` (an independent calendar), never by the code under test; time is
//! in whole seconds on the limiter's manual timeline.

use proptest::prelude::*;
use tollgate_core::{
    Calendar, CalendarPeriod, Decision, Limiter, LimiterConfig, Policy, PolicyError, Resolution,
};

/// A limiter of `limit` units per `period` of `zone`, on a clock of seconds.
fn quota(limit: u64, period: CalendarPeriod, zone: &str, week_starts: Option<&str>) -> Limiter {
    let calendar = Calendar::new(period, zone, week_starts).unwrap();
    // Keys are kept for more than a year without a request (the in-memory
    // limiter's idle eviction would otherwise forget a quota's count).
    let config = LimiterConfig {
        idle_eviction_s: 40_000_000,
        ..LimiterConfig::default()
    };
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    limiter
        .configure(Policy::calendar(limit, calendar).unwrap())
        .unwrap();
    limiter
}

/// (allowed, remaining, retry_after s, reset_after s).
fn seen(decision: &Decision) -> [u64; 4] {
    [
        decision.allowed,
        decision.remaining.unwrap_or(u64::MAX),
        decision.retry_after_seconds(),
        decision.reset_after_seconds(),
    ]
}

/// The window of `period` in `zone` holding `second`.
fn window(
    period: CalendarPeriod,
    zone: &str,
    week_starts: Option<&str>,
    second: u64,
) -> (u64, u64) {
    Calendar::new(period, zone, week_starts)
        .unwrap()
        .window_at(second)
}

#[test]
fn the_spring_change_in_berlin_makes_a_day_of_23_hours() {
    // Sunday 2025-03-30: CET (+1) until 02:00 local, then CEST (+2). The
    // day runs from 2025-03-29T23:00Z (1743289200) to 2025-03-30T22:00Z
    // (1743372000): 82,800 s.
    let noon = 1_743_336_000; // 2025-03-30T12:00Z
    let day = window(CalendarPeriod::Day, "Europe/Berlin", None, noon);
    assert_eq!(day, (1_743_289_200, 1_743_372_000));
    let limiter = quota(2, CalendarPeriod::Day, "Europe/Berlin", None);
    assert_eq!(seen(&limiter.request("sk_a", noon)), [1, 1, 0, 36_000]);
    assert_eq!(seen(&limiter.request("sk_a", noon)), [1, 0, 0, 36_000]);
    // Refused until local midnight: 10 hours, not the 11 a 24-hour day
    // would give.
    assert_eq!(seen(&limiter.request("sk_a", noon)), [0, 0, 36_000, 36_000]);
    assert_eq!(seen(&limiter.request("sk_a", 1_743_371_999)), [0, 0, 1, 1]);
    // Monday's day, a 24-hour one, counts afresh.
    assert_eq!(
        seen(&limiter.request("sk_a", 1_743_372_000)),
        [1, 1, 0, 86_400]
    );
}

#[test]
fn the_autumn_change_in_berlin_makes_a_day_of_25_hours() {
    // Sunday 2025-10-26: CEST (+2) until 03:00 local, then CET (+1): from
    // 2025-10-25T22:00Z (1761429600) to 2025-10-26T23:00Z (1761519600).
    let noon = 1_761_480_000; // 2025-10-26T12:00Z
    assert_eq!(
        window(CalendarPeriod::Day, "Europe/Berlin", None, noon),
        (1_761_429_600, 1_761_519_600)
    );
    let limiter = quota(1, CalendarPeriod::Day, "Europe/Berlin", None);
    assert_eq!(
        seen(&limiter.request("sk_a", 1_761_429_600)),
        [1, 0, 0, 90_000]
    );
    assert_eq!(seen(&limiter.request("sk_a", noon)), [0, 0, 39_600, 39_600]);
}

#[test]
fn january_the_31st_to_february_the_1st() {
    // UTC months: January 2025 is [1735689600, 1738368000), 31 days.
    let limiter = quota(1, CalendarPeriod::Month, "UTC", None);
    assert_eq!(
        seen(&limiter.request("sk_a", 1_735_689_600)),
        [1, 0, 0, 2_678_400]
    );
    // 2025-01-31T23:59:59Z: one second left in January.
    assert_eq!(seen(&limiter.request("sk_a", 1_738_367_999)), [0, 0, 1, 1]);
    // February, 28 days in 2025, to 2025-03-01T00:00Z (1740787200).
    assert_eq!(
        seen(&limiter.request("sk_a", 1_738_368_000)),
        [1, 0, 0, 2_419_200]
    );
}

#[test]
fn february_has_29_days_in_a_leap_year_and_28_otherwise() {
    // 2024-02-29T10:00Z: February 2024 is [2024-02-01, 2024-03-01).
    assert_eq!(
        window(CalendarPeriod::Month, "UTC", None, 1_709_200_800),
        (1_706_745_600, 1_709_251_200)
    );
    // 2025-02-28T10:00Z: February 2025 is [2025-02-01, 2025-03-01).
    assert_eq!(
        window(CalendarPeriod::Month, "UTC", None, 1_740_736_800),
        (1_738_368_000, 1_740_787_200)
    );
    // The 29th is a day of its own: [2024-02-29, 2024-03-01).
    assert_eq!(
        window(CalendarPeriod::Day, "UTC", None, 1_709_200_800),
        (1_709_164_800, 1_709_251_200)
    );
    let limiter = quota(3, CalendarPeriod::Month, "UTC", None);
    assert_eq!(
        seen(&limiter.request("sk_a", 1_709_200_800)),
        [1, 2, 0, 50_400]
    );
}

#[test]
fn december_the_31st_to_january_the_1st() {
    // 2024 is a leap year: [2024-01-01, 2025-01-01) is 366 days.
    let late = 1_735_686_000; // 2024-12-31T23:00Z
    assert_eq!(
        window(CalendarPeriod::Year, "UTC", None, late),
        (1_704_067_200, 1_735_689_600)
    );
    let limiter = quota(1, CalendarPeriod::Year, "UTC", None);
    assert_eq!(seen(&limiter.request("sk_a", late)), [1, 0, 0, 3_600]);
    assert_eq!(seen(&limiter.request("sk_a", late)), [0, 0, 3_600, 3_600]);
    // 2025 (365 days) in UTC begins an hour later.
    assert_eq!(
        seen(&limiter.request("sk_a", 1_735_689_600)),
        [1, 0, 0, 31_536_000]
    );
    // In Berlin, the same instant is already 2025-01-01T00:00 local.
    assert_eq!(
        window(CalendarPeriod::Year, "Europe/Berlin", None, late).0,
        late
    );
}

#[test]
fn kolkata_days_start_at_half_past_six_utc() {
    // Asia/Kolkata is +05:30 all year: 2025-01-01 local runs from
    // 2024-12-31T18:30Z (1735669800) to 2025-01-01T18:30Z (1735756200).
    assert_eq!(
        window(CalendarPeriod::Day, "Asia/Kolkata", None, 1_735_669_799).1,
        1_735_669_800
    );
    assert_eq!(
        window(CalendarPeriod::Day, "Asia/Kolkata", None, 1_735_669_800),
        (1_735_669_800, 1_735_756_200)
    );
    let limiter = quota(1, CalendarPeriod::Day, "Asia/Kolkata", None);
    assert_eq!(seen(&limiter.request("sk_a", 1_735_669_799)), [1, 0, 0, 1]);
    assert_eq!(
        seen(&limiter.request("sk_a", 1_735_669_800)),
        [1, 0, 0, 86_400]
    );
}

#[test]
fn a_week_from_monday_runs_across_the_end_of_a_month() {
    // Wednesday 2025-10-01T09:00Z lies in the week from Monday 2025-09-29
    // to Monday 2025-10-06.
    let wednesday = 1_759_309_200;
    assert_eq!(
        window(CalendarPeriod::Week, "UTC", None, wednesday),
        (1_759_104_000, 1_759_708_800)
    );
    // In Berlin (+2 in October), local midnights are at 22:00Z.
    assert_eq!(
        window(
            CalendarPeriod::Week,
            "Europe/Berlin",
            Some("monday"),
            wednesday
        ),
        (1_759_096_800, 1_759_701_600)
    );
    // A week from Sunday: Sunday 2025-09-28 to Sunday 2025-10-05.
    assert_eq!(
        window(CalendarPeriod::Week, "UTC", Some("Sunday"), wednesday),
        (1_759_017_600, 1_759_622_400)
    );
    let limiter = quota(1, CalendarPeriod::Week, "UTC", None);
    assert_eq!(
        seen(&limiter.request("sk_a", wednesday)),
        [1, 0, 0, 399_600]
    );
    assert_eq!(seen(&limiter.request("sk_a", 1_759_708_799)), [0, 0, 1, 1]);
}

#[test]
fn a_plan_holds_a_rate_and_a_calendar_quota_together() {
    // 2 per 10 s and 3 per UTC day, all or nothing: a request the day
    // refuses takes nothing of the rate either.
    let config = LimiterConfig::from_toml_str(
        "idle_eviction_s = 200000\n\
         [[default_policy]]\nname = \"burst\"\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 10\n\
         [[default_policy]]\nname = \"daily\"\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow = \"day\"\n",
    )
    .unwrap();
    let limiter = Limiter::new(&config, Resolution::Seconds).unwrap();
    let day = 1_735_689_600; // 2025-01-01T00:00Z
    let allowed = |now| limiter.request("sk_a", now).is_allowed();
    assert!(allowed(day));
    assert!(allowed(day + 1));
    assert!(!allowed(day + 2), "the rate refuses the third in 10 s");
    assert!(allowed(day + 10));
    // The day is used up: refused, with the wait until midnight.
    let refused = limiter.request("sk_a", day + 20);
    assert!(!refused.is_allowed());
    assert_eq!(refused.retry_after_seconds(), 86_400 - 20);
    assert!(allowed(day + 86_400));
}

#[test]
fn calendar_documents_are_read_and_written() {
    let document = serde_json::json!({
        "algorithm": "fixed_window", "limit": 10000, "window": "month",
        "time_zone": "Europe/Berlin"
    });
    let policy = Policy::from_json(&document).unwrap();
    let month = Calendar::new(CalendarPeriod::Month, "Europe/Berlin", None).unwrap();
    assert_eq!(policy, Policy::calendar(10_000, month).unwrap());
    assert_eq!(serde_json::to_value(policy).unwrap(), document);
    // UTC by default; a week may start on another day, and says so.
    let week: Policy = toml::from_str(
        "algorithm = \"fixed_window\"\nlimit = 5\nwindow = \"week\"\nweek_starts = \"sunday\"\n",
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(week).unwrap(),
        serde_json::json!({"algorithm": "fixed_window", "limit": 5, "window": "week",
                           "time_zone": "UTC", "week_starts": "sunday"})
    );
}

#[test]
fn bad_calendars_are_refused_with_the_setting_named() {
    let error = |document: serde_json::Value| Policy::from_json(&document).unwrap_err().to_string();
    assert_eq!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "month",
                                 "time_zone": "Europe/Atlantis"})
        ),
        "time_zone \"Europe/Atlantis\" is not an IANA time zone name (such as \
         \"Europe/Berlin\" or \"UTC\")"
    );
    assert!(
        error(serde_json::json!({"algorithm": "token_bucket", "limit": 1, "window": "day"}))
            .contains("its algorithm must be fixed_window, not token_bucket")
    );
    assert!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "day",
                                 "window_s": 60})
        )
        .contains("not both")
    );
    assert!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window_s": 60,
                                 "time_zone": "UTC"})
        )
        .starts_with("time_zone applies to a calendar window")
    );
    assert!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "day",
                                 "week_starts": "monday"})
        )
        .starts_with("week_starts applies to window = \"week\" only")
    );
    assert!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "week",
                                 "week_starts": "caturday"})
        )
        .starts_with("week_starts must be a day of the week")
    );
    assert!(
        error(serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "fortnight"}))
            .contains("unknown variant `fortnight`")
    );
    assert!(
        error(
            serde_json::json!({"algorithm": "fixed_window", "limit": 1, "window": "day",
                                 "count_refused": true})
        )
        .starts_with("count_refused does not apply to a calendar window")
    );
    assert!(matches!(
        Calendar::new(CalendarPeriod::Day, "", None),
        Err(tollgate_core::CalendarError::UnknownTimeZone(_))
    ));
    let _: PolicyError = PolicyError::Malformed(String::new());
}

#[test]
fn the_calendar_ends_in_the_year_9999_without_a_panic() {
    let month = Calendar::new(CalendarPeriod::Month, "Pacific/Kiritimati", None).unwrap();
    let last = tollgate_core::CALENDAR_LAST_BOUNDARY_S;
    assert_eq!(month.window_at(last), (last, u64::MAX));
    assert_eq!(month.window_at(u64::MAX), (last, u64::MAX));
    assert_eq!(month.window_at(last - 1).1, last);
    let limiter = quota(1, CalendarPeriod::Year, "UTC", None);
    assert!(limiter.request("sk_a", i64::MAX as u64).is_allowed());
    assert!(!limiter.request("sk_a", i64::MAX as u64).is_allowed());
}

proptest! {
    /// Windows tile time: each holds its second, and its first and last
    /// seconds name the same window; the next begins where it ends; a
    /// Berlin day is 23, 24 or 25 hours long.
    #[test]
    fn windows_tile_time(second in 0u64..4_102_444_800, period in 0usize..4) {
        let period = [CalendarPeriod::Day, CalendarPeriod::Week, CalendarPeriod::Month,
                      CalendarPeriod::Year][period];
        for zone in ["UTC", "Europe/Berlin", "Asia/Kolkata", "America/Santiago"] {
            let calendar = Calendar::new(period, zone, None).unwrap();
            let (start, end) = calendar.window_at(second);
            prop_assert!(start <= second && second < end);
            prop_assert_eq!(calendar.window_at(start), (start, end));
            prop_assert_eq!(calendar.window_at(end - 1), (start, end));
            prop_assert_eq!(calendar.window_at(end).0, end);
            if zone == "Europe/Berlin" && period == CalendarPeriod::Day && second >= 347_155_200 {
                // Berlin has kept CET/CEST since 1981.
                prop_assert!([82_800, 86_400, 90_000].contains(&(end - start)));
            }
        }
    }
}
