//! The loaded configuration: domains, each a tree of descriptors keyed by
//! `key_value` (or `key` alone, the default for any value), built and checked as
//! envoyproxy/ratelimit's `loadConfig` and `loadDescriptors` (config_impl.go) do.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;
use tollgate_core::{Algorithm, Calendar, CalendarPeriod, Policy};

use crate::config::document::{YamlDescriptor, YamlRateLimit};
use crate::config::error::{ConfigError, ConfigErrorKind};
use crate::config::loader::{LoaderOptions, ParsedFile};
use crate::config::metadata::{Metadata, metadata_from_fields};
use crate::config::rate_limit::{Enforcement, RateLimit, enforcement};
use crate::config::stats::LimitStatNames;
use crate::config::unit::Unit;
use crate::config::wildcard::WildcardEntry;

/// A loaded rate limit configuration: what `GetLimit` looks descriptors up in.
/// Immutable; a reload builds a new one.
pub struct RateLimitConfig {
    pub(crate) domains: HashMap<String, DescriptorNode, RandomState>,
}

/// One level of a domain's descriptor tree (a domain's root has no limit).
#[derive(Default)]
pub(crate) struct DescriptorNode {
    /// The next level, by `key_value` or `key`.
    /// (foldhash: a lookup per descriptor entry; the table is the
    /// operator's, so a request cannot grow it.)
    pub(crate) children: HashMap<String, DescriptorNode, RandomState>,
    /// The limit at this descriptor.
    pub(crate) limit: Option<Arc<RateLimit>>,
    /// The children whose key has a `*`, in file order (first match wins).
    pub(crate) wildcards: Vec<WildcardEntry>,
    /// `value_to_metric`.
    pub(crate) value_to_metric: bool,
    /// `share_threshold`.
    pub(crate) share_threshold: bool,
    /// With `share_threshold`, this descriptor's `key_value` pattern.
    pub(crate) wildcard_pattern: String,
    /// `metadata`.
    pub(crate) metadata: Option<Arc<Metadata>>,
}

impl RateLimitConfig {
    /// Loads files already read with [`ParsedFile::parse`], in order, into one
    /// configuration.
    ///
    /// # Errors
    ///
    /// The first rule broken, naming its file: an empty or duplicate domain
    /// (duplicates are merged with [`LoaderOptions::merge_domains`]), an empty
    /// or duplicate descriptor key, an invalid or misplaced unit, a bad
    /// `replaces`, `share_threshold` without `*`, or an invalid extension.
    pub fn load(
        files: &[ParsedFile],
        options: &LoaderOptions,
    ) -> Result<RateLimitConfig, ConfigError> {
        let mut config = RateLimitConfig {
            domains: HashMap::default(),
        };
        for file in files {
            config
                .load_file(file, options)
                .map_err(|kind| ConfigError {
                    file: file.name.clone(),
                    kind,
                })?;
        }
        Ok(config)
    }

    /// Reads and loads `(name, content)` files as the Go service does: every
    /// file is parsed and its keys checked first, then all are loaded in order.
    ///
    /// # Errors
    ///
    /// The errors of [`ParsedFile::parse`], then those of [`RateLimitConfig::load`].
    pub fn from_sources<N: AsRef<str>, C: AsRef<str>>(
        files: &[(N, C)],
        options: &LoaderOptions,
    ) -> Result<RateLimitConfig, ConfigError> {
        let parsed = files
            .iter()
            .map(|(name, content)| ParsedFile::parse(name.as_ref(), content.as_ref(), options))
            .collect::<Result<Vec<_>, _>>()?;
        RateLimitConfig::load(&parsed, options)
    }

