//! Sending the service's counters out, as the Go service's stats sinks do:
//! to a statsd over TCP (`USE_STATSD`, gostats' TCP sink: `name:delta|c`
//! lines every `STATS_FLUSH_INTERVAL`), or as a Prometheus page
//! (`USE_PROMETHEUS`), named by the rules of the Go service's default
//! statsd-exporter mapping (src/stats/prom/default_mapper.yaml) for the
//! descriptor counters (`ratelimit_service_rate_limit_total_hits{domain,
//! key1, key2}`), and by the statsd name made valid otherwise.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

/// Where counters are read from: every counter by full statsd name.
pub(crate) type CounterSource = Arc<dyn Fn() -> BTreeMap<String, u64> + Send + Sync>;

/// Sends the growth of every counter to the statsd at `address` every
/// `interval`, reconnecting after a failure (logged once per outage: a
/// warning when statsd was `asked_for`, else at debug level, since the
/// start line already said where the Go service's default sends). Runs
/// until aborted.
pub(crate) fn spawn_statsd(
    address: String,
    interval: Duration,
    counters: CounterSource,
    asked_for: bool,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut sent: BTreeMap<String, u64> = BTreeMap::new();
        let mut connection: Option<TcpStream> = None;
        let mut failing = false;
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let now = counters();
            let mut lines = String::new();
            for (name, value) in &now {
                let delta = value.saturating_sub(sent.get(name).copied().unwrap_or(0));
                if delta > 0 {
                    let _ = writeln!(lines, "{name}:{delta}|c");
                }
            }
            if lines.is_empty() {
                continue;
            }
            if connection.is_none() {
                match tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&address))
                    .await
                {
                    Ok(Ok(stream)) => {
                        connection = Some(stream);
                        failing = false;
                    }
                    Ok(Err(error)) => {
                        if !failing && asked_for {
                            tracing::warn!(%address, %error, "cannot reach statsd; retrying every flush");
                        } else if !failing {
                            tracing::debug!(%address, %error, "cannot reach statsd; retrying every flush");
                        }
                        failing = true;
                        continue;
                    }
                    Err(_) => {
                        failing = true;
                        continue;
                    }
                }
            }
            let Some(stream) = connection.as_mut() else {
                continue;
            };
            let written =
                tokio::time::timeout(Duration::from_secs(5), stream.write_all(lines.as_bytes()))
                    .await;
            match written {
                Ok(Ok(())) => sent = now,
                _ => {
                    if !failing {
                        tracing::warn!(%address, "writing to statsd failed; reconnecting");
                    }
                    failing = true;
                    connection = None;
                }
            }
        }
    })
}

/// The counters as a Prometheus text page.
///
/// Label values are the parts of the stats keys, so a series carries a
/// descriptor's value only where the Go service's stats key does: a
/// configured `key_value`, `detailed_metric`, `value_to_metric`, a request's
/// `limit` override (see docs/RLS.md). Names deeper than two keys keep the
/// first two (the default mapping's `key1`, `key2`), and counters that come
/// to the same series are summed, as the statsd exporter adds them up.
pub fn prometheus_page(counters: &BTreeMap<String, u64>) -> String {
    let mut families: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    for (name, value) in counters {
        let (family, labels) = prometheus_name(name);
        let sample = families
            .entry(family)
            .or_default()
            .entry(labels)
            .or_insert(0);
        *sample = sample.saturating_add(*value);
    }
    let mut page = String::new();
    for (family, samples) in families {
        let _ = writeln!(page, "# HELP {family} {}", help(&family));
        let _ = writeln!(page, "# TYPE {family} counter");
        for (labels, value) in samples {
            let _ = writeln!(page, "{family}{labels} {value}");
        }
    }
    page
}

/// The `# HELP` text of a family: what envoyproxy/ratelimit's stat of that
/// name counts, or, for a name this page does not know, the stat it came from.
fn help(family: &str) -> String {
    let known = match family {
        "ratelimit_service_rate_limit_total_hits" => {
            "Hits asked for, per descriptor (envoyproxy/ratelimit's total_hits)."
        }
        "ratelimit_service_rate_limit_within_limit" => "Hits within the limit, per descriptor.",
        "ratelimit_service_rate_limit_over_limit" => "Hits over the limit, per descriptor.",
        "ratelimit_service_rate_limit_near_limit" => {
            "Hits within the limit but past the near-limit ratio, per descriptor."
        }
        "ratelimit_service_rate_limit_shadow_mode" => {
            "Hits over a limit in shadow mode, allowed, per descriptor."
        }
        "ratelimit_service_rate_limit_over_limit_with_local_cache" => {
            "Hits refused by the local over-limit cache, per descriptor."
        }
        "ratelimit_service_rate_limit_refunded_hits" => {
            "Hits given back because another limit of the request refused it, per descriptor."
        }
        "ratelimit_service_store_failure" => {
            "Decisions the store could not make, by the failure policy applied."
        }
        "ratelimit_service_should_rate_limit_error" => {
            "ShouldRateLimit calls that failed, by error type."
        }
        "ratelimit_service_config_load_success" => "Configurations loaded.",
        "ratelimit_service_config_load_error" => {
            "Configurations that failed to load (the previous one stays)."
        }
        "ratelimit_service_global_shadow_mode" => "Requests allowed by the global shadow mode.",
        _ => return format!("The stat {family} (dots as underscores); see docs/RLS.md."),
    };
    known.to_owned()
}

