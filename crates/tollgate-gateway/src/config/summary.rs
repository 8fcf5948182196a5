//! What a configuration puts in force, in words: the report of `tollgate
//! check-config` (as `nginx -t`). It names settings and counts keys, never
//! shows a key, a token or a URL's credentials.

use std::fmt::Write;

use tollgate_core::{Algorithm, PlanPolicies, Policy};
use tollgate_tower::Budget;

use super::listeners::worker_count;
use super::{RouteKey, ServeConfig};

impl ServeConfig {
    /// One line per thing the configuration puts in force: listeners,
    /// workers, store, plans, tenants, host budgets, routes, shadow mode, the
    /// rate-limit headers (when not all), the access log and the decision
    /// endpoint.
    pub fn summary(&self) -> Vec<String> {
        let mut lines = vec![
            format!(
                "listen {} (admin API on {}), worker threads: {}{}",
                self.listen,
                self.admin.listen,
                worker_count(self.workers),
                if self.workers.is_none() {
                    " (one per CPU)"
                } else {
                    ""
                }
            ),
            match self.store.server() {
                None => "limits in memory, in this process".to_owned(),
                Some(server) => format!(
                    "limits in Redis at {server} under the prefix {}, calls time out after {}, \
                     then {}; in-flight slots leased for {}",
                    self.store.prefix,
                    humantime::format_duration(self.store.timeout),
                    self.store.failure.label(),
                    humantime::format_duration(self.store.lease_ttl)
                ),
            },
            format!(
                "default policy: {}",
                describe_plan(&self.limits.default_plan())
            ),
        ];
        for tier in self.limits.tiers.keys() {
            if let Some(plan) = self.limits.plan(tier) {
                lines.push(format!("tier {tier}: {}", describe_plan(&plan)));
            }
        }
        for (plan, defaults) in &self.limits.tier_defaults {
            if defaults.delay.is_zero() && defaults.max_in_flight.is_none() {
                continue;
            }
            let mut line = format!("keys of plan {plan}, on routes without their own:");
            if !defaults.delay.is_zero() {
                let _ = write!(
                    line,
                    " a request over its limits waits up to {} for its turn;",
                    humantime::format_duration(defaults.delay)
                );
            }
            if let Some(max) = defaults.max_in_flight {
                let _ = write!(line, " at most {max} in flight per API key;");
            }
            lines.push(line.trim_end_matches([';', ':']).to_owned());
        }
        lines.push(format!(
            "exempt keys: {}; tenants: {}, with {} keys",
            self.limits.exempt_keys.len(),
            self.tenants.len(),
            self.tenants.values().map(Vec::len).sum::<usize>()
        ));
        for (kind, budget) in [("tenant", self.host.tenant), ("client IP", self.host.ip)] {
            if let Some(budget) = budget {
                lines.push(format!(
                    "routes without a budget of their own: {} per {kind}",
                    describe_budget(&budget)
                ));
            }
        }
        if let Some(max) = self.host.max_in_flight {
            lines.push(format!(
                "routes without a concurrency limit of their own (nor their key's tier's): at \
                 most {max} in flight per API key (per client IP without one)"
            ));
        }
        if self.routes.is_empty() {
            lines.push("no routes: the demo backend answers every admitted request".to_owned());
        }
        for route in &self.routes {
            let urls = route.upstream_urls();
            let servers: Vec<String> = urls.iter().map(ToString::to_string).collect();
            let mut line = format!(
                "route {}: {} -> {}",
                route.name(),
                route.prefix,
                servers.join(", ")
            );
            if urls.len() > 1 {
                let _ = write!(
                    line,
                    " (in turn; a server that refuses a connection is skipped for {})",
                    humantime::format_duration(self.upstream.backoff)
                );
            }
            if route.strip_prefix {
                line.push_str(" (prefix stripped)");
            }
            if route.preflight == super::Preflight::Pass {
                line.push_str(" (CORS preflights pass)");
            }
            if let Some(status) = route.refused_status {
                let _ = write!(line, " (refusals answered {status})");
            }
            if route.shadow {
                line.push_str(" (its budget in shadow mode)");
            }
            if let Ok(Some(budget)) = route.budget() {
                let key = match &route.route_key() {
                    RouteKey::Principal => "API key".to_owned(),
                    RouteKey::Tenant => "tenant".to_owned(),
                    RouteKey::Ip => "client IP".to_owned(),
                    RouteKey::Header(name) => format!("{name} header"),
                };
                let _ = write!(line, ", {} per {key}", describe_budget(&budget));
            }
            match route.api_key {
                tollgate_core::ApiKeyRequirement::Required => {}
                tollgate_core::ApiKeyRequirement::Optional => {
                    line.push_str(" (an API key optional: without one, its keyless budget alone)");
                }
                tollgate_core::ApiKeyRequirement::None => {
                    line.push_str(" (API keys not read: its keyless budget alone)");
                }
            }
            if let Some(max) = route.max_in_flight {
                let per = match &route.in_flight_key() {
                    RouteKey::Principal => "API key".to_owned(),
                    RouteKey::Tenant => "tenant".to_owned(),
                    RouteKey::Ip => "client IP".to_owned(),
                    RouteKey::Header(name) => format!("{name} header"),
                };
                let _ = write!(line, " (at most {max} in flight per {per})");
            }
            if route.cost != 1 {
                let _ = write!(line, " (each request costs {} units)", route.cost);
            }
            if let Some(delay) = route.waiting() {
                let _ = write!(
                    line,
                    " (a request over its limits waits up to {} for its turn, at most {} \
                     per key at once)",
                    humantime::format_duration(delay.max_wait),
                    delay.max_waiting
                );
            }
            lines.push(line);
        }
        if self.refusal.status.is_some() || !self.refusal.tiers.is_empty() {
            let mut line = format!("refusals answered {}", self.refusal.default_status());
            for (tier, status) in &self.refusal.tiers {
                let _ = write!(line, ", {status} for tier {tier}");
            }
            lines.push(line);
        }
        if let Some(path) = &self.keys.known {
            lines.push(format!(
                "known keys from {}; an unknown key {}",
                path.display(),
                match self.keys.unknown {
                    tollgate_core::UnknownKeys::Allow => "is limited like any key",
                    tollgate_core::UnknownKeys::Refuse => "is refused (401)",
                    tollgate_core::UnknownKeys::Anonymous => "is limited as a keyless request",
                }
            ));
        }
        lines.extend(self.shadow_summary());
        let header_set = self.responses.rate_limit_headers;
        if header_set != super::RateLimitHeaderSet::All {
            lines.push(format!(
                "rate-limit headers: {} ([responses] rate_limit_headers)",
                header_set.as_str()
            ));
        }
        if self.access_log.enabled {
            lines.push(format!(
                "access log: {} lines to {}",
                match self.access_log.format {
                    super::AccessLogFormat::Json => "JSON",
                    super::AccessLogFormat::Text => "text",
                },
                self.access_log.path.as_ref().map_or_else(
                    || "standard output".to_owned(),
                    |path| path.display().to_string()
                )
            ));
        }
        if let Some(path) = &self.forward_auth.path {
            lines.push(format!(
                "decisions for nginx auth_request / Caddy forward_auth at {path}, refusals \
                 answered {}",
                self.forward_auth.refused_status
            ));
        }
        lines.extend(self.tls_summary());
        lines
    }
}

