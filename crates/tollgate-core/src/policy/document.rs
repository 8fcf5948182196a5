//! A policy's document form (JSON and TOML): its fields, read and written,
//! and the rules that join them (`window_s` or a calendar `window`,
//! `count_refused` with the fixed window only).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Algorithm, Policy, PolicyError};
use crate::calendar::{Calendar, CalendarPeriod};

/// The policy's document form, as written in JSON and TOML: `window_s`, or
/// a calendar window (`window` with `time_zone` and, for weeks,
/// `week_starts`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a policy object")]
struct PolicyDocument {
    algorithm: Algorithm,
    limit: u64,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_integer"
    )]
    window_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<CalendarPeriod>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_zone: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    week_starts: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_integer"
    )]
    burst: Option<u64>,
    /// Fixed window only; written when true only, so every other policy's
    /// document is what it was before the field existed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_bool"
    )]
    count_refused: Option<bool>,
}

/// `count_refused`, when present, must be a boolean: `null` is not "absent".
pub(crate) fn present_bool<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<bool>, D::Error> {
    bool::deserialize(deserializer).map(Some)
}

/// `burst`, when present, must be an integer: `null` is not "absent".
pub(crate) fn present_integer<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    u64::deserialize(deserializer).map(Some)
}

impl Serialize for Policy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let fields = self.document_fields();
        PolicyDocument {
            algorithm: fields.algorithm,
            limit: fields.limit,
            window_s: fields.window_s,
            window: fields.window,
            time_zone: fields.time_zone,
            week_starts: fields.week_starts,
            burst: fields.burst,
            count_refused: fields.count_refused,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let document = PolicyDocument::deserialize(deserializer)?;
        Policy::from_document_fields(DocumentFields {
            algorithm: document.algorithm,
            limit: document.limit,
            window_s: document.window_s,
            window: document.window,
            time_zone: document.time_zone,
            week_starts: document.week_starts,
            burst: document.burst,
            count_refused: document.count_refused,
        })
        .map_err(serde::de::Error::custom)
    }
}

/// A policy's fields as its documents hold them (a policy object, or a
/// named policy of a plan, which holds them beside its name).
pub(crate) struct DocumentFields {
    pub(crate) algorithm: Algorithm,
    pub(crate) limit: u64,
    pub(crate) window_s: Option<u64>,
    pub(crate) window: Option<CalendarPeriod>,
    pub(crate) time_zone: Option<String>,
    pub(crate) week_starts: Option<String>,
    pub(crate) burst: Option<u64>,
    pub(crate) count_refused: Option<bool>,
}

impl Policy {
    /// The policy a document's fields describe (see [`Policy::new`];
    /// `count_refused` only with the fixed window; `window_s`, or a
    /// calendar `window` with a fixed window, its `time_zone` (default
    /// `"UTC"`) and, for weeks, `week_starts`).
    pub(crate) fn from_document_fields(fields: DocumentFields) -> Result<Self, PolicyError> {
        let calendar = match (fields.window_s, fields.window) {
            (Some(_), Some(window)) => {
                return Err(PolicyError::CalendarNotAllowed(format!(
                    "give window_s or window = \"{window}\", not both"
                )));
            }
            (None, None) => {
                return Err(PolicyError::Malformed(
                    "missing field `window_s` (or a calendar window: window = \"day\", \"week\", \"month\" or \"year\")".to_owned(),
                ));
            }
            (Some(_), None) => {
                if let Some(field) = [
                    ("time_zone", fields.time_zone.is_some()),
                    ("week_starts", fields.week_starts.is_some()),
                ]
                .iter()
                .find_map(|(name, given)| given.then_some(*name))
                {
                    return Err(PolicyError::CalendarNotAllowed(format!(
                        "{field} applies to a calendar window (window = \"day\", \"week\", \"month\" or \"year\"), not to window_s"
                    )));
                }
                None
            }
            (None, Some(window)) => {
                if fields.algorithm != Algorithm::FixedWindow {
                    return Err(PolicyError::CalendarNotAllowed(format!(
                        "a calendar window (window = \"{window}\") is a fixed window: its algorithm must be fixed_window, not {}",
                        fields.algorithm
                    )));
                }
                Some(Calendar::new(
                    window,
                    fields.time_zone.as_deref().unwrap_or("UTC"),
                    fields.week_starts.as_deref(),
                )?)
            }
        };
        let window_s = match calendar {
            Some(calendar) => calendar.period().nominal_seconds(),
            None => fields.window_s.unwrap_or(0),
        };
        let mut policy = Policy::new(fields.algorithm, fields.limit, window_s, fields.burst)?;
        policy.calendar = calendar;
        if let Some(count_refused) = fields.count_refused {
            if policy.algorithm != Algorithm::FixedWindow {
                return Err(PolicyError::CountRefusedNotAllowed {
                    algorithm: policy.algorithm,
                });
            }
            if count_refused && calendar.is_some() {
                return Err(PolicyError::CalendarNotAllowed(
                    "count_refused does not apply to a calendar window: a calendar quota counts \
                     only the units it allows"
                        .to_owned(),
                ));
            }
            policy.count_refused = count_refused;
        }
        Ok(policy)
    }

    /// The fields of the policy's document form.
    pub(crate) fn document_fields(&self) -> DocumentFields {
        let calendar = self.calendar;
        DocumentFields {
            algorithm: self.algorithm,
            limit: self.limit,
            window_s: calendar.is_none().then_some(self.window_s),
            window: calendar.map(|calendar| calendar.period()),
            time_zone: calendar.map(|calendar| calendar.time_zone().to_owned()),
            week_starts: calendar
                .filter(|calendar| {
                    calendar.period() == CalendarPeriod::Week && calendar.week_starts() != "monday"
                })
                .map(|calendar| calendar.week_starts().to_owned()),
            burst: self.burst(),
            count_refused: self.count_refused.then_some(true),
        }
    }
}