    /// Whether no domain is configured (the Go service's `IsEmptyDomains`).
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The configured domains, in no particular order.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.keys().map(String::as_str)
    }

    fn load_file(
        &mut self,
        file: &ParsedFile,
        options: &LoaderOptions,
    ) -> Result<(), ConfigErrorKind> {
        let domain = &file.root.domain;
        if domain.is_empty() {
            return Err(ConfigErrorKind::EmptyDomain);
        }
        let parent_key = format!("{domain}.");
        if let Some(existing) = self.domains.get_mut(domain) {
            if !options.merge_domains {
                return Err(ConfigErrorKind::DuplicateDomain(domain.clone()));
            }
            return existing.load_descriptors(&parent_key, &file.root.descriptors);
        }
        let mut root = DescriptorNode::default();
        root.load_descriptors(&parent_key, &file.root.descriptors)?;
        self.domains.insert(domain.clone(), root);
        Ok(())
    }
}

impl DescriptorNode {
    fn load_descriptors(
        &mut self,
        parent_key: &str,
        descriptors: &[YamlDescriptor],
    ) -> Result<(), ConfigErrorKind> {
        for descriptor in descriptors {
            if descriptor.key.is_empty() {
                return Err(ConfigErrorKind::EmptyKey);
            }
            let mut final_key = descriptor.key.clone();
            if !descriptor.value.is_empty() {
                final_key.push('_');
                final_key.push_str(&descriptor.value);
            }
            let full_key = format!("{parent_key}{final_key}");
            if self.children.contains_key(&final_key) {
                return Err(ConfigErrorKind::DuplicateDescriptor(full_key));
            }
            let limit = match &descriptor.rate_limit {
                Some(rate_limit) => Some(Arc::new(build_limit(&full_key, descriptor, rate_limit)?)),
                None => None,
            };
            let wildcard = final_key.contains('*');
            if descriptor.share_threshold && !wildcard {
                return Err(ConfigErrorKind::ShareThresholdWithoutWildcard(final_key));
            }
            if wildcard {
                self.wildcards.push(WildcardEntry::new(&final_key));
            }
            let mut child = DescriptorNode {
                children: HashMap::default(),
                limit,
                wildcards: Vec::new(),
                value_to_metric: descriptor.value_to_metric,
                share_threshold: descriptor.share_threshold,
                wildcard_pattern: if descriptor.share_threshold {
                    final_key.clone()
                } else {
                    String::new()
                },
                metadata: metadata_from_fields(descriptor.metadata.as_deref()).map(Arc::new),
            };
            child.load_descriptors(&format!("{full_key}."), &descriptor.descriptors)?;
            self.children.insert(final_key, child);
        }
        Ok(())
    }
}

/// A descriptor's limit, checked in the Go service's order (unit, then
/// `replaces`), then tollgate's extensions.
fn build_limit(
    full_key: &str,
    descriptor: &YamlDescriptor,
    rate_limit: &YamlRateLimit,
) -> Result<RateLimit, ConfigErrorKind> {
    let unlimited = rate_limit.unlimited;
    let has_calendar = !rate_limit.calendar.is_empty();
    if has_calendar && !unlimited {
        check_replaces(rate_limit)?;
        return build_calendar_limit(full_key, descriptor, rate_limit);
    }
    if !rate_limit.time_zone.is_empty() || !rate_limit.week_starts.is_empty() {
        return Err(ConfigErrorKind::InvalidCalendar(
            "time_zone and week_starts belong to a calendar (calendar: day, week, month or year)"
                .to_owned(),
        ));
    }
    let has_window = !rate_limit.window.is_empty();
    let unit = Unit::from_config(&rate_limit.unit).unwrap_or(Unit::Unknown);
    let valid_unit = unit != Unit::Unknown;
    if unlimited {
        if valid_unit {
            return Err(ConfigErrorKind::UnlimitedWithUnit);
        }
    } else if has_window && !rate_limit.unit.is_empty() {
        return Err(if valid_unit {
            ConfigErrorKind::UnitAndWindow
        } else {
            ConfigErrorKind::InvalidUnit(rate_limit.unit.clone())
        });
    } else if !valid_unit && !has_window {
        return Err(ConfigErrorKind::InvalidUnit(rate_limit.unit.clone()));
    }
    check_replaces(rate_limit)?;
    let algorithm = parse_algorithm(&rate_limit.algorithm)?;
    let (unit, enforcement) = if unlimited {
        for (given, what) in [
            (has_calendar, "calendar"),
            (has_window, "window"),
            (!rate_limit.algorithm.is_empty(), "algorithm"),
            (rate_limit.burst.is_some(), "burst"),
            (rate_limit.overdraft.is_some(), "overdraft"),
        ] {
            if given {
                return Err(ConfigErrorKind::UnlimitedWithExtension(what));
            }
        }
        (unit, Enforcement::Unlimited)
    } else {
        let window_s = if has_window {
            parse_window(&rate_limit.window)?
        } else {
            unit.seconds().unwrap_or(1)
        };
        let unit = Unit::of_length(window_s).unwrap_or(Unit::Unknown);
        // `requests_per_unit` was decoded as a Go uint32.
        let requests_per_unit = u32::try_from(rate_limit.requests_per_unit).unwrap_or(u32::MAX);
        let enforcement = enforcement(requests_per_unit, window_s, algorithm, rate_limit.burst)
            .map_err(ConfigErrorKind::Policy)?;
        (unit, enforcement)
    };
    configured(full_key, descriptor, rate_limit, unit, enforcement)
}