impl ServeConfig {
    /// The line saying which limits are in shadow mode, if any are.
    fn shadow_summary(&self) -> Option<String> {
        let refusal = &self.refusal;
        let shadow_routes = self.routes.iter().filter(|route| route.shadow).count();
        let which = if refusal.shadow {
            "every limit".to_owned()
        } else if refusal.shadow_tiers.is_empty() {
            if shadow_routes == 0 {
                return None;
            }
            "the routes' budgets marked".to_owned()
        } else {
            let tiers: Vec<&str> = refusal.shadow_tiers.iter().map(String::as_str).collect();
            format!("the plans of tiers {}", tiers.join(", "))
        };
        let headers = if refusal.shadow_headers
            && self.responses.rate_limit_headers != super::RateLimitHeaderSet::None
        {
            "sent"
        } else {
            "not sent"
        };
        Some(format!(
            "shadow mode for {which}: their refusals counted, the requests let through, their \
             rate-limit headers {headers}"
        ))
    }
}

/// A plan: its one policy, or each named policy of its list, all held at
/// once (`second: fixed_window 2 per 1 s and minute: ...`).
/// A plan in words, as `check-config` says it: `fixed_window 5 per 60 s`,
/// or each named policy of a list.
pub fn describe_plan(plan: &PlanPolicies) -> String {
    let described: Vec<String> = plan
        .policies()
        .map(|(name, policy)| match name {
            Some(name) => format!("{name}: {}", describe_policy(&policy)),
            None => describe_policy(&policy),
        })
        .collect();
    described.join(" and ")
}

