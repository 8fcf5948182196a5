//! A route's budget: requests per minute and burst, as a token bucket; or a
//! calendar quota, requests per day, week, month or year of a time zone.

use serde::Deserialize;
use tollgate_core::{Calendar, CalendarPeriod, MAX_VALUE, Policy};

/// A route's (or a host default's) budget, per key.
///
/// - A rate: a token bucket refilled at `rpm / 60` tokens per second up to
///   `burst` tokens; each request takes one token. In JSON
///   `{"rpm": 60, "burst": 5}`; `burst` may be left out, and is then `rpm`.
/// - A calendar quota: `limit` requests per calendar period, counted as a
///   fixed window between local midnights (core's [`Policy::calendar`]). In
///   JSON `{"limit": 10000, "window": "month", "time_zone": "Europe/Berlin"}`
///   (`time_zone` default `"UTC"`; `week_starts` for weeks, default
///   `"monday"`).
///
/// ```
/// use tollgate_tower::Budget;
///
/// let budget = Budget::new(60, 5).unwrap();
/// assert_eq!((budget.rpm(), budget.burst()), (Some(60), 5));
/// assert!(Budget::new(0, 5).is_err());
///
/// let monthly: Budget =
///     serde_json::from_str(r#"{"limit": 10000, "window": "month", "time_zone": "Europe/Berlin"}"#)
///         .unwrap();
/// assert_eq!((monthly.rpm(), monthly.burst()), (None, 10_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "BudgetFields")]
pub struct Budget {
    policy: Policy,
}

/// A budget field outside 1..=2^63-1, or a calendar quota that cannot be
/// one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// A count outside 1..=2^63-1.
    #[error("{field} must be an integer from 1 to 2^63-1, got {value}")]
    OutOfRange {
        /// `rpm`, `burst` or `limit`.
        field: &'static str,
        /// The value given.
        value: u64,
    },
    /// The fields mix a rate and a calendar quota, or name no budget; the
    /// text says which.
    #[error("{0}")]
    Shape(String),
    /// A calendar's time zone or week start (core's `CalendarError`).
    #[error("{0}")]
    Calendar(#[from] tollgate_core::CalendarError),
}

impl Budget {
    /// `rpm` requests per minute with bursts of up to `burst` requests.
    ///
    /// # Errors
    ///
    /// [`BudgetError::OutOfRange`] when either is 0 or above 2^63-1.
    pub fn new(rpm: u64, burst: u64) -> Result<Self, BudgetError> {
        for (field, value) in [("rpm", rpm), ("burst", burst)] {
            check(field, value)?;
        }
        let policy = Policy::token_bucket(rpm, 60, burst).map_err(|_| BudgetError::OutOfRange {
            field: "rpm",
            value: rpm,
        })?;
        Ok(Budget { policy })
    }

    /// `limit` requests per period of `calendar`.
    ///
    /// # Errors
    ///
    /// [`BudgetError::OutOfRange`] when `limit` is 0 or above 2^63-1.
    pub fn calendar(limit: u64, calendar: Calendar) -> Result<Self, BudgetError> {
        check("limit", limit)?;
        let policy = Policy::calendar(limit, calendar).map_err(|_| BudgetError::OutOfRange {
            field: "limit",
            value: limit,
        })?;
        Ok(Budget { policy })
    }

    /// Tokens refilled per minute; `None` for a calendar quota.
    pub fn rpm(&self) -> Option<u64> {
        self.policy
            .calendar_window()
            .is_none()
            .then(|| self.policy.limit())
    }

    /// The most requests a fresh key may make at once: the bucket's
    /// capacity, or a calendar quota's `limit`.
    pub fn burst(&self) -> u64 {
        self.policy.capacity()
    }

    /// The calendar of a calendar quota; `None` for a rate.
    pub fn calendar_window(&self) -> Option<Calendar> {
        self.policy.calendar_window()
    }

    /// The engine policy: a token bucket of `rpm` tokens per 60 s, `burst`
    /// deep, or the calendar quota.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Seconds for a key's state to become as good as new, rounded up (an
    /// empty bucket to fill, a calendar period to end): after that long
    /// without a request it can be forgotten.
    pub(crate) fn seconds_to_fill(&self) -> u64 {
        self.policy.counted_span_s().min(MAX_VALUE)
    }
}

fn check(field: &'static str, value: u64) -> Result<(), BudgetError> {
    if (1..=MAX_VALUE).contains(&value) {
        Ok(())
    } else {
        Err(BudgetError::OutOfRange { field, value })
    }
}

/// A budget's fields as a configuration writes them (a gateway route's
/// table holds them beside its other settings): a rate (`rpm`, `burst`) or
/// a calendar quota (`limit`, `window`, `time_zone`, `week_starts`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetFields {
    /// Requests per minute (a rate).
    #[serde(default)]
    pub rpm: Option<u64>,
    /// The bucket's capacity (a rate; default `rpm`).
    #[serde(default)]
    pub burst: Option<u64>,
    /// Requests per calendar period (a calendar quota).
    #[serde(default)]
    pub limit: Option<u64>,
    /// The calendar period: `"day"`, `"week"`, `"month"` or `"year"`.
    #[serde(default)]
    pub window: Option<CalendarPeriod>,
    /// The calendar's IANA time zone (default `"UTC"`).
    #[serde(default)]
    pub time_zone: Option<String>,
    /// A week's first day (default `"monday"`).
    #[serde(default)]
    pub week_starts: Option<String>,
}