/// The limit `rate_limit` of `descriptor` configures at `full_key`, with
/// its unit and enforcement.
///
/// # Errors
///
/// [`ConfigErrorKind::InvalidOverdraft`] for a bad `overdraft`.
fn configured(
    full_key: &str,
    descriptor: &YamlDescriptor,
    rate_limit: &YamlRateLimit,
    unit: Unit,
    enforcement: Enforcement,
) -> Result<RateLimit, ConfigErrorKind> {
    if let Some(overdraft) = rate_limit.overdraft {
        check_overdraft(overdraft, &enforcement)?;
    }
    Ok(RateLimit {
        requests_per_unit: u32::try_from(rate_limit.requests_per_unit).unwrap_or(u32::MAX),
        unit,
        unlimited: rate_limit.unlimited,
        shadow_mode: descriptor.shadow_mode,
        quota_mode: descriptor.quota_mode,
        name: rate_limit.name.clone(),
        replaces: rate_limit.replaces.clone(),
        detailed_metric: descriptor.detailed_metric,
        enforcement,
        stat_names: Arc::new(LimitStatNames::for_key(full_key)),
        stats_key: Arc::from(full_key),
        overdraft: rate_limit.overdraft,
    })
}

/// Extension: an `overdraft` of 1 to 2^53 units (as a gateway route's
/// `charge.max`) on a limit of at least 1, which the Redis store charges
/// exactly ([`tollgate_redis::overdraw_is_exact`]: the same limits load
/// whatever the store).
fn check_overdraft(overdraft: u64, enforcement: &Enforcement) -> Result<(), ConfigErrorKind> {
    let invalid = |reason: String| Err(ConfigErrorKind::InvalidOverdraft(reason));
    if !(1..=tollgate_core::MAX_CHARGE).contains(&overdraft) {
        return invalid(format!(
            "{overdraft} is not 1 to {}",
            tollgate_core::MAX_CHARGE
        ));
    }
    match enforcement {
        Enforcement::Policy(policy) if tollgate_redis::overdraw_is_exact(policy, overdraft) => {
            Ok(())
        }
        Enforcement::Policy(_) => invalid(format!(
            "an overdraft of {overdraft} on this limit passes 2^52, which the Redis store \
             computes exactly (limit + overdraft; for a token bucket (burst + overdraft) x \
             window in microseconds)"
        )),
        _ => invalid("a limit of 0 has nothing to overdraw".to_owned()),
    }
}

/// The Go service's checks of `replaces`: no empty name, not its own.
fn check_replaces(rate_limit: &YamlRateLimit) -> Result<(), ConfigErrorKind> {
    for replaces in &rate_limit.replaces {
        if replaces.is_empty() {
            return Err(ConfigErrorKind::EmptyReplaces);
        }
        if *replaces == rate_limit.name {
            return Err(ConfigErrorKind::ReplacesSelf);
        }
    }
    Ok(())
}