const DESCRIPTOR_COUNTERS: [&str; 7] = [
    "near_limit",
    "over_limit",
    "total_hits",
    "within_limit",
    "shadow_mode",
    "over_limit_with_local_cache",
    "refunded_hits",
];

/// A statsd name as a Prometheus name and label set.
fn prometheus_name(name: &str) -> (String, String) {
    if let Some(rest) = name.strip_prefix("ratelimit.service.rate_limit.") {
        let parts: Vec<&str> = rest.split('.').collect();
        if let Some((counter, path)) = parts.split_last()
            && DESCRIPTOR_COUNTERS.contains(counter)
            && path.len() >= 2
        {
            let mut labels = format!("{{domain=\"{}\"", escape_label(path[0]));
            for (index, key) in path[1..].iter().take(2).enumerate() {
                let _ = write!(labels, ",key{}=\"{}\"", index + 1, escape_label(key));
            }
            labels.push('}');
            return (format!("ratelimit_service_rate_limit_{counter}"), labels);
        }
    }
    if let Some(policy) = name.strip_prefix("ratelimit.service.store_failure.") {
        return (
            "ratelimit_service_store_failure".to_owned(),
            format!("{{policy=\"{}\"}}", escape_label(policy)),
        );
    }
    if let Some(error) = name.strip_prefix("ratelimit.service.call.should_rate_limit.") {
        return (
            "ratelimit_service_should_rate_limit_error".to_owned(),
            format!("{{err_type=\"{}\"}}", escape_label(error)),
        );
    }
    let sanitized: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    (sanitized, String::new())
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_default_mapping() {
        let counters = BTreeMap::from([
            (
                "ratelimit.service.rate_limit.edge.ip.total_hits".to_owned(),
                3,
            ),
            (
                "ratelimit.service.rate_limit.edge.a.b.over_limit".to_owned(),
                1,
            ),
            ("ratelimit.service.config_load_success".to_owned(), 1),
            (
                "ratelimit.service.call.should_rate_limit.redis_error".to_owned(),
                2,
            ),
            (
                "ratelimit.service.rate_limit.edge.a.b.c.over_limit".to_owned(),
                4,
            ),
            ("ratelimit.service.store_failure.fail_open".to_owned(), 2),
            (
                "ratelimit.service.rate_limit.edge.ip.refunded_hits".to_owned(),
                6,
            ),
        ]);
        let page = prometheus_page(&counters);
        assert!(page.contains(
            "# HELP ratelimit_service_config_load_success Configurations loaded.\n\
             # TYPE ratelimit_service_config_load_success counter\n"
        ));
        for line in page.lines().filter(|line| line.starts_with("# TYPE ")) {
            let family = line.split(' ').nth(2).unwrap_or_default();
            assert!(page.contains(&format!("# HELP {family} ")), "{family}");
        }
        assert!(page.contains(
            "ratelimit_service_rate_limit_refunded_hits{domain=\"edge\",key1=\"ip\"} 6\n"
        ));
        assert!(
            page.contains(
                "ratelimit_service_rate_limit_total_hits{domain=\"edge\",key1=\"ip\"} 3\n"
            )
        );
        assert!(page.contains(
            "ratelimit_service_rate_limit_over_limit{domain=\"edge\",key1=\"a\",key2=\"b\"} 5\n"
        ));
        assert!(page.contains("ratelimit_service_store_failure{policy=\"fail_open\"} 2\n"));
        assert!(page.contains("ratelimit_service_config_load_success 1\n"));
        assert!(
            page.contains(
                "ratelimit_service_should_rate_limit_error{err_type=\"redis_error\"} 2\n"
            )
        );
    }

    #[tokio::test]
    async fn statsd_gets_the_growth() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let value = Arc::new(std::sync::atomic::AtomicU64::new(2));
        let reading = Arc::clone(&value);
        let source: CounterSource = Arc::new(move || {
            BTreeMap::from([(
                "a.b".to_owned(),
                reading.load(std::sync::atomic::Ordering::Relaxed),
            )])
        });
        let task = spawn_statsd(address, Duration::from_millis(20), source, true);
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut buffer = vec![0; 64];
        let read = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer)
            .await
            .unwrap();
        assert_eq!(&buffer[..read], b"a.b:2|c\n");
        value.store(5, std::sync::atomic::Ordering::Relaxed);
        let read = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer)
            .await
            .unwrap();
        assert_eq!(&buffer[..read], b"a.b:3|c\n");
        task.abort();
    }
}
