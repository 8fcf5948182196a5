//! Stats as envoyproxy/ratelimit names them (src/stats/manager_impl.go): the
//! scope `ratelimit.service.rate_limit`, a descriptor's counters under its
//! sanitised stats key, and a sink the lookup counts `domain_not_found` into.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// The scope of every descriptor and domain counter.
pub const RATE_LIMIT_SCOPE: &str = "ratelimit.service.rate_limit";

/// Where counters go. Names are full statsd names
/// (`ratelimit.service.rate_limit.foo.domain_not_found`).
pub trait StatsSink: Send + Sync {
    /// Adds `by` to the counter `name`.
    fn add(&self, name: &str, by: u64);
}

/// A sink that counts nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoStats;

impl StatsSink for NoStats {
    fn add(&self, _name: &str, _by: u64) {}
}

/// Counters kept in memory, by full name (for tests and an admin view).
#[derive(Debug, Default)]
pub struct MemoryStats {
    counters: Mutex<BTreeMap<String, u64>>,
}

impl MemoryStats {
    /// An empty set of counters.
    pub fn new() -> MemoryStats {
        MemoryStats::default()
    }

    /// The counter `name` (0 when never counted).
    pub fn get(&self, name: &str) -> u64 {
        self.counters.lock().get(name).copied().unwrap_or(0)
    }

    /// Every counter counted so far, by name.
    pub fn snapshot(&self) -> BTreeMap<String, u64> {
        self.counters.lock().clone()
    }
}

impl StatsSink for MemoryStats {
    fn add(&self, name: &str, by: u64) {
        let mut counters = self.counters.lock();
        let counter = counters.entry(name.to_owned()).or_insert(0);
        *counter = counter.saturating_add(by);
    }
}

/// A stat name made safe for statsd, as envoyproxy/ratelimit's
/// `utils.SanitizeStatName` does: `:` and `|` become `_`, and so do the dots of
/// anything shaped like an IPv4 address (`\d{1,3}(\.\d{1,3}){3}`).
pub fn sanitize_stat_name(name: &str) -> String {
    let replaced: String = name
        .chars()
        .map(|c| if c == ':' || c == '|' { '_' } else { c })
        .collect();
    let bytes = replaced.as_bytes();
    let mut out = String::with_capacity(replaced.len());
    let mut copied = 0;
    let mut at = 0;
    while at < bytes.len() {
        match ipv4_match_len(&bytes[at..]) {
            Some(len) => {
                out.push_str(&replaced[copied..at]);
                out.push_str(&replaced[at..at + len].replace('.', "_"));
                at += len;
                copied = at;
            }
            None => at += 1,
        }
    }
    out.push_str(&replaced[copied..]);
    out
}

/// The length of the IPv4-shaped text at the start of `bytes`, leftmost-first
/// greedy as Go's regexp matches `\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}`.
fn ipv4_match_len(bytes: &[u8]) -> Option<usize> {
    let mut at = 0;
    for group in 0..4 {
        let run = bytes[at..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if run == 0 {
            return None;
        }
        if group == 3 {
            return Some(at + run.min(3));
        }
        // The dot must follow the digits directly: a longer run cannot match.
        if run > 3 || bytes.get(at + run) != Some(&b'.') {
            return None;
        }
        at += run + 1;
    }
    None
}

/// The counter a lookup in an unknown domain moves:
/// `ratelimit.service.rate_limit.<domain>.domain_not_found`.
pub fn domain_not_found_stat(domain: &str) -> String {
    format!(
        "{RATE_LIMIT_SCOPE}.{}.domain_not_found",
        sanitize_stat_name(domain)
    )
}

/// The six counters of one stats key (envoyproxy/ratelimit's
/// `RateLimitStats`), full names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LimitStatNames {
    /// `<key>.total_hits`.
    pub total_hits: String,
    /// `<key>.over_limit`.
    pub over_limit: String,
    /// `<key>.near_limit`.
    pub near_limit: String,
    /// `<key>.over_limit_with_local_cache`.
    pub over_limit_with_local_cache: String,
    /// `<key>.within_limit`.
    pub within_limit: String,
    /// `<key>.shadow_mode`.
    pub shadow_mode: String,
}

impl LimitStatNames {
    /// The counters of `stats_key` (a limit's unsanitised key), under
    /// [`RATE_LIMIT_SCOPE`].
    pub fn for_key(stats_key: &str) -> LimitStatNames {
        let base = format!("{RATE_LIMIT_SCOPE}.{}", sanitize_stat_name(stats_key));
        LimitStatNames {
            total_hits: format!("{base}.total_hits"),
            over_limit: format!("{base}.over_limit"),
            near_limit: format!("{base}.near_limit"),
            over_limit_with_local_cache: format!("{base}.over_limit_with_local_cache"),
            within_limit: format!("{base}.within_limit"),
            shadow_mode: format!("{base}.shadow_mode"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_as_the_go_service() {
        assert_eq!(sanitize_stat_name("a:b|c.d"), "a_b_c.d");
        assert_eq!(
            sanitize_stat_name("d.remote_address_10.0.0.1.x"),
            "d.remote_address_10_0_0_1.x"
        );
        assert_eq!(sanitize_stat_name("1234.5.6.7"), "1234_5_6_7");
        assert_eq!(sanitize_stat_name("1.2.3.4567"), "1_2_3_4567");
        assert_eq!(sanitize_stat_name("1.2.3"), "1.2.3");
        assert_eq!(sanitize_stat_name("ü:1.2.3.4"), "ü_1_2_3_4");
    }
}
