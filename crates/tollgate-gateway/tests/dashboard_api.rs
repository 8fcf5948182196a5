//! The admin calls the dashboard uses besides the API's others:
//! `GET /admin/summary` (what is in force, and the warnings, as
//! `check-config` prints them) and `POST /admin/simulate` (an SVG by the
//! engine; `duration` 60 s by default), over real HTTP.

use serde_json::json;
use tollgate_test_support::gateway::{Gateway, config};

#[tokio::test]
async fn the_summary_and_a_simulation_through_the_admin_api() {
    let gateway = Gateway::start(
        &config(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 3\nwindow_s = 60\n\
             [access_log]\nenabled = true\npath = \"/dev/null\"\n\
             [store]\nkey_secret_env = \"TOLLGATE_TEST_SECRET_UNSET\"\n",
        ),
        0,
    )
    .await;
    let summary: serde_json::Value = gateway
        .admin(reqwest::Method::GET, "/admin/summary", None)
        .await
        .json()
        .await
        .unwrap();
    let lines = summary["lines"].as_array().unwrap();
    assert!(
        lines.contains(&json!("default policy: fixed_window 3 per 60 s")),
        "{summary}"
    );
    assert_eq!(
        summary["warnings"],
        json!([
            "no key secret ($TOLLGATE_TEST_SECRET_UNSET): the access log's key fingerprints are \
             plain SHA-256 hashes of API keys, so anyone who can read the log can confirm a \
             guessed key"
        ])
    );
    // No duration: 60 s, so 60 requests of a steady 1 a second, each
    // allowed by 5 a second.
    let picture = gateway
        .admin(
            reqwest::Method::POST,
            "/admin/simulate",
            Some(json!({"policies": ["fixed_window:5/1s"], "pattern": "steady:1/s"})),
        )
        .await;
    assert_eq!(picture.status(), 200);
    assert_eq!(
        picture.headers()["content-type"].to_str().unwrap(),
        "image/svg+xml"
    );
    let svg = picture.text().await.unwrap();
    assert!(
        svg.contains("fixed_window:5/1s: 60 allowed, 0 refused of 60"),
        "{}",
        &svg[..200]
    );
    let refused = gateway
        .admin(
            reqwest::Method::POST,
            "/admin/simulate",
            Some(json!({"policies": ["leaky:5/1s"], "pattern": "steady:1/s"})),
        )
        .await;
    assert_eq!(refused.status(), 400);
}
