//! Each log format replayed, with counts worked out by hand: nginx's
//! `combined` (a key in an appended field), Envoy's JSON, tollgate's text;
//! lines out of order within the window, bad lines reported by number and
//! never fatal, and a second configuration compared.

use tollgate_core::Fingerprinter;
use tollgate_gateway::config::ServeConfig;
use tollgate_replay::{
    Candidate, Format, NginxKey, Options, Replayer, Report, Source, replay, table,
};

/// A plan of `limit` a minute (a fixed window) on route `/api`.
fn candidate(name: &str, limit: u64) -> Candidate {
    let config = ServeConfig::from_toml_str(&format!(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow_s = 60\n\
         [[routes]]\nname = \"api\"\nprefix = \"/api\"\nupstream = \"http://127.0.0.1:1\"\n"
    ))
    .unwrap();
    let fingerprints = Fingerprinter::new(None);
    Candidate {
        name: name.to_owned(),
        replayer: Replayer::new(&config, &fingerprints).unwrap(),
        fingerprints,
    }
}

fn run(text: &str, format: &Format, candidates: &[Candidate]) -> Report {
    replay(
        vec![Source {
            name: "log".to_owned(),
            reader: Box::new(std::io::Cursor::new(text.as_bytes().to_vec())),
        }],
        format,
        candidates,
        Options {
            most: 5,
            ..Options::default()
        },
    )
}

#[test]
fn nginx_lines_with_the_key_in_an_appended_field() {
    // k1: three requests in the minute starting 2024-12-05T09:00:00Z, the
    // second logged 5 s before the first (responses end out of order); a
    // plan of 2 a minute refuses the third in time order. k2: one. Then a
    // path no route holds, and a line that is not nginx's.
    let log = "\
10.0.0.1 - - [05/Dec/2024:09:00:10 +0000] \"GET /api/a?x=1 HTTP/1.1\" 200 2 \"-\" \"curl\" \"Bearer k1\"
10.0.0.1 - - [05/Dec/2024:09:00:05 +0000] \"GET /api/a HTTP/1.1\" 200 2 \"-\" \"curl\" \"Bearer k1\"
10.0.0.2 - - [05/Dec/2024:10:00:00 +0100] \"GET /api/b HTTP/1.1\" 200 2 \"-\" \"curl\" \"k2\"
10.0.0.1 - - [05/Dec/2024:09:00:20 +0000] \"GET /api/a HTTP/1.1\" 429 2 \"-\" \"curl\" \"Bearer k1\"
10.0.0.1 - - [05/Dec/2024:09:00:30 +0000] \"GET /other HTTP/1.1\" 200 2 \"-\" \"curl\" \"Bearer k1\"
garbage
";
    let report = run(
        log,
        &Format::Nginx(NginxKey::Appended(1)),
        &[candidate("two", 2), candidate("three", 3)],
    );
    assert_eq!(
        (report.lines, report.bad_lines, report.out_of_order),
        (6, 1, 0)
    );
    assert_eq!(
        report.bad_examples,
        ["log:6: not an nginx combined line: 1 fields, not 9"]
    );
    let two = &report.configs[0];
    assert_eq!((two.overall.requests, two.overall.refused), (4, 1));
    assert_eq!(two.skipped["no_route"], 1);
    // The third request of k1 at 09:00:20 is the one refused: k1's
    // fingerprint (Python: sha256(b"plan\0k1")[:8] in hex).
    assert_eq!(two.overall.most_refused.len(), 1);
    assert_eq!(two.overall.most_refused[0].key, "ecc8ad809bfbcfa1");
    assert!(two.agreement.is_none());
    // Three a minute refuses nothing.
    let three = &report.configs[1];
    assert_eq!((three.overall.requests, three.overall.refused), (4, 0));
    let text = table(&report);
    assert!(text.contains("6 lines read, 1 bad"), "{text}");
    assert!(!text.contains("k1"), "{text}");
}

