//! The access log (`[access_log]`), over real HTTP to a real upstream, to a
//! file: one line per request, each read back (JSON with serde_json, text
//! field by field) and compared field by field with what the request must
//! have produced. The plan: the default fixed window of 2 per 60 s,
//! `sk_internal` exempt; routes `al_api*` (`/api`, no budget of its own),
//! `al_shadow*` (`/s`, 1 a minute in shadow mode) and `al_down*` (`/down`, an
//! upstream nothing listens on: 502). The API keys and the query's value
//! must never reach the file.

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tollgate_test_support::gateway::{self, Gateway};
use tollgate_test_support::loopback::Upstream;

/// A gateway logging to `path` in `format`, its routes ending in `suffix`.
fn config(upstream: &Upstream, path: &Path, format: &str, suffix: &str) -> String {
    gateway::config(&format!(
        "[limits]\nexempt_keys = [\"sk_internal\"]\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
         [access_log]\nenabled = true\npath = \"{}\"\nformat = \"{format}\"\n\
         [[routes]]\nname = \"al_api{suffix}\"\nprefix = \"/api\"\nupstream = \"http://{}\"\n\
         [[routes]]\nname = \"al_shadow{suffix}\"\nprefix = \"/s\"\nupstream = \"http://{}\"\n\
         rpm = 1\nshadow = true\n\
         [[routes]]\nname = \"al_down{suffix}\"\nprefix = \"/down\"\nupstream = \"http://127.0.0.1:1\"\n",
        path.display(),
        upstream.address,
        upstream.address
    ))
}

/// The lines of `path` once it has `count` (the writer writes every 20 ms;
/// this waits for it, at most 10 s).
async fn lines_of(path: &Path, count: usize) -> Vec<String> {
    for _ in 0..500 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= count {
            assert_eq!(lines.len(), count, "{text}");
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "{} holds fewer than {count} lines",
        std::fs::read_to_string(path).unwrap_or_default()
    );
}

/// A GET of `path` with `key`: its status and the body's length as the
/// client received it.
async fn get(gateway: &Gateway, path: &str, key: &str) -> (u16, u64) {
    let response = gateway.get(path, key).await;
    let status = response.status().as_u16();
    let body = response.bytes().await.unwrap();
    (status, body.len() as u64)
}

/// The gateways' manual clock, which never moves in these tests: 6e9 s
/// after the epoch.
const START_S: u64 = 6_000_000_000;

/// `line` without `time` and `duration_us`, after checking them: `time`
/// the gateway's clock (the one that decides its limits, so that a replay
/// of the log decides at the same times), `duration_us` a whole number.
fn checked(mut line: Value) -> Value {
    let object = line.as_object_mut().unwrap();
    let time = object.remove("time").unwrap();
    assert_eq!(time, "2160-02-18T10:40:00.000000Z");
    let parsed = humantime::parse_rfc3339(time.as_str().unwrap()).unwrap();
    assert_eq!(
        parsed,
        SystemTime::UNIX_EPOCH + Duration::from_secs(START_S)
    );
    assert!(object.remove("duration_us").unwrap().is_u64());
    line
}

