//! The `tollgate run` command line: files, standard input, `--config`, and the
//! one-line error with exit code 2 for input that is not a JSON array.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn tollgate(arguments: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .args(arguments)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The process may exit before reading (a bad config): ignore a broken pipe.
    let _ = child.stdin.take().unwrap().write_all(stdin);
    child.wait_with_output().unwrap()
}

fn scratch_file(name: &str, contents: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

#[test]
fn runs_the_example_script() {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/quickstart.json");
    let output = tollgate(&["run", example.to_str().unwrap()], b"");
    assert!(output.status.success());
    let outputs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The built-in plans: fixed window 5 per 60 s, tier pro a sliding log of
    // 20 per 60 s, sk_internal exempt.
    assert_eq!(
        outputs,
        serde_json::json!([
            // Five allowed in the window [120, 180) ("Bearer sk_demo" is
            // sk_demo), the sixth refused until it ends, 55 s after 125.
            {"allowed": true, "remaining": 4, "retry_after": 0},
            {"allowed": true, "remaining": 3, "retry_after": 0},
            {"allowed": true, "remaining": 2, "retry_after": 0},
            {"allowed": true, "remaining": 1, "retry_after": 0},
            {"allowed": true, "remaining": 0, "retry_after": 0},
            {"allowed": false, "remaining": 0, "retry_after": 55},
            // A new window at 180: 5 of the 10^15 allowed, the rest refused
            // until 240.
            {"allowed": 5, "rejected": 999_999_999_999_995u64, "remaining": 0, "retry_after": 60},
            "pro",
            // On pro, afresh: 19 of 20 left.
            {"allowed": true, "remaining": 19, "retry_after": 0},
            {"allowed": true, "remaining": null, "retry_after": 0},
            {"algorithm": "token_bucket", "limit": 7, "window_s": 60, "burst": 7},
            // A full bucket of 7 for a new key; the 8th waits for a token,
            // one every 60/7 = 8.57 s: 9 s rounded up.
            {"allowed": 7, "rejected": 1, "remaining": 0, "retry_after": 9},
            // sk_demo (on pro, kept by configure) and sk_other; allowed
            // 5 + 5 + 1 + 1 (exempt) + 7, refused 1 + (10^15 - 5) + 1.
            {"tracked_keys": 2, "allowed": 19, "rejected": 999_999_999_999_997u64}
        ])
    );
}

#[test]
fn input_that_is_not_an_array_exits_2_with_one_line() {
    for input in [
        &b"{\"ops\": []}"[..],
        b"",
        b"[[\"stats\", 1]",
        b"not json",
        b"[] 1",
    ] {
        let output = tollgate(&["run", "-"], input);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(input)
        );
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("tollgate: input is not a JSON array of operations: "),
            "{stderr}"
        );
    }
}

#[test]
fn a_missing_file_exits_2() {
    let output = tollgate(&["run", "/nonexistent/ops.json"], b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "tollgate: cannot read /nonexistent/ops.json: No such file or directory (os error 2)\n"
    );
}

#[test]
fn config_file_sets_the_policies() {
    let config = scratch_file(
        "gold.toml",
        "exempt_keys = [\"sk_ops\"]\n[default_policy]\nalgorithm = \"token_bucket\"\nlimit = 60\nwindow_s = 60\nburst = 2\n[tiers.gold]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 10\n",
    );
    let operations = br#"[["request_batch", "a", 0, 3], ["assign_tier", "a", "gold"], ["request_batch", "a", 1, 2],
        ["assign_tier", "a", "pro"], ["request", "sk_internal", 1], ["request", "sk_ops", 1]]"#;
    let output = tollgate(
        &["run", "--config", config.to_str().unwrap(), "-"],
        operations,
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let outputs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        outputs,
        serde_json::json!([
            {"allowed": 2, "rejected": 1, "remaining": 0, "retry_after": 1},
            "gold",
            {"allowed": 1, "rejected": 1, "remaining": 0, "retry_after": 9},
            "error: unknown tier: pro",
            {"allowed": true, "remaining": 1, "retry_after": 0},
            {"allowed": true, "remaining": null, "retry_after": 0}
        ])
    );
}

