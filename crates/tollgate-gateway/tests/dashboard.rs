//! The dashboard (`GET /dashboard` on the admin listener, issue #27) in a
//! real browser: Debian's chromium, headless, driven over WebDriver by
//! Debian's chromium-driver (fantoccini). After known traffic (5 requests
//! of `sk_a` under a plan of 3 a minute: 3 allowed, 2 rejected; a shadow
//! refusal and a delayed request of `sk_b`), it signs in with the admin
//! token, finds the numbers `/admin/stats` gives, the plan in force, the
//! decisions by outcome, tier and route, updated without a reload after
//! more traffic, the top key and a simulation drawn, with no
//! error in the browser's console; keeps a screenshot
//! (`target/tmp/dashboard.png`); and after signing out a wrong token shows
//! the sign-in form again. Skipped without chromedriver on the `PATH`
//! unless `CI=true` (then it fails).

use std::process::Stdio;
use std::time::Duration;

use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use tollgate_test_support::gateway::{Gateway, config};
use tollgate_test_support::loopback::{Upstream, free_port};

/// chromedriver's `POST /session/{id}/se/log` for the browser's console.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.to_owned()))
    }
}

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: std::process::Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn driver() -> Driver {
    let port = free_port();
    let child = std::process::Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver runs: apt-get install chromium chromium-driver");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    for _ in 0..100 {
        if reqwest::get(format!("{}/status", driver.url)).await.is_ok() {
            return driver;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not answer on port {port}");
}

/// A headless chromium session, its console logged.
async fn browser(driver: &Driver, profile: &std::path::Path) -> Client {
    let mut capabilities = Capabilities::new();
    capabilities.insert("browserName".to_owned(), json!("chrome"));
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--window-size=1280,1100",
                format!("--user-data-dir={}", profile.display()),
            ],
        }),
    );
    capabilities.insert("goog:loggingPrefs".to_owned(), json!({"browser": "ALL"}));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("a chromium session")
}