#[tokio::test]
async fn every_request_gets_a_json_line() {
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(&config(&upstream, &path, "json", ""), START_S).await;
    // Allowed: the upstream's "upstream", 8 bytes; the query is not logged.
    assert_eq!(
        get(&gateway, "/api/orders?token=sekrit", "sk_log_allowed").await,
        (200, 8)
    );
    // Refused: the third request of a plan of 2.
    for _ in 0..2 {
        assert_eq!(get(&gateway, "/api/orders", "sk_log_refused").await.0, 200);
    }
    let (status, refused_bytes) = get(&gateway, "/api/orders", "sk_log_refused").await;
    assert_eq!(status, 429);
    // Exempt, shadow (the second request of a budget of 1, let through),
    // no route, the upstream down.
    assert_eq!(get(&gateway, "/api/orders", "sk_internal").await, (200, 8));
    for _ in 0..2 {
        assert_eq!(get(&gateway, "/s/x", "sk_log_shadow").await, (200, 8));
    }
    let (status, not_found_bytes) = get(&gateway, "/nowhere", "sk_log_lost").await;
    assert_eq!(status, 404);
    let (status, bad_gateway_bytes) = get(&gateway, "/down/x", "sk_log_down").await;
    assert_eq!(status, 502);
    // No API key: 401, no limit decided.
    let unauthorized = gateway
        .client
        .get(gateway.url("/api/orders"))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let unauthorized_bytes = unauthorized.bytes().await.unwrap().len() as u64;
    let lines = lines_of(&path, 10).await;
    let text = std::fs::read_to_string(&path).unwrap();
    for secret in ["sk_log", "sk_internal", "sekrit", "token"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let lines: Vec<Value> = lines
        .iter()
        .map(|line| checked(serde_json::from_str(line).unwrap()))
        .collect();
    // Each key by its fingerprint, from Python (no key secret is set):
    // hashlib.sha256(b"plan\0" + key).hexdigest()[:16].
    let allowed = |key: &str, remaining: u64| {
        json!({
            "method": "GET", "path": "/api/orders", "status": 200, "route": "al_api",
            "tier": "default", "key": key, "client": "127.0.0.1", "decision": "allowed",
            "policy": "default", "remaining": remaining, "upstream_status": 200, "wait_us": 0,
            "bytes": 8,
        })
    };
    let shadow = |decision: &str| {
        json!({
            "method": "GET", "path": "/s/x", "status": 200, "route": "al_shadow",
            "tier": "default", "key": "5b3305c3a3ad8ad1", "client": "127.0.0.1",
            "decision": decision, "policy": "al_shadow", "remaining": 0,
            "upstream_status": 200, "wait_us": 0, "bytes": 8,
        })
    };
    assert_eq!(
        lines,
        [
            allowed("d9256592ae3bef09", 1),
            allowed("2ed7a4242384a27d", 1),
            allowed("2ed7a4242384a27d", 0),
            json!({
                "method": "GET", "path": "/api/orders", "status": 429, "route": "al_api",
                "tier": "default", "key": "2ed7a4242384a27d", "client": "127.0.0.1",
                "decision": "refused", "policy": "default", "remaining": 0,
                "upstream_status": null, "wait_us": 0, "bytes": refused_bytes,
            }),
            json!({
                "method": "GET", "path": "/api/orders", "status": 200, "route": "al_api",
                "tier": null, "key": "70dde1056aa25c09", "client": "127.0.0.1",
                "decision": "exempt", "policy": null, "remaining": null, "upstream_status": 200,
                "wait_us": 0, "bytes": 8,
            }),
            // The route's budget of 1 binds (the plan has 1 left, then 0).
            shadow("allowed"),
            shadow("shadow_refused"),
            json!({
                "method": "GET", "path": "/nowhere", "status": 404, "route": null,
                "tier": null, "key": null, "client": null, "decision": "none", "policy": null,
                "remaining": null, "upstream_status": null, "wait_us": 0,
                "bytes": not_found_bytes,
            }),
            json!({
                "method": "GET", "path": "/down/x", "status": 502, "route": "al_down",
                "tier": "default", "key": "6986e8716e77713f", "client": "127.0.0.1",
                "decision": "allowed", "policy": "default", "remaining": 1,
                "upstream_status": null, "wait_us": 0, "bytes": bad_gateway_bytes,
            }),
            json!({
                "method": "GET", "path": "/api/orders", "status": 401, "route": "al_api",
                "tier": null, "key": null, "client": null, "decision": "none", "policy": null,
                "remaining": null, "upstream_status": null, "wait_us": 0,
                "bytes": unauthorized_bytes,
            }),
        ]
    );
    // The route's shadow budget counted its one refusal, keyed by API key.
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_shadow_denials_total",
                &[
                    ("plugin", "tollgate"),
                    ("route", "al_shadow"),
                    ("key_kind", "principal")
                ],
            )
            .await,
        Some(1.0)
    );
    // The field order is the documented one.
    let first = text.lines().next().unwrap();
    let names = [
        "time",
        "method",
        "path",
        "status",
        "route",
        "tier",
        "key",
        "client",
        "decision",
        "policy",
        "remaining",
        "upstream_status",
        "duration_us",
        "wait_us",
        "bytes",
    ];
    let places: Vec<usize> = names
        .iter()
        .map(|name| first.find(&format!("\"{name}\":")).unwrap())
        .collect();
    assert!(places.windows(2).all(|pair| pair[0] < pair[1]), "{first}");
    // A reload (SIGHUP) reopens the file: logrotate moved it away.
    let rotated = directory.path().join("access.log.1");
    std::fs::rename(&path, &rotated).unwrap();
    // No configuration file to read again, but the log is reopened.
    assert!(gateway.running.reload().is_err());
    assert_eq!(get(&gateway, "/api/orders", "sk_log_after").await, (200, 8));
    let after_rotation = lines_of(&path, 1).await;
    assert!(after_rotation[0].contains("\"path\":\"/api/orders\""));
    assert_eq!(
        std::fs::read_to_string(&rotated).unwrap().lines().count(),
        10
    );
}