#[test]
fn an_invalid_config_exits_2_naming_the_problem() {
    let config = scratch_file(
        "bad.toml",
        "[default_policy]\nalgorithm = \"fixed_window\"\nlimit = 0\nwindow_s = 60\n",
    );
    let output = tollgate(&["run", "--config", config.to_str().unwrap(), "-"], b"[]");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "tollgate: {}: invalid configuration: line 1, column 1 (`limits.default_policy`): \
             limit must be an integer from 1 to 2^63-1, got 0\n",
            config.display()
        )
    );
}

#[test]
fn the_example_config_is_valid() {
    let config = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/limits.toml");
    let output = tollgate(
        &["run", "--config", config.to_str().unwrap(), "-"],
        b"[[\"request_batch\", \"k\", 0, 20]]",
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let outputs: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // Token bucket of 10 tokens refilled at 1 per second.
    assert_eq!(
        outputs,
        serde_json::json!([{"allowed": 10, "rejected": 10, "remaining": 0, "retry_after": 1}])
    );
}

#[test]
fn check_config_prints_what_is_in_force_and_every_warning() {
    let path = scratch_file(
        "check.toml",
        "listen = \"127.0.0.1:9000\"\nworkers = 1\n\
         [admin]\nlisten = \"127.0.0.1:9001\"\ntoken = \"change-me\"\n\
         [access_log]\npath = \"/tmp/tollgate-check-access.log\"\n\
         [limits]\nidle_eviction_s = 600\n\
         [limits.default_policy]\nalgorithm = \"sliding_log\"\nlimit = 100\nwindow_s = 3600\n\
         [[routes]]\nprefix = \"/\"\nupstream = \"http://127.0.0.1:7000\"\n",
    );
    let output = tollgate(&["check-config", path.to_str().unwrap()], b"");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!(
            "listen 127.0.0.1:9000 (admin API on 127.0.0.1:9001), worker threads: 1\n\
             limits in memory, in this process\n\
             default policy: sliding_log 100 per 3600 s\n\
             exempt keys: 0; tenants: 0, with 0 keys\n\
             route /: / -> http://127.0.0.1:7000/\n\
             warning: access_log.path is set but access_log.enabled is not: no access log is \
             written (set enabled = true)\n\
             warning: the admin token is the example's \"change-me\": set your own in \
             admin.token or $TOLLGATE_ADMIN_TOKEN\n\
             {}: the configuration is valid\n",
            path.display()
        )
    );
    // Named as `serve --config` names it, the same report.
    let option = tollgate(&["check-config", "--config", path.to_str().unwrap()], b"");
    assert!(option.status.success(), "{option:?}");
    assert!(
        String::from_utf8(option.stdout)
            .unwrap()
            .ends_with(&format!("{}: the configuration is valid\n", path.display()))
    );
    let bad = scratch_file("check-bad.toml", "workers = 0\n");
    let output = tollgate(&["check-config", bad.to_str().unwrap()], b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        format!(
            "tollgate: {}: workers must be from 1 to 1024\n",
            bad.display()
        )
    );
}

#[test]
fn check_config_reads_the_certificate_files_as_a_start_would() {
    let missing = std::env::temp_dir().join("tollgate-check-config-no-such-cert.pem");
    let config = scratch_file(
        "check-tls.toml",
        &format!("[tls]\ncert = \"{0}\"\nkey = \"{0}\"\n", missing.display()),
    );
    let output = tollgate(&["check-config", config.to_str().unwrap()], b"");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with(&format!("tollgate: tls.cert {}: ", missing.display())),
        "{stderr}"
    );
}

