//! Where a Redis URL points, without its credentials: the one rule by which
//! every tollgate server names its Redis in start lines, errors,
//! `check-config` output and metrics.
//!
//! The rule keeps only what it has read as an address, never a part of the
//! text it could not place: the URL is parsed as the store parses it (the
//! redis crate's reading, the cluster list's nodes one by one), and the
//! scheme, the hosts and ports (or the socket path) and the database number
//! are written out again. User names, passwords (`user:password@`,
//! `redis+unix://...?user=&pass=`, Go-style `REDIS_AUTH` put into the URL)
//! and every other parameter are never copied. A password must be
//! percent-encoded where a URL parser would misread it: one holding a raw
//! `/`, `?` or `#` before the `@` makes the parser take part of it for the
//! host, so such a URL is shown as `(not a Redis URL)` and refused by the
//! store, as is any URL that does not parse.

use redis::{ConnectionAddr, IntoConnectionInfo as _};

use crate::connection::{CLUSTER_SCHEME, TLS_CLUSTER_SCHEME, Target, ambiguous_user_information};

/// What stands for a URL that does not parse: nothing of it is shown.
pub const UNREADABLE_URL: &str = "(not a Redis URL)";

/// `url` without user names, passwords or parameters:
/// `redis://host:port[/db]`, `rediss://host:port[/db]`,
/// `redis+unix:///path[?db=N]`, `redis-cluster://host:port,host:port`
/// (`rediss-cluster://` over TLS); [`UNREADABLE_URL`] when `url` is not a
/// Redis URL the store would open.
pub fn redacted_url(url: &str) -> String {
    let url = url.trim();
    if ambiguous_user_information(url) {
        return UNREADABLE_URL.to_owned();
    }
    match Target::parse(url) {
        Ok(Target::Standalone(url)) => address(&url).unwrap_or_else(|| UNREADABLE_URL.to_owned()),
        Ok(Target::Cluster(nodes)) => {
            let scheme = if url.starts_with(TLS_CLUSTER_SCHEME) {
                TLS_CLUSTER_SCHEME
            } else {
                CLUSTER_SCHEME
            };
            let hosts: Option<Vec<String>> = nodes
                .iter()
                .map(|node| {
                    let info = node.as_str().into_connection_info().ok()?;
                    match info.addr() {
                        ConnectionAddr::Tcp(host, port)
                        | ConnectionAddr::TcpTls { host, port, .. } => Some(host_port(host, *port)),
                        _ => None,
                    }
                })
                .collect();
            match hosts {
                Some(hosts) => format!("{scheme}{}", hosts.join(",")),
                None => UNREADABLE_URL.to_owned(),
            }
        }
        Ok(Target::Sentinel(sentinel)) => {
            let hosts: Option<Vec<String>> = sentinel
                .sentinels
                .iter()
                .map(|node| {
                    let info = node.as_str().into_connection_info().ok()?;
                    match info.addr() {
                        ConnectionAddr::Tcp(host, port) => Some(host_port(host, *port)),
                        _ => None,
                    }
                })
                .collect();
            match hosts {
                Some(hosts) if sentinel.db == 0 => {
                    format!("redis-sentinel://{}/{}", hosts.join(","), sentinel.master)
                }
                Some(hosts) => format!(
                    "redis-sentinel://{}/{}/{}",
                    hosts.join(","),
                    sentinel.master,
                    sentinel.db
                ),
                None => UNREADABLE_URL.to_owned(),
            }
        }
        Err(_) => UNREADABLE_URL.to_owned(),
    }
}

/// One server's URL written out from its parsed address.
fn address(url: &str) -> Option<String> {
    let info = url.into_connection_info().ok()?;
    let database = info.redis_settings().db();
    Some(match info.addr() {
        ConnectionAddr::Tcp(host, port) => {
            with_database(format!("redis://{}", host_port(host, *port)), database)
        }
        ConnectionAddr::TcpTls { host, port, .. } => {
            with_database(format!("rediss://{}", host_port(host, *port)), database)
        }
        ConnectionAddr::Unix(path) => {
            let path = path.to_str()?;
            if database == 0 {
                format!("redis+unix://{path}")
            } else {
                format!("redis+unix://{path}?db={database}")
            }
        }
        _ => return None,
    })
}

/// `host:port`, an IPv6 address in brackets.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// `url` with `/N` when the database number `database` is not 0.
fn with_database(url: String, database: i64) -> String {
    if database == 0 {
        url
    } else {
        format!("{url}/{database}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_form_keeps_its_address_and_loses_its_credentials() {
        let cases = [
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
            ("redis://user:pw@h:1/3", "redis://h:1/3"),
            ("redis://:pw@h:1", "redis://h:1"),
            ("redis://us%40er:p%40w@h:1", "redis://h:1"),
            ("rediss://user:pw@h:6380/2", "rediss://h:6380/2"),
            ("redis://[::1]:7000", "redis://[::1]:7000"),
            (
                "redis+unix:///run/redis.sock?user=me&pass=pw",
                "redis+unix:///run/redis.sock",
            ),
            (
                "redis+unix:///run/r.sock?pass=pw&db=4",
                "redis+unix:///run/r.sock?db=4",
            ),
            (
                "redis-cluster://user:pw@a:1,b:2,c:3",
                "redis-cluster://a:1,b:2,c:3",
            ),
            ("rediss-cluster://:pw@a:1,b:2", "rediss-cluster://a:1,b:2"),
            ("  redis://h:1  ", "redis://h:1"),
        ];
        for (url, expected) in cases {
            assert_eq!(redacted_url(url), expected, "{url}");
        }
    }

    #[test]
    fn a_url_that_does_not_parse_shows_nothing_of_itself() {
        for url in [
            "redis-cluster://u:p,w@a:1,b:2",
            "redis-cluster://a:1,u:secret@b:2",
            "http://user:secret@h:1",
            "secret",
            "redis://user:secret@",
            "",
            // Raw '?', '#' or '/' in user information: a parser would take
            // part of it for the host.
            "redis://default:pa@ss?word@h:1",
            "redis://default:2024?secret@h:1",
            "redis-cluster://u:x@sec?r@a:1,b:2",
            "redis://u:12#rest@h:1",
            "rediss://u:a/b@h:1",
        ] {
            assert_eq!(redacted_url(url), UNREADABLE_URL, "{url}");
        }
    }
}
