//! No log line makes a replay panic (issue #27: a malformed line is counted
//! and reported by its line number, never fatal): proptests of each
//! format's parser on arbitrary text and on good lines cut or changed at
//! random, and of a whole replay on arbitrary bytes, its lines counted.

use proptest::prelude::*;
use tollgate_core::Fingerprinter;
use tollgate_gateway::config::ServeConfig;
use tollgate_replay::{Candidate, Format, NginxKey, Options, Replayer, Source, replay};

/// A good line of each format.
const GOOD: [&str; 4] = [
    "time=2024-12-05T09:00:01.000000Z method=GET path=/api/a status=200 route=api \
         tier=default key=c000000000000001 client=10.0.0.1 decision=allowed policy=default \
         remaining=0 upstream_status=200 duration_us=5 wait_us=0 bytes=2",
    r#"{"time":"2024-12-05T09:00:01.000000Z","method":"GET","path":"/api/a","status":200,"route":"api","tier":"default","key":"c000000000000001","client":"10.0.0.1","decision":"allowed"}"#,
    "10.0.0.1 - sk_a [05/Dec/2024:09:00:10 +0000] \"GET /api/a?x=1 HTTP/1.1\" 200 2 \"-\" \
         \"curl\" \"Bearer k1\"",
    r#"{"start_time":"2024-12-05T09:00:00.000Z","path":"/api/x","downstream_remote_address":"10.0.0.1:5555","api_key":"Bearer k1"}"#,
];

/// Every format: tollgate, nginx (the key appended, or in `remote_user`),
/// Envoy.
fn formats() -> [Format; 4] {
    [
        Format::Tollgate,
        Format::Nginx(NginxKey::Appended(1)),
        Format::Nginx(NginxKey::parse("remote_user").unwrap()),
        Format::Envoy {
            key_field: "api_key".to_owned(),
        },
    ]
}

/// `line` cut at `cut` (a char boundary at or below it) with `inserted`
/// put in at `at` (likewise).
fn changed(line: &str, cut: usize, at: usize, inserted: &str) -> String {
    let boundary = |mut index: usize| {
        index = index.min(line.len());
        while !line.is_char_boundary(index) {
            index -= 1;
        }
        index
    };
    let (cut, at) = (boundary(cut), boundary(at));
    let mut text = line[..cut].to_owned();
    let at = at.min(text.len());
    text.insert_str(at, inserted);
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_text_makes_a_parser_panic(line in "\\PC{0,200}") {
        for format in formats() {
            let _ = format.parse(&line);
        }
        let _ = NginxKey::parse(&line);
    }

    #[test]
    fn no_change_to_a_good_line_makes_a_parser_panic(
        which in 0..GOOD.len(),
        cut in 0usize..400,
        at in 0usize..400,
        inserted in prop_oneof![
            Just(String::new()),
            Just("\"".to_owned()),
            Just("[".to_owned()),
            Just("=".to_owned()),
            Just(" ".to_owned()),
            Just("\\".to_owned()),
            Just("99999999999999999999999".to_owned()),
            Just("-1".to_owned()),
            Just("é".to_owned()),
            Just("9999-99-99T99:99:99Z".to_owned()),
            "\\PC{0,8}",
        ],
    ) {
        let line = GOOD[which];
        let line = changed(line, cut, at, &inserted);
        for format in formats() {
            let _ = format.parse(&line);
        }
    }
}

/// A configuration of 2 a minute on `/api`.
fn candidate() -> Candidate {
    let config = ServeConfig::from_toml_str(
        "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 2\nwindow_s = 60\n\
         [[routes]]\nname = \"api\"\nprefix = \"/api\"\nupstream = \"http://127.0.0.1:1\"\n",
    )
    .unwrap();
    let fingerprints = Fingerprinter::new(None);
    Candidate {
        name: "two".to_owned(),
        replayer: Replayer::new(&config, &fingerprints).unwrap(),
        fingerprints,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Arbitrary bytes between good lines (not UTF-8, NUL, lone `\r`): the
    /// replay ends, counting every line, and the good ones are decided.
    /// Blank lines are passed over: `a_blank_line_is_not_a_line`.
    #[test]
    fn a_replay_of_any_bytes_counts_every_line(
        noise in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..20),
    ) {
        let good = GOOD[0];
        let mut log = Vec::new();
        for bytes in &noise {
            log.extend_from_slice(good.as_bytes());
            log.push(b'\n');
            // Never blank: each noise line starts with `x`.
            log.push(b'x');
            log.extend(bytes.iter().copied().filter(|byte| *byte != b'\n'));
            log.push(b'\n');
        }
        let candidates = [candidate()];
        let report = replay(
            vec![Source {
                name: "log".to_owned(),
                reader: Box::new(std::io::Cursor::new(log)),
            }],
            &Format::Tollgate,
            &candidates,
            Options::default(),
        );
        // Every line counted; each noise line bad, named by its number (the
        // first is line 2).
        prop_assert_eq!(report.lines, 2 * noise.len() as u64);
        prop_assert_eq!(report.bad_lines, noise.len() as u64);
        prop_assert_eq!(report.configs[0].overall.requests, noise.len() as u64);
        if !noise.is_empty() {
            prop_assert!(report.bad_examples[0].starts_with("log:2: "), "{:?}", report.bad_examples);
        }
    }
}

/// A blank line (nothing, or spaces and a `\r`) is passed over: not
/// counted, not bad.
#[test]
fn a_blank_line_is_not_a_line() {
    let log = format!("{}\n\n   \r\n{}\n", GOOD[0], GOOD[0]);
    let candidates = [candidate()];
    let report = replay(
        vec![Source {
            name: "log".to_owned(),
            reader: Box::new(std::io::Cursor::new(log.into_bytes())),
        }],
        &Format::Tollgate,
        &candidates,
        Options::default(),
    );
    assert_eq!((report.lines, report.bad_lines), (2, 0));
    assert_eq!(report.configs[0].overall.requests, 2);
}