impl BudgetFields {
    /// The budget the fields describe; `None` when none is set.
    ///
    /// # Errors
    ///
    /// [`BudgetError::Shape`] for fields of a rate and a calendar quota
    /// mixed (a calendar `window` with `rpm`, say), or `burst` without
    /// `rpm`; [`BudgetError::OutOfRange`]; [`BudgetError::Calendar`].
    pub fn budget(self) -> Result<Option<Budget>, BudgetError> {
        if self == BudgetFields::default() {
            return Ok(None);
        }
        Budget::try_from(self).map(Some)
    }
}

impl TryFrom<BudgetFields> for Budget {
    type Error = BudgetError;

    fn try_from(document: BudgetFields) -> Result<Self, BudgetError> {
        let shape = |text: &str| Err(BudgetError::Shape(text.to_owned()));
        match (document.rpm, document.window) {
            (Some(_), Some(window)) => shape(&format!(
                "a calendar window (window = \"{window}\") takes limit, not rpm"
            )),
            (Some(rpm), None) => {
                if document.limit.is_some() {
                    return shape(
                        "limit belongs to a calendar window (window = \"month\", ...): a rate is rpm and burst",
                    );
                }
                if document.time_zone.is_some() || document.week_starts.is_some() {
                    return shape(
                        "time_zone and week_starts belong to a calendar window (window = \"day\", \"week\", \"month\" or \"year\")",
                    );
                }
                Budget::new(rpm, document.burst.unwrap_or(rpm))
            }
            (None, Some(window)) => {
                if document.burst.is_some() {
                    return shape("burst belongs to a rate (rpm): a calendar window takes limit");
                }
                let Some(limit) = document.limit else {
                    return shape("a calendar window needs limit, the requests per period");
                };
                let calendar = Calendar::new(
                    window,
                    document.time_zone.as_deref().unwrap_or("UTC"),
                    document.week_starts.as_deref(),
                )?;
                Budget::calendar(limit, calendar)
            }
            (None, None) if document.burst.is_some() => shape("burst needs rpm"),
            (None, None) => shape(
                "a budget is rpm (and burst), or limit with a calendar window (window = \"day\", \"week\", \"month\" or \"year\")",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_defaults_to_rpm() {
        let budget: Budget = serde_json::from_str(r#"{"rpm": 90}"#).unwrap();
        assert_eq!((budget.rpm(), budget.burst()), (Some(90), 90));
        let budget: Budget = serde_json::from_str(r#"{"rpm": 90, "burst": 4}"#).unwrap();
        assert_eq!((budget.rpm(), budget.burst()), (Some(90), 4));
        assert!(serde_json::from_str::<Budget>(r#"{"burst": 4}"#).is_err());
    }

    #[test]
    fn a_calendar_quota_is_limit_per_period() {
        let budget: Budget =
            serde_json::from_str(r#"{"limit": 500, "window": "week", "week_starts": "sunday"}"#)
                .unwrap();
        let week = Calendar::new(CalendarPeriod::Week, "UTC", Some("sunday")).unwrap();
        assert_eq!(budget.policy(), Policy::calendar(500, week).unwrap());
        assert_eq!(budget.calendar_window(), Some(week));
        // A week and a day's margin (daylight-saving days, zone changes).
        assert_eq!(budget.seconds_to_fill(), 8 * 86_400);
        for (bad, says) in [
            (r#"{"rpm": 5, "window": "day"}"#, "takes limit, not rpm"),
            (
                r#"{"limit": 5, "window": "day", "burst": 2}"#,
                "burst belongs to a rate",
            ),
            (r#"{"window": "day"}"#, "needs limit"),
            (
                r#"{"rpm": 5, "limit": 5}"#,
                "limit belongs to a calendar window",
            ),
            (
                r#"{"rpm": 5, "time_zone": "UTC"}"#,
                "time_zone and week_starts belong",
            ),
            (
                r#"{"limit": 0, "window": "day"}"#,
                "limit must be an integer",
            ),
            (
                r#"{"limit": 5, "window": "day", "time_zone": "Mars/Base"}"#,
                "IANA",
            ),
            (r#"{}"#, "a budget is rpm"),
        ] {
            let error = serde_json::from_str::<Budget>(bad).unwrap_err().to_string();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn time_to_fill_rounds_up() {
        assert_eq!(Budget::new(60, 5).unwrap().seconds_to_fill(), 5);
        assert_eq!(Budget::new(7, 7).unwrap().seconds_to_fill(), 60);
        assert_eq!(Budget::new(7, 1).unwrap().seconds_to_fill(), 9); // 60/7 = 8.57
        assert_eq!(Budget::new(MAX_VALUE, 1).unwrap().seconds_to_fill(), 1);
        assert_eq!(
            Budget::new(1, MAX_VALUE).unwrap().seconds_to_fill(),
            MAX_VALUE
        );
    }
}
