//! The debug listener's `/rlconfig` page: every loaded limit, one line each, as
//! envoyproxy/ratelimit's `Dump` (config_impl.go) prints it:
//! `<stats key>: unit=<UNIT> requests_per_unit=<N>, shadow_mode: <bool>, quota_mode: <bool>`.
//!
//! The Go service walks its maps in Go's random order; tollgate sorts the
//! lines by stats key, so two dumps of one configuration are equal. A limit enforced by an
//! extension (`algorithm`, `window`, `burst`) adds `, algorithm: <name>,
//! window: <seconds>s` (and `, burst: <n>` for a token bucket) after the Go
//! fields, so the Go fields read the same.

use tollgate_core::Algorithm;

use crate::config::rate_limit::{Enforcement, RateLimit};
use crate::config::tree::{DescriptorNode, RateLimitConfig};

impl RateLimitConfig {
    /// Every limit of every domain, a line each (ending in `\n`), sorted by
    /// stats key; an empty string when no descriptor has a limit.
    pub fn dump(&self) -> String {
        let mut lines = Vec::new();
        for root in self.domains.values() {
            collect(root, &mut lines);
        }
        lines.sort_unstable();
        lines.into_iter().map(|(_, line)| line).collect()
    }
}

fn collect<'a>(node: &'a DescriptorNode, lines: &mut Vec<(&'a str, String)>) {
    if let Some(limit) = &node.limit {
        lines.push((&limit.stats_key, line(limit)));
    }
    for child in node.children.values() {
        collect(child, lines);
    }
}

fn line(limit: &RateLimit) -> String {
    let mut line = format!(
        "{}: unit={} requests_per_unit={}, shadow_mode: {}, quota_mode: {}",
        limit.stats_key, limit.unit, limit.requests_per_unit, limit.shadow_mode, limit.quota_mode
    );
    if let Enforcement::Policy(policy) = limit.enforcement
        && let Some(calendar) = policy.calendar_window()
    {
        line.push_str(&format!(
            ", calendar: {}, time_zone: {}",
            calendar.period(),
            calendar.time_zone()
        ));
        if calendar.period() == tollgate_core::CalendarPeriod::Week {
            line.push_str(&format!(", week_starts: {}", calendar.week_starts()));
        }
    } else if let Enforcement::Policy(policy) = limit.enforcement {
        let plain_unit = limit.unit.seconds() == Some(policy.window_s());
        let name = match policy.algorithm() {
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::TokenBucket => "token_bucket",
        };
        if policy.algorithm() != Algorithm::FixedWindow || !plain_unit {
            line.push_str(&format!(
                ", algorithm: {name}, window: {}s",
                policy.window_s()
            ));
            if policy.algorithm() == Algorithm::TokenBucket {
                line.push_str(&format!(", burst: {}", policy.capacity()));
            }
        }
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use crate::RateLimitConfig;

    fn dump(yaml: &str, extensions: bool) -> String {
        let options = crate::LoaderOptions {
            extensions,
            ..crate::LoaderOptions::default()
        };
        RateLimitConfig::from_sources(&[("f.yaml", yaml)], &options)
            .unwrap()
            .dump()
    }

    #[test]
    fn every_limit_is_a_line_as_the_go_service_prints_it() {
        let yaml = "domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /login
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 2}
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 100}
  - key: free
    rate_limit: {unlimited: true}
";
        assert_eq!(
            dump(yaml, false),
            "edge.free: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false\n\
             edge.path_/login: unit=SECOND requests_per_unit=2, shadow_mode: true, quota_mode: false\n\
             edge.path_/login.user: unit=HOUR requests_per_unit=100, shadow_mode: false, quota_mode: false\n\
             edge.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false\n"
        );
    }

    #[test]
    fn an_extension_adds_its_fields_after_the_go_ones() {
        let yaml = "domain: api
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, burst: 5}
  - key: ip
    rate_limit: {window: 30s, requests_per_unit: 7}
";
        assert_eq!(
            dump(yaml, true),
            "api.ip: unit=UNKNOWN requests_per_unit=7, shadow_mode: false, quota_mode: false, algorithm: fixed_window, window: 30s\n\
             api.tenant: unit=MINUTE requests_per_unit=60, shadow_mode: false, quota_mode: false, algorithm: token_bucket, window: 60s, burst: 5\n"
        );
    }

    #[test]
    fn no_limit_no_line() {
        assert_eq!(dump("domain: empty\n", false), "");
    }
}
