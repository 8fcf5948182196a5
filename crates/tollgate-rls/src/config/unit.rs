//! The time unit of a limit: the `RateLimitResponse.RateLimit.Unit` enum of
//! Envoy's rate limit protocol, and its length as envoyproxy/ratelimit counts it
//! (`UnitToDivider` in src/utils: a month is 30 days, a year 365 days).

use std::fmt;

/// A limit's time unit, with the protocol's numbers (`UNKNOWN = 0` ...
/// `WEEK = 7`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Unit {
    /// `UNKNOWN` (0): no unit (an unlimited limit, or a request override whose
    /// unit the protocol does not name).
    #[default]
    Unknown,
    /// `SECOND` (1).
    Second,
    /// `MINUTE` (2).
    Minute,
    /// `HOUR` (3).
    Hour,
    /// `DAY` (4).
    Day,
    /// `MONTH` (5): 30 days.
    Month,
    /// `YEAR` (6): 365 days.
    Year,
    /// `WEEK` (7).
    Week,
}

impl Unit {
    /// The units that have a length, shortest first.
    pub const TIMED: [Unit; 7] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
        Unit::Year,
    ];

    /// The unit's length in seconds (1, 60, 3600, 86400, 604800, 2592000,
    /// 31536000); `None` for [`Unit::Unknown`].
    pub fn seconds(self) -> Option<u64> {
        match self {
            Unit::Unknown => None,
            Unit::Second => Some(1),
            Unit::Minute => Some(60),
            Unit::Hour => Some(3_600),
            Unit::Day => Some(86_400),
            Unit::Week => Some(604_800),
            Unit::Month => Some(2_592_000),
            Unit::Year => Some(31_536_000),
        }
    }

    /// The protocol name: `UNKNOWN`, `SECOND`, ... `WEEK`.
    pub fn proto_name(self) -> &'static str {
        match self {
            Unit::Unknown => "UNKNOWN",
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
            Unit::Week => "WEEK",
        }
    }

    /// The protocol number (0 to 7).
    pub fn proto_value(self) -> i32 {
        match self {
            Unit::Unknown => 0,
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit of a protocol number; any number outside 1..=7 is
    /// [`Unit::Unknown`].
    pub fn from_proto_value(value: i32) -> Unit {
        match value {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => Unit::Unknown,
        }
    }

    /// The unit a protocol name stands for (`SECOND` ... `WEEK`, `UNKNOWN`),
    /// exact case; `None` for any other text.
    pub fn from_proto_name(name: &str) -> Option<Unit> {
        [Unit::Unknown]
            .into_iter()
            .chain(Unit::TIMED)
            .find(|unit| unit.proto_name() == name)
    }

    /// The unit a configuration file's `unit` names, in any case (`minute`,
    /// `Minute`), as envoyproxy/ratelimit reads it (`strings.ToUpper`, then the
    /// protocol's name table); `unknown` reads as [`Unit::Unknown`], which the
    /// loader refuses like any other invalid unit.
    pub fn from_config(text: &str) -> Option<Unit> {
        Unit::from_proto_name(&text.to_uppercase())
    }

    /// The unit exactly `seconds` long, if there is one.
    pub fn of_length(seconds: u64) -> Option<Unit> {
        Unit::TIMED
            .into_iter()
            .find(|unit| unit.seconds() == Some(seconds))
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.proto_name())
    }
}