#[test]
fn check_config_counts_the_known_keys_and_warns_when_none_is_listed_under_refuse() {
    let run = |name: &str, keys: &str| {
        let file = scratch_file(&format!("{name}.keys"), keys);
        let config = scratch_file(
            &format!("{name}.toml"),
            &format!(
                "[keys]\nknown = \"{}\"\nunknown = \"refuse\"\n",
                file.display()
            ),
        );
        let output = tollgate(&["check-config", config.to_str().unwrap()], b"");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap()
    };
    let warning = "warning: the file of known keys lists no key, and keys.unknown = \"refuse\": \
                   every request with an API key is refused (401)\n";
    // Comments and blank lines only: no key.
    let empty = run("known-empty", "# none yet\n\n");
    assert!(empty.contains("\nknown keys: 0 listed, "), "{empty}");
    assert!(empty.contains(warning), "{empty}");
    let two = run("known-two", "sk_live_a\nsk_live_b\n");
    assert!(two.contains("\nknown keys: 2 listed, "), "{two}");
    assert!(!two.contains("warning: the file of known keys"), "{two}");
    assert!(!two.contains("sk_live_a"), "{two}");
}

#[test]
fn check_config_refuses_the_public_api_settings_that_cannot_work_naming_them() {
    let route = "[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://127.0.0.1:1\"\n\
                 rpm = 60\n";
    let refused = |name: &str, toml: &str| {
        let config = scratch_file(&format!("{name}.toml"), toml);
        let output = tollgate(&["check-config", config.to_str().unwrap()], b"");
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        assert!(output.stdout.is_empty());
        String::from_utf8(output.stderr).unwrap()
    };
    let optional = refused(
        "public-optional",
        &format!("{route}api_key = \"optional\"\nkey = \"principal\"\n"),
    );
    assert!(
        optional.contains("route r (/r): api_key = \"optional\"")
            && optional.contains("key it by \"ip\" or \"header:NAME\""),
        "{optional}"
    );
    let none_in_flight = refused("public-in-flight", &format!("{route}max_in_flight = 0\n"));
    assert!(
        none_in_flight.contains("route r (/r): max_in_flight must be 1 to 4294967296"),
        "{none_in_flight}"
    );
    let negative = refused("public-delay", &format!("{route}delay = \"-1s\"\n"));
    assert!(
        negative.contains("`routes[0].delay`") && negative.contains("\"-1s\" is negative"),
        "{negative}"
    );
    // A file of known keys: the line named, the key on another line never
    // shown.
    let keys = |name: &str, contents: &[u8]| {
        let file = std::env::temp_dir().join(format!("tollgate-cli-{name}.keys"));
        std::fs::write(&file, contents).unwrap();
        let config = format!("[keys]\nknown = \"{}\"\n", file.display());
        refused(name, &config)
    };
    let not_text = keys("public-keys-binary", b"sk_live_secret_one\n\xff\xfe\n");
    assert!(
        not_text.contains("keys.known") && not_text.contains("not UTF-8 text (line 2)"),
        "{not_text}"
    );
    assert!(!not_text.contains("sk_live_secret_one"), "{not_text}");
    let malformed = keys("public-keys-digest", b"sk_live_secret_one\nsha256:abcz\n");
    assert!(
        malformed.contains("keys.known") && malformed.contains("line 2 of the file of known keys"),
        "{malformed}"
    );
    assert!(!malformed.contains("sk_live_secret_one"), "{malformed}");
}