/// The text of the element `id`, its white space made single spaces, once
/// `ready` holds for it (at most 10 s).
async fn text_when(client: &Client, id: &str, ready: impl Fn(&str) -> bool) -> String {
    let mut last = String::new();
    for _ in 0..100 {
        if let Ok(element) = client.find(Locator::Id(id)).await
            && let Ok(text) = element.text().await
        {
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if ready(&text) {
                return text;
            }
            last = text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("#{id} shows {last:?}");
}

/// The six cells after `row` (a route, or a route and a tier) in a table's
/// text: three rates per second ("-" before a second poll) then three
/// counts.
fn cells(text: &str, row: &str) -> Option<Vec<String>> {
    let (_, after) = text.split_once(&format!("{row} "))?;
    let cells: Vec<String> = after.split(' ').take(6).map(str::to_owned).collect();
    (cells.len() == 6).then_some(cells)
}

/// Types `token` into the sign-in form and sends it.
async fn sign_in(client: &Client, token: &str) {
    let field = client.find(Locator::Id("token")).await.unwrap();
    field.send_keys(token).await.unwrap();
    let button = client.find(Locator::Id("login-button")).await.unwrap();
    button.click().await.unwrap();
}

async fn visible(client: &Client, id: &str) -> bool {
    let script = format!("return !document.getElementById('{id}').hidden;");
    client.execute(&script, vec![]).await.unwrap() == json!(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_chromedriver),
    ignore = "install Debian's chromium and chromium-driver (apt-get install chromium chromium-driver) to run"
)]
async fn the_dashboard_shows_the_gateways_numbers_in_a_real_browser() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
             [[routes]]\nname = \"demo\"\nprefix = \"/\"\nupstream = \"http://{0}\"\n\
             [[routes]]\nname = \"dash_shadow\"\nprefix = \"/shadow\"\nupstream = \"http://{0}\"\n\
             key = \"ip\"\nrpm = 1\nburst = 1\nshadow = true\n\
             [[routes]]\nname = \"dash_wait\"\nprefix = \"/wait\"\nupstream = \"http://{0}\"\n\
             key = \"ip\"\nrpm = 60\nburst = 1\ndelay = \"2s\"\n",
            upstream.address
        )),
        600,
    )
    .await;
    for _ in 0..5 {
        gateway.status("/hello", "sk_a").await;
    }
    // Two more outcomes: a shadow refusal (sk_b's second on a budget of one,
    // let through) and a delayed request (sk_d's second on one a second
    // waits its turn, 1 s).
    for (path, key) in [
        ("/shadow", "sk_b"),
        ("/shadow", "sk_b"),
        ("/wait", "sk_d"),
        ("/wait", "sk_d"),
    ] {
        assert_eq!(gateway.status(path, key).await, 200);
    }
    let stats: Value = gateway
        .admin(reqwest::Method::GET, "/admin/stats", None)
        .await
        .json()
        .await
        .unwrap();
    // The limiter's own counts, one per limit decided: sk_a's plan 3 and 2;
    // sk_b's and sk_d's plans 2 allowed each; the shadow budget 1 and 1;
    // the waiting budget 1 allowed at once, 1 whose turn was ahead (not
    // allowed then: counted rejected by the engine, though it then waited
    // and passed). Keys: the three plans' and the two budgets' (by IP).
    assert_eq!(
        stats,
        json!({"tracked_keys": 5, "allowed": 9, "rejected": 4})
    );
    let driver = driver().await;
    let profile = tempfile::tempdir().unwrap();
    let client = browser(&driver, profile.path()).await;
    client.goto(&gateway.admin_url("/dashboard")).await.unwrap();
    assert!(visible(&client, "login").await && !visible(&client, "dashboard").await);
    sign_in(&client, "secret").await;
    // The numbers /admin/stats gives.
    let number = |value: &Value| value.to_string();
    text_when(&client, "stats-allowed", |text| {
        text == number(&stats["allowed"])
    })
    .await;
    assert_eq!(
        text_when(&client, "stats-rejected", |text| text != "-").await,
        number(&stats["rejected"])
    );
    assert_eq!(
        text_when(&client, "stats-tracked", |text| text != "-").await,
        number(&stats["tracked_keys"])
    );
    assert_eq!(
        text_when(&client, "store-health", |text| text != "-").await,
        "ready"
    );
    // The plan in force, the decisions by route and tier, the top key (sk_a's
    // fingerprint, Python's hashlib.sha256(b"plan\0sk_a").hexdigest()[:16]).
    let summary = text_when(&client, "summary", |text| !text.is_empty()).await;
    assert!(
        summary.contains("default policy: fixed_window 3 per 60 s"),
        "{summary}"
    );
    // By route and tier, each row's rates then counts of allowed, rejected
    // and delayed: sk_a's 3 and 2 on demo; sk_d's 2, one delayed, on
    // dash_wait; on dash_shadow sk_b's 1 and 1 (a request's decision is
    // rejected when a limit refused it, shadow mode letting it through).
    let counts =
        |text: &str, row: &str| cells(text, row).map(|cells| cells[cells.len() - 3..].join(" "));
    let rates = text_when(&client, "rates", |text| text.contains("demo")).await;
    assert_eq!(
        counts(&rates, "demo default").as_deref(),
        Some("3 2 0"),
        "{rates}"
    );
    assert_eq!(
        counts(&rates, "dash_wait default").as_deref(),
        Some("2 0 1"),
        "{rates}"
    );
    assert_eq!(
        counts(&rates, "dash_shadow default").as_deref(),
        Some("1 1 0"),
        "{rates}"
    );
    // By route, the outcomes without a tier (shadow refused, in-flight
    // refused, unavailable): dash_shadow's one shadow refusal.
    let outcomes = text_when(&client, "outcomes", |text| !text.is_empty()).await;
    assert_eq!(
        counts(&outcomes, "dash_shadow").as_deref(),
        Some("1 0 0"),
        "{outcomes}"
    );
    // Live: two more requests, seen without a reload, with a rate per
    // second once two polls have passed.
    for _ in 0..2 {
        gateway.status("/hello", "sk_c").await;
    }
    text_when(&client, "stats-allowed", |text| text == "11").await;
    text_when(&client, "rates", |text| {
        cells(text, "demo default").is_some_and(|cells| {
            cells[3] == "5" && cells[0].parse::<f64>().is_ok_and(|rate| rate >= 0.0)
        })
    })
    .await;
    let refused = text_when(&client, "top-refused", |text| {
        text != "none" && !text.is_empty()
    })
    .await;
    assert!(
        refused.starts_with("19b10fb0f2540938 2 default demo"),
        "{refused}"
    );
    // A simulation drawn by the engine, through the admin API.
    client
        .find(Locator::Css("#simulate-form button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let drawn = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#simulate-picture svg"))
        .await;
    assert!(drawn.is_ok(), "no picture drawn");
    // No error in the console, the token in no URL.
    let log = client.issue_cmd(BrowserLog).await.unwrap();
    let errors: Vec<&Value> = log
        .as_array()
        .map(|entries| {
            entries
                .iter()
                .filter(|entry| entry["level"] == "SEVERE")
                .collect()
        })
        .unwrap_or_default();
    assert!(errors.is_empty(), "console errors: {errors:?}");
    assert!(
        !client
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("secret")
    );
    let screenshot = client.screenshot().await.unwrap();
    let artifact = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&artifact, screenshot).unwrap();
    // Signed out, a wrong token shows the sign-in form again.
    client
        .find(Locator::Id("logout"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(visible(&client, "login").await);
    sign_in(&client, "not-the-token").await;
    let refusal = text_when(&client, "login-error", |text| !text.is_empty()).await;
    assert_eq!(refusal, "that token was refused");
    assert!(visible(&client, "login").await && !visible(&client, "dashboard").await);
    client.close().await.unwrap();
}