/// Extension: a limit of `requests_per_unit` per calendar period
/// (`calendar: month`, `time_zone: Europe/Berlin`), instead of `unit` or
/// `window`: core's calendar window, a fixed window between local
/// midnights, counting only the hits it allows. Reported with the unit of
/// its period (`DAY`, `WEEK`, `MONTH`, `YEAR`).
fn build_calendar_limit(
    full_key: &str,
    descriptor: &YamlDescriptor,
    rate_limit: &YamlRateLimit,
) -> Result<RateLimit, ConfigErrorKind> {
    let invalid = |text: String| ConfigErrorKind::InvalidCalendar(text);
    let (period, unit) = match rate_limit.calendar.as_str() {
        "day" => (CalendarPeriod::Day, Unit::Day),
        "week" => (CalendarPeriod::Week, Unit::Week),
        "month" => (CalendarPeriod::Month, Unit::Month),
        "year" => (CalendarPeriod::Year, Unit::Year),
        other => {
            return Err(invalid(format!(
                "'{other}' is not day, week, month or year"
            )));
        }
    };
    for (given, what) in [
        (!rate_limit.unit.is_empty(), "unit"),
        (!rate_limit.window.is_empty(), "window"),
        (rate_limit.burst.is_some(), "burst"),
    ] {
        if given {
            return Err(invalid(format!("a calendar takes no {what}")));
        }
    }
    if parse_algorithm(&rate_limit.algorithm)? != Algorithm::FixedWindow {
        return Err(invalid(
            "a calendar window is a fixed window (algorithm: fixed_window)".to_owned(),
        ));
    }
    let time_zone = if rate_limit.time_zone.is_empty() {
        "UTC"
    } else {
        rate_limit.time_zone.as_str()
    };
    let week_starts =
        (!rate_limit.week_starts.is_empty()).then_some(rate_limit.week_starts.as_str());
    let calendar = Calendar::new(period, time_zone, week_starts)
        .map_err(|error| invalid(error.to_string()))?;
    let requests_per_unit = u32::try_from(rate_limit.requests_per_unit).unwrap_or(u32::MAX);
    if requests_per_unit == 0 {
        return Err(invalid(
            "a calendar quota needs requests_per_unit of at least 1 (a limit of 0 refuses \
             every hit whatever its window: give it a unit)"
                .to_owned(),
        ));
    }
    let enforcement = Policy::calendar(u64::from(requests_per_unit), calendar)
        .map(Enforcement::Policy)
        .map_err(ConfigErrorKind::Policy)?;
    configured(full_key, descriptor, rate_limit, unit, enforcement)
}

/// Extension: the `algorithm` of a limit (fixed window when absent).
fn parse_algorithm(text: &str) -> Result<Algorithm, ConfigErrorKind> {
    match text {
        "" | "fixed_window" => Ok(Algorithm::FixedWindow),
        "sliding_log" => Ok(Algorithm::SlidingLog),
        "token_bucket" => Ok(Algorithm::TokenBucket),
        _ => Err(ConfigErrorKind::InvalidAlgorithm(text.to_owned())),
    }
}

/// Extension: a `window` in humantime's syntax (`30s`, `5m`, `1h 30m`), a whole
/// number of seconds, at least one.
fn parse_window(text: &str) -> Result<u64, ConfigErrorKind> {
    let invalid = |reason: String| ConfigErrorKind::InvalidWindow {
        window: text.to_owned(),
        reason,
    };
    let window: Duration =
        humantime::parse_duration(text).map_err(|error| invalid(error.to_string()))?;
    if window.subsec_nanos() != 0 {
        return Err(invalid("not a whole number of seconds".to_owned()));
    }
    if window.as_secs() == 0 {
        return Err(invalid("must be at least 1s".to_owned()));
    }
    Ok(window.as_secs())
}

impl fmt::Debug for RateLimitConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitConfig")
            .field("domains", &self.domains.len())
            .finish()
    }
}