#[tokio::test]
async fn text_lines_name_their_fields() {
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(&config(&upstream, &path, "text", "_text"), START_S).await;
    assert_eq!(
        get(&gateway, "/api/a?key=sekrit", "sk_text").await,
        (200, 8)
    );
    let (status, not_found_bytes) = get(&gateway, "/nowhere", "sk_text").await;
    assert_eq!(status, 404);
    let lines = lines_of(&path, 2).await;
    let fields = |line: &str| -> Vec<(String, String)> {
        line.split(' ')
            .map(|pair| {
                let (name, value) = pair.split_once('=').unwrap();
                (name.to_owned(), value.to_owned())
            })
            .collect()
    };
    let expected = |path: &str,
                    status: &str,
                    route: &str,
                    (tier, key, client): (&str, &str, &str),
                    (decision, policy, remaining): (&str, &str, &str),
                    upstream: &str,
                    bytes: &str| {
        [
            ("method", "GET"),
            ("path", path),
            ("status", status),
            ("route", route),
            ("tier", tier),
            ("key", key),
            ("client", client),
            ("decision", decision),
            ("policy", policy),
            ("remaining", remaining),
            ("upstream_status", upstream),
            ("wait_us", "0"),
            ("bytes", bytes),
        ]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .to_vec()
    };
    let mut found: Vec<Vec<(String, String)>> = lines.iter().map(|line| fields(line)).collect();
    for line in &mut found {
        let names: Vec<&str> = line.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(
            names,
            [
                "time",
                "method",
                "path",
                "status",
                "route",
                "tier",
                "key",
                "client",
                "decision",
                "policy",
                "remaining",
                "upstream_status",
                "duration_us",
                "wait_us",
                "bytes"
            ]
        );
        assert!(
            humantime::parse_rfc3339(&line[0].1).is_ok(),
            "{}",
            line[0].1
        );
        assert!(line[12].1.parse::<u64>().is_ok(), "{}", line[12].1);
        line.remove(12);
        line.remove(0);
    }
    assert_eq!(
        found,
        [
            expected(
                "/api/a",
                "200",
                "al_api_text",
                ("default", "15c54146dbb76837", "127.0.0.1"),
                ("allowed", "default", "1"),
                "200",
                "8"
            ),
            expected(
                "/nowhere",
                "404",
                "-",
                ("-", "-", "-"),
                ("none", "-", "-"),
                "-",
                &not_found_bytes.to_string()
            ),
        ]
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains("sk_text") && !text.contains("sekrit"),
        "{text}"
    );
}

/// What comes back for `request` sent byte for byte on a new connection:
/// the status of the first response; `None` when the connection was reset
/// before it could be read (a server closing with part of a long head
/// unread resets the connection, which may discard its answer).
async fn raw_status(address: std::net::SocketAddr, request: &[u8]) -> Option<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    // The server may answer and close before it has read all of a long
    // head: a failed write is then expected.
    let _ = stream.write_all(request).await;
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response).await;
    let status = std::str::from_utf8(response.get(9..12)?).ok()?;
    Some(status.parse().unwrap())
}