#[test]
fn simulate_gives_the_engines_numbers_and_pictures() {
    // 10 a second for 2 s against 5 per aligned second: 5 pass and 5 are
    // refused in each second, and nothing is left at its end.
    let output = tollgate(
        &[
            "simulate",
            "--policy",
            "fw=fixed_window:5/1s",
            "--pattern",
            "steady:10/s",
            "--duration",
            "2s",
            "--step",
            "1s",
        ],
        b"",
    );
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report,
        serde_json::json!({
            "pattern": "steady:10/s", "requests": 20, "duration_ms": 2000, "step_ms": 1000,
            "runs": [{
                "name": "fw",
                "policy": {"algorithm": "fixed_window", "limit": 5, "window_s": 1},
                "allowed": 10, "refused": 10,
                "buckets": [
                    {"start_ms": 0, "allowed": 5, "refused": 5, "remaining": 0},
                    {"start_ms": 1000, "allowed": 5, "refused": 5, "remaining": 0},
                ],
            }],
        })
    );
    // The pictures: SVG to a file (its panel titles in it), PNG to a file.
    let directory = std::env::temp_dir().join(format!("tollgate-simulate-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let svg = directory.join("runs.svg");
    let png = directory.join("runs.png");
    for path in [&svg, &png] {
        let output = tollgate(
            &[
                "simulate",
                "--policy",
                "fixed_window:5/1s",
                "--policy",
                "bucket=token_bucket:5/1s,burst=2",
                "--pattern",
                "bursts:4/1s",
                "--duration",
                "3s",
                "--output",
                path.to_str().unwrap(),
            ],
            b"",
        );
        assert!(output.status.success(), "{output:?}");
    }
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
    // Bursts of 4 at 0, 1 and 2 s: 5 a second allows all 12; a bucket of 2
    // refilled 5 a second allows 2 of each burst.
    assert!(text.contains("fixed_window:5/1s: 12 allowed, 0 refused of 12"));
    assert!(text.contains("bucket: 6 allowed, 6 refused of 12"));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // Bad input: a clear error, exit 2.
    let bad = tollgate(
        &[
            "simulate",
            "--policy",
            "leaky:5/1s",
            "--pattern",
            "steady:1/s",
        ],
        b"",
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8(bad.stderr)
            .unwrap()
            .starts_with("tollgate: invalid policy \"leaky:5/1s\": the algorithm is")
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn replay_reads_a_log_and_reports_by_tier_and_route() {
    // A plan of 2 a minute; sk_r sends 3 requests in one minute (an nginx
    // log, the key in $remote_user): the third would be refused. A second
    // configuration of 3 a minute refuses none.
    let directory = std::env::temp_dir().join(format!("tollgate-replay-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let config = |name: &str, limit: u64| {
        let path = directory.join(name);
        std::fs::write(
            &path,
            format!(
                "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = {limit}\nwindow_s = 60\n"
            ),
        )
        .unwrap();
        path
    };
    let two = config("two.toml", 2);
    let three = config("three.toml", 3);
    let log = directory.join("access.log");
    std::fs::write(
        &log,
        (1..=3)
            .map(|second| {
                format!(
                    "10.0.0.1 - sk_r [05/Dec/2024:09:00:0{second} +0000] \"GET /x HTTP/1.1\" 200 2 \"-\" \"curl\"\n"
                )
            })
            .collect::<String>(),
    )
    .unwrap();
    let plot = directory.join("replay.svg");
    let output = tollgate(
        &[
            "replay",
            "--config",
            two.to_str().unwrap(),
            "--compare",
            three.to_str().unwrap(),
            "--log-format",
            "nginx",
            "--format",
            "json",
            "--plot",
            plot.to_str().unwrap(),
            "--plot-by",
            "route",
            log.to_str().unwrap(),
        ],
        b"",
    );
    assert!(output.status.success(), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["lines"], 3);
    let refused = |index: usize| {
        let config = &report["configs"][index];
        (
            config["overall"]["requests"].clone(),
            config["overall"]["refused"].clone(),
            config["tiers"]["default"]["refused"].clone(),
            config["routes"]["demo"]["refused"].clone(),
        )
    };
    use serde_json::json;
    assert_eq!(refused(0), (json!(3), json!(1), json!(1), json!(1)));
    assert_eq!(refused(1), (json!(3), json!(0), json!(0), json!(0)));
    // sk_r's fingerprint, never the key: Python's
    // hashlib.sha256(b"plan\0sk_r").hexdigest()[:16].
    assert_eq!(
        report["configs"][0]["overall"]["most_refused"][0]["key"],
        "cf33e24ff464a0af"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("sk_r"));
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("route demo: 1 of 3 refused (33.33%)"));
    // A bad flag: a clear error, exit 2.
    let bad = tollgate(
        &[
            "replay",
            "--config",
            two.to_str().unwrap(),
            "--log-format",
            "apache",
            log.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(bad.stderr).unwrap(),
        "tollgate: --log-format \"apache\": expected tollgate, nginx or envoy\n"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn check_config_refuses_the_store_urls_a_start_refuses_in_the_same_words() {
    let config = scratch_file(
        "check-store.toml",
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n",
    );
    let path = config.to_str().unwrap();
    for url in ["http://127.0.0.1:1", "redis//127.0.0.1:1", "/99x"] {
        let checked = tollgate(&["check-config", "--store", url, path], b"");
        let started = tollgate(&["serve", "--store", url, "--config", path], b"");
        assert_eq!(checked.status.code(), Some(2), "{url}");
        assert_eq!(started.status.code(), Some(2), "{url}");
        let expected = format!(
            "tollgate: {path}: store.url (or --store) is not a Redis URL: expected \
             redis://[user:password@]host:port[/db], \
             redis-cluster://[user:password@]host:port[,host:port...] (rediss:// or \
             rediss-cluster:// for TLS) or \
             redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[/db]\n"
        );
        assert_eq!(
            String::from_utf8(checked.stderr).unwrap(),
            expected,
            "{url}"
        );
        let start_error = String::from_utf8(started.stderr).unwrap();
        assert!(start_error.ends_with(&expected), "{url}: {start_error}");
    }
}

#[test]
fn rls_run_names_a_configuration_error_once() {
    let directory = std::env::temp_dir().join(format!("tollgate-rls-bad-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    std::fs::write(directory.join("x.yaml"), "domain: [\n").unwrap();
    let output = tollgate(
        &["rls", "run", "--config", directory.to_str().unwrap(), "-"],
        b"[]",
    );
    assert_eq!(output.status.code(), Some(2));
    let error = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        error.matches("error loading config file").count(),
        1,
        "{error}"
    );
    assert!(error.starts_with("tollgate: the initial configuration does not load: x.yaml: "));
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn replay_and_simulate_refuse_what_cannot_be_meant() {
    let directory = std::env::temp_dir().join(format!("tollgate-refuse-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let config = directory.join("g.toml");
    std::fs::write(&config, "").unwrap();
    let log = directory.join("access.log");
    std::fs::write(&log, "{\"time\":\"x\"}\n{\"time\":\"y\"}\n").unwrap();
    let (config, log) = (config.to_str().unwrap(), log.to_str().unwrap());
    let stderr = |output: std::process::Output| {
        assert_eq!(output.status.code(), Some(2));
        String::from_utf8(output.stderr).unwrap()
    };
    // Every line bad: the wrong format, said so.
    let all_bad = stderr(tollgate(
        &["replay", "--config", config, "--log-format", "nginx", log],
        b"",
    ));
    assert!(
        all_bad.starts_with("tollgate: none of the 2 lines could be read as --log-format nginx"),
        "{all_bad}"
    );
    let top = stderr(tollgate(
        &["replay", "--config", config, "--top", "0", log],
        b"",
    ));
    assert!(top.contains("--top"), "{top}");
    let simulate = |extra: &[&str]| {
        let mut arguments = vec!["simulate", "--pattern", "steady:1/s"];
        arguments.extend_from_slice(extra);
        stderr(tollgate(&arguments, b""))
    };
    assert_eq!(
        simulate(&["--policy", "fixed_window:1/1s", "--output", "x.gif"]),
        "tollgate: --output's extension .gif is not a format: end it in .json, .svg or .png, or \
         give --format\n"
    );
    assert_eq!(
        simulate(&[
            "--policy",
            "a=fixed_window:1/1s",
            "--policy",
            "a=sliding_log:1/1s"
        ]),
        "tollgate: --policy a: two policies of that name; name each as NAME=...\n"
    );
    let _ = std::fs::remove_dir_all(&directory);
}