/// `fixed_window 5 per 60 s`, `token_bucket 60 per 60 s, burst 5`,
/// `fixed_window 10000 per month (Europe/Berlin)`.
fn describe_policy(policy: &Policy) -> String {
    if let Some(calendar) = policy.calendar_window() {
        return format!(
            "{} {} per {}",
            policy.algorithm(),
            policy.limit(),
            describe_calendar(calendar)
        );
    }
    let mut text = format!(
        "{} {} per {} s",
        policy.algorithm(),
        policy.limit(),
        policy.window_s()
    );
    if policy.algorithm() == Algorithm::TokenBucket {
        let _ = write!(text, ", burst {}", policy.capacity());
    }
    if policy.counts_refused() {
        text.push_str(", refused hits counted");
    }
    text
}

/// `60 a minute, burst 5`, `10000 a month (Europe/Berlin)`.
fn describe_budget(budget: &Budget) -> String {
    match (budget.rpm(), budget.calendar_window()) {
        (_, Some(calendar)) => format!("{} a {}", budget.burst(), describe_calendar(calendar)),
        (rpm, None) => format!("{} a minute, burst {}", rpm.unwrap_or(0), budget.burst()),
    }
}

/// `month (Europe/Berlin)`, `week from sunday (UTC)`.
fn describe_calendar(calendar: tollgate_core::Calendar) -> String {
    let mut text = calendar.period().name().to_owned();
    if calendar.period() == tollgate_core::CalendarPeriod::Week {
        let _ = write!(text, " from {}", calendar.week_starts());
    }
    let _ = write!(text, " ({})", calendar.time_zone());
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_what_is_in_force_and_no_secret() {
        let config = ServeConfig::from_toml_str(
            "listen = \"127.0.0.1:9000\"\nworkers = 2\n\
             [admin]\nlisten = \"127.0.0.1:9001\"\ntoken = \"s3cret\"\n\
             [store]\nurl = \"redis://user:pw@127.0.0.1:6379\"\n\
             [limits]\nexempt_keys = [\"sk_internal\"]\n\
             [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
             [limits.tiers.pro]\nalgorithm = \"token_bucket\"\nlimit = 60\nwindow_s = 60\nburst = 5\n\
             [tenants]\nacme = [\"sk_a\", \"sk_b\"]\n\
             [host]\nip = { rpm = 30 }\n\
             [[routes]]\nname = \"orders\"\nprefix = \"/orders\"\nupstream = \"http://127.0.0.1:7000\"\n\
             rpm = 60\nburst = 5\nkey = \"tenant\"\npreflight = \"pass\"\nrefused_status = 403\n\
             delay = \"2s\"\nmax_waiting = 10\n\
             [[routes]]\nname = \"chat\"\nprefix = \"/chat\"\n\
             upstreams = [\"http://10.0.0.1:7000\", \"http://10.0.0.2:7000\"]\n\
             [upstream]\nbackoff = \"5s\"\n\
             [refusal]\nstatus = 503\ntiers = { pro = 429 }\n\
             [forward_auth]\npath = \"/_tollgate/decide\"\nrefused_status = 403\n",
        )
        .unwrap();
        assert_eq!(
            config.summary(),
            [
                "listen 127.0.0.1:9000 (admin API on 127.0.0.1:9001), worker threads: 2",
                "limits in Redis at redis://127.0.0.1:6379 under the prefix tollgate, calls time out \
                 after 50ms, then fail_open; in-flight slots leased for 30s",
                "default policy: fixed_window 5 per 60 s",
                "tier pro: token_bucket 60 per 60 s, burst 5",
                "exempt keys: 1; tenants: 1, with 2 keys",
                "routes without a budget of their own: 30 a minute, burst 30 per client IP",
                "route orders: /orders -> http://127.0.0.1:7000/ (CORS preflights pass) \
                 (refusals answered 403), 60 a minute, burst 5 per tenant (a request over its \
                 limits waits up to 2s for its turn, at most 10 per key at once)",
                "route chat: /chat -> http://10.0.0.1:7000/, http://10.0.0.2:7000/ (in turn; \
                 a server that refuses a connection is skipped for 5s)",
                "refusals answered 503, 429 for tier pro",
                "decisions for nginx auth_request / Caddy forward_auth at /_tollgate/decide, \
                 refusals answered 403",
            ]
        );
    }

    fn summary(toml: &str) -> Vec<String> {
        ServeConfig::from_toml_str(toml).unwrap().summary()
    }

    #[test]
    fn shadow_mode_and_the_access_log_are_shown_in_force() {
        let route = "[[routes]]\nname = \"r\"\nprefix = \"/\"\nupstream = \"http://h:1\"\n\
                     rpm = 6\nshadow = true\n";
        let lines = summary(&format!(
            "[limits.tiers.trial]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
             [refusal]\nshadow_tiers = [\"trial\", \"default\"]\n\
             [access_log]\nenabled = true\npath = \"/var/log/tollgate.log\"\nformat = \"text\"\n\
             {route}"
        ));
        assert!(
            lines.contains(
                &"route r: / -> http://h:1/ (its budget in shadow mode), 6 a minute, burst 6 \
                  per API key"
                    .to_owned()
            ),
            "{lines:?}"
        );
        assert_eq!(
            &lines[lines.len() - 2..],
            [
                "shadow mode for the plans of tiers default, trial: their refusals counted, the \
                 requests let through, their rate-limit headers not sent",
                "access log: text lines to /var/log/tollgate.log",
            ]
        );
        let every = summary("[refusal]\nshadow = true\nshadow_headers = true\n");
        assert_eq!(
            every.last().map(String::as_str),
            Some(
                "shadow mode for every limit: their refusals counted, the requests let through, \
                 their rate-limit headers sent"
            )
        );
        let routes_only = summary(route);
        assert_eq!(
            routes_only.last().map(String::as_str),
            Some(
                "shadow mode for the routes' budgets marked: their refusals counted, the requests \
                 let through, their rate-limit headers not sent"
            )
        );
        assert!(
            !summary("")
                .iter()
                .any(|line| line.contains("shadow") || line.contains("access log"))
        );
    }

    #[test]
    fn a_header_set_other_than_all_is_said() {
        assert!(
            !summary("[responses]\nrate_limit_headers = \"all\"\n")
                .iter()
                .any(|line| line.contains("rate-limit headers"))
        );
        let ietf = summary("[responses]\nrate_limit_headers = \"ietf\"\n");
        assert!(
            ietf.iter()
                .any(|line| line == "rate-limit headers: ietf ([responses] rate_limit_headers)"),
            "{ietf:?}"
        );
        // Shadow limits' headers are not sent when no header is.
        let none = summary(
            "[refusal]\nshadow = true\nshadow_headers = true\n\
             [responses]\nrate_limit_headers = \"none\"\n",
        );
        assert!(
            none.iter().any(|line| line
                == "shadow mode for every limit: their refusals counted, the requests let \
                    through, their rate-limit headers not sent"),
            "{none:?}"
        );
    }

    #[test]
    fn a_plan_of_several_policies_is_shown_whole() {
        let config = ServeConfig::from_toml_str(
            "listen = \"127.0.0.1:9000\"\nworkers = 2\n\
             [admin]\nlisten = \"127.0.0.1:9001\"\ntoken = \"s3cret\"\n\
             [[limits.tiers.team]]\nname = \"second\"\nalgorithm = \"fixed_window\"\nlimit = 10\nwindow_s = 1\n\
             [[limits.tiers.team]]\nname = \"day\"\nalgorithm = \"token_bucket\"\nlimit = 10000\nwindow_s = 86400\nburst = 100\n",
        )
        .unwrap();
        let summary = config.summary();
        assert_eq!(
            summary[3],
            "tier team: second: fixed_window 10 per 1 s and day: token_bucket 10000 per 86400 s, \
             burst 100"
        );
    }

    #[test]
    fn tier_defaults_are_shown_only_when_they_set_something() {
        let lines = summary(
            "[limits.tiers.pro]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
             [limits.tier_defaults.pro]\ndelay = \"0s\"\n\
             [limits.tier_defaults.default]\ndelay = \"2s\"\nmax_in_flight = 3\n",
        );
        let defaults: Vec<&String> = lines
            .iter()
            .filter(|line| line.starts_with("keys of plan"))
            .collect();
        assert_eq!(
            defaults,
            [
                "keys of plan default, on routes without their own: a request over its limits \
                 waits up to 2s for its turn; at most 3 in flight per API key"
            ]
        );
    }
}