#[test]
fn envoy_json_lines_with_the_key_in_a_named_field() {
    let log = r#"{"start_time":"2024-12-05T09:00:00.000Z","path":"/api/x","downstream_remote_address":"10.0.0.1:5555","api_key":"Bearer k1"}
{"start_time":"2024-12-05T09:00:01.500Z","path":"/api/x","downstream_remote_address":"10.0.0.1:5556","api_key":"Bearer k1"}
{"start_time":"2024-12-05T09:00:02Z","path":"/api/x","downstream_remote_address":"10.0.0.1:5557","api_key":"Bearer k1"}
{"start_time":"2024-12-05T09:00:03Z","path":"/api/x","downstream_remote_address":"10.0.0.1:5557"}
{"path":"/api/x"}
"#;
    let report = run(
        log,
        &Format::Envoy {
            key_field: "api_key".to_owned(),
        },
        &[candidate("two", 2)],
    );
    assert_eq!((report.lines, report.bad_lines), (5, 1));
    let two = &report.configs[0];
    // k1: 2 of 3 allowed; the line without a key would get a 401.
    assert_eq!((two.overall.requests, two.overall.refused), (3, 1));
    assert_eq!(two.skipped["no_key"], 1);
    assert_eq!(two.overall.peak_per_second, 1);
    assert_eq!(two.overall.peak_per_minute, 3);
}

#[test]
fn tollgate_text_lines_and_their_decisions() {
    // The fingerprint c000000000000001 stands for a key: three requests
    // in one minute under a plan of 2; the log says the third was refused,
    // then (a line that disagrees) that a fourth was allowed.
    let line = |second: u32, decision: &str| {
        format!(
            "time=2024-12-05T09:00:{second:02}.000000Z method=GET path=/api/a status=200 \
             route=api tier=default key=c000000000000001 client=10.0.0.1 decision={decision} \
             policy=default remaining=0 upstream_status=200 duration_us=5 wait_us=0 bytes=2\n"
        )
    };
    let log = [
        line(1, "allowed"),
        line(2, "allowed"),
        line(3, "refused"),
        line(4, "allowed"),
        "time=2024-12-05T09:00:05.000000Z method=GET path=/x status=404 route=- tier=- key=- \
         client=- decision=none policy=- remaining=- upstream_status=- duration_us=5 wait_us=0 \
         bytes=2\n"
            .to_owned(),
        "time=soon decision=allowed\n".to_owned(),
    ]
    .concat();
    let report = run(&log, &Format::Tollgate, &[candidate("two", 2)]);
    assert_eq!((report.lines, report.bad_lines), (6, 1));
    assert_eq!(report.bad_examples, ["log:6: no RFC 3339 time"]);
    let two = &report.configs[0];
    assert_eq!((two.overall.requests, two.overall.refused), (4, 2));
    let agreement = two.agreement.as_ref().unwrap();
    assert_eq!((agreement.compared, agreement.agreed), (4, 3));
    assert_eq!(agreement.disagreements, ["log:4"]);
    assert_eq!(two.skipped.values().sum::<u64>(), 1);
    // The key is shown as logged: already a fingerprint.
    assert_eq!(two.overall.most_refused[0].key, "c000000000000001");
    // A key that is not one (an edited log) is fingerprinted, never shown:
    // Python's hashlib.sha256(b"plan\0sk_plain").hexdigest()[:16].
    let edited = log.replace("c000000000000001", "sk_plain");
    let report = run(&edited, &Format::Tollgate, &[candidate("two", 2)]);
    assert_eq!(
        report.configs[0].overall.most_refused[0].key,
        "df036affcdf5903e"
    );
}

#[test]
fn a_line_that_is_not_utf8_is_counted_and_the_rest_read() {
    let mut log =
        b"10.0.0.1 - k1 [05/Dec/2024:09:00:01 +0000] \"GET /api/a HTTP/1.1\" 200 2 \"-\" \"c\"\n"
            .to_vec();
    log.extend_from_slice(b"\xff\xfe not text\n");
    log.extend_from_slice(
        b"10.0.0.1 - k1 [05/Dec/2024:09:00:02 +0000] \"GET /api/a HTTP/1.1\" 200 2 \"-\" \"c\"\n",
    );
    let report = replay(
        vec![Source {
            name: "log".to_owned(),
            reader: Box::new(std::io::Cursor::new(log)),
        }],
        &Format::Nginx(NginxKey::RemoteUser),
        &[candidate("two", 2)],
        Options::default(),
    );
    assert_eq!((report.lines, report.bad_lines), (3, 1));
    assert_eq!(report.bad_examples, ["log:2: not UTF-8 text"]);
    assert_eq!(report.configs[0].overall.requests, 2);
}