#[tokio::test]
async fn requests_the_http_parser_rejects_get_their_lines() {
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(&config(&upstream, &path, "json", "_rej"), START_S).await;
    let address = gateway.running.address;
    // A header line without a colon: hyper answers 400 itself.
    let bad_header = b"GET /api/x HTTP/1.1\r\nHost: test\r\nno colon here\r\n\r\n";
    assert_eq!(raw_status(address, bad_header).await, Some(400));
    // A path of 70,000 bytes, past hyper's longest URI (65,534): 414.
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: test\r\n\r\n", "a".repeat(70_000));
    let status = raw_status(address, long_uri.as_bytes()).await;
    assert!(matches!(status, Some(414) | None), "{status:?}");
    // 500 KB of headers, past hyper's 408 KiB read buffer: 431.
    let long_head = format!(
        "GET /api/x HTTP/1.1\r\nHost: test\r\n{}\r\n",
        "X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n".repeat(10_000)
    );
    let status = raw_status(address, long_head.as_bytes()).await;
    assert!(matches!(status, Some(431) | None), "{status:?}");
    let lines = lines_of(&path, 3).await;
    let rejected = |status: u16| {
        json!({
            "method": null, "path": null, "status": status, "route": null, "tier": null,
            "key": null, "client": null, "decision": "none", "policy": null, "remaining": null,
            "upstream_status": null, "wait_us": 0, "bytes": 0,
        })
    };
    let mut lines: Vec<Value> = lines
        .iter()
        .map(|line| checked(serde_json::from_str(line).unwrap()))
        .collect();
    // Each connection may have landed on another worker: lines in any order.
    lines.sort_by_key(|line| line["status"].as_u64());
    assert_eq!(lines, [rejected(400), rejected(414), rejected(431)]);
    gateway.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_refused_a_slot_is_logged_as_such() {
    // `/slow` is held by the upstream until released; one in flight per key.
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(
        &gateway::config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow_s = 60\n\
             [access_log]\nenabled = true\npath = \"{}\"\n\
             [[routes]]\nname = \"al_slots\"\nprefix = \"/\"\nupstream = \"http://{}\"\n\
             max_in_flight = 1\n",
            path.display(),
            upstream.address
        )),
        0,
    )
    .await;
    let held = gateway
        .client
        .get(gateway.url("/slow"))
        .header("authorization", "Bearer sk_slots")
        .send();
    let held = tokio::spawn(held);
    for _ in 0..500 {
        if upstream.requests() >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(gateway.status("/x", "sk_slots").await, 429);
    upstream.release.notify_waiters();
    assert_eq!(held.await.unwrap().unwrap().status(), 200);
    let lines = lines_of(&path, 2).await;
    let decisions: Vec<(String, String, Value)> = lines
        .iter()
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            (
                line["path"].as_str().unwrap().to_owned(),
                line["decision"].as_str().unwrap().to_owned(),
                line["remaining"].clone(),
            )
        })
        .collect();
    // The refused request's line is written first: it ended first. Refused
    // before its rates were decided, it names no policy.
    assert_eq!(
        decisions,
        [
            ("/x".to_owned(), "in_flight_refused".to_owned(), Value::Null),
            ("/slow".to_owned(), "allowed".to_owned(), json!(99)),
        ]
    );
}

#[tokio::test]
async fn an_enforced_refusal_names_the_enforced_limit_not_a_shadow_one() {
    // The plan: 1 per 10 s, enforced. The route's budget: 1 a minute, in
    // shadow mode. The second request is refused by both; the shadow one
    // would wait longer (a minute against the window's 10 s), but the
    // refusal is the plan's: its line names the plan.
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(
        &gateway::config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 10\n\
             [access_log]\nenabled = true\npath = \"{}\"\n\
             [[routes]]\nname = \"al_mixed\"\nprefix = \"/\"\nupstream = \"http://{}\"\n\
             rpm = 1\nburst = 1\nshadow = true\n",
            path.display(),
            upstream.address
        )),
        START_S,
    )
    .await;
    assert_eq!(gateway.status("/x", "sk_mixed").await, 200);
    assert_eq!(gateway.status("/x", "sk_mixed").await, 429);
    let lines = lines_of(&path, 2).await;
    let refused: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(
        (
            &refused["decision"],
            &refused["policy"],
            &refused["remaining"]
        ),
        (&json!("refused"), &json!("default"), &json!(0))
    );
}

#[tokio::test]
async fn a_request_the_failure_policy_decided_is_logged_and_counted_so() {
    // A Redis that never answers (nothing listens on port 1), failing open:
    // the request passes uncounted, and says so in the log and the metric.
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(
        &gateway::config(&format!(
            "[store]\nurl = \"redis://127.0.0.1:1\"\nfailure = \"fail_open\"\ntimeout = \"20ms\"\n\
             [access_log]\nenabled = true\npath = \"{}\"\n\
             [[routes]]\nname = \"al_unavailable\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            path.display(),
            upstream.address
        )),
        START_S,
    )
    .await;
    assert_eq!(gateway.status("/x", "sk_unavailable").await, 200);
    let line: Value = serde_json::from_str(&lines_of(&path, 1).await[0]).unwrap();
    assert_eq!(
        (&line["decision"], &line["policy"], &line["status"]),
        (&json!("unavailable"), &Value::Null, &json!(200))
    );
    assert_eq!(
        gateway
            .route_sample(
                "tollgate_store_failures_total",
                &[
                    ("plugin", "tollgate"),
                    ("route", "al_unavailable"),
                    ("policy", "fail_open")
                ]
            )
            .await,
        Some(1.0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_request_is_logged_with_its_wait_and_carries_its_headers() {
    // The route: a token bucket of 60 a minute (one a second), a burst of
    // 1, waiting up to 2 s. On the gateway's clock, which does not move,
    // the first request takes the token; the second's turn is when the next
    // one is in, 1 s later: it waits exactly 1,000,000 µs, then passes.
    let upstream = Upstream::start().await;
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("access.log");
    let gateway = Gateway::start(
        &gateway::config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 100\nwindow_s = 60\n\
             [access_log]\nenabled = true\npath = \"{}\"\n\
             [[routes]]\nname = \"al_wait\"\nprefix = \"/\"\nupstream = \"http://{}\"\n\
             rpm = 60\nburst = 1\ndelay = \"2s\"\n",
            path.display(),
            upstream.address
        )),
        START_S,
    )
    .await;
    assert_eq!(gateway.status("/x", "sk_wait").await, 200);
    let delayed = gateway.get("/x", "sk_wait").await;
    assert_eq!(delayed.status(), 200);
    // Its fields are those of its decision at its turn, 1 s on: the plan's
    // window (START_S is 10^8 whole minutes) has 59 s left, 98 of its
    // 100 (two used); the bucket is empty, and full again 1 s later.
    assert_eq!(
        gateway::header(&delayed, "ratelimit").as_deref(),
        Some("\"default\";r=98;t=59, \"al_wait\";r=0;t=1")
    );
    assert_eq!(
        gateway::header(&delayed, "ratelimit-policy").as_deref(),
        Some("\"default\";q=100;w=60, \"al_wait\";q=1;w=1")
    );
    gateway.until_nothing_held().await;
    let lines = lines_of(&path, 2).await;
    let fields: Vec<(Value, Value, Value, Value)> = lines
        .iter()
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            (
                line["decision"].clone(),
                line["policy"].clone(),
                line["remaining"].clone(),
                line["wait_us"].clone(),
            )
        })
        .collect();
    assert_eq!(
        fields,
        [
            (json!("allowed"), json!("al_wait"), json!(0), json!(0)),
            (
                json!("delayed"),
                json!("al_wait"),
                json!(0),
                json!(1_000_000)
            ),
        ]
    );
    assert_eq!(upstream.requests(), 2);
}
