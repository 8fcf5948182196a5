//! `[keys]` (issue #26): a file of the keys that exist, and what another
//! key gets: refused before any budget is used, limited as a keyless
//! request (anonymous), or taken as it comes (the default). The file is read
//! again on reload, and one that cannot be read keeps the list in force.
//! The decision endpoint applies the same rule. A real upstream and HTTP
//! client, the gateway in process on a manual clock.

use std::path::{Path, PathBuf};

use tollgate_test_support::gateway::{Gateway, config, header};
use tollgate_test_support::loopback::Upstream;

/// `printf %s sk_by_digest | sha256sum`, computed outside tollgate.
const SK_BY_DIGEST: &str = "4fca745ec34f70cda7a3ffe262aef02293a2763558fd1d0756b043102acfa4ea";

/// A directory of this test's own, holding the configuration and the keys.
fn directory(test: &str) -> PathBuf {
    let directory = std::env::temp_dir().join(format!("tollgate-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    directory
}

/// A gateway whose configuration lists `keys` in `directory` and says
/// `unknown`, every path on route `route` to `upstream`, `rest` after.
async fn gateway(
    directory: &Path,
    keys: &str,
    unknown: &str,
    route: &str,
    upstream: &Upstream,
    rest: &str,
) -> Gateway {
    let known = directory.join("keys.txt");
    std::fs::write(&known, keys).unwrap();
    let toml = config(&format!(
        "[keys]\nknown = \"{}\"\nunknown = \"{unknown}\"\n\
         [limits]\nexempt_keys = [\"sk_internal\"]\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [host]\nip = {{ rpm = 60, burst = 3 }}\n\
         [forward_auth]\npath = \"/_decide\"\n\
         [[routes]]\nname = \"{route}\"\nprefix = \"/\"\nupstream = \"http://{}\"\n{rest}",
        known.display(),
        upstream.address
    ));
    let path = directory.join("gateway.toml");
    std::fs::write(&path, &toml).unwrap();
    let config = tollgate_gateway::ServeConfig::from_toml_str(&toml).unwrap();
    Gateway::start_with(config, Some(path), 0).await
}

#[tokio::test]
async fn unknown_keys_are_refused_before_any_budget_is_used() {
    let upstream = Upstream::start().await;
    let directory = directory("known-refuse");
    let keys = format!("# the keys of the API\nsk_listed\nsha256:{SK_BY_DIGEST}\n");
    let gateway = gateway(&directory, &keys, "refuse", "kk_refuse", &upstream, "").await;
    assert_eq!(gateway.status("/", "sk_listed").await, 200);
    assert_eq!(gateway.status("/", "sk_by_digest").await, 200);
    assert_eq!(
        gateway.status("/", "sk_internal").await,
        200,
        "exempt keys are known"
    );
    let refused = gateway.get("/", "sk_invented").await;
    assert_eq!(refused.status(), 401);
    assert!(header(&refused, "ratelimit").is_none());
    let problem: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        "this API key is not known (keys.unknown = \"refuse\")"
    );
    // The decision endpoint answers the same.
    let decided = gateway
        .client
        .get(gateway.url("/_decide"))
        .header("x-forwarded-uri", "/orders")
        .header("authorization", "Bearer sk_invented")
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 401);
    assert_eq!(upstream.requests(), 3);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn invented_keys_share_one_budget_per_client_ip_when_anonymous() {
    let upstream = Upstream::start().await;
    let directory = directory("known-anonymous");
    let gateway = gateway(
        &directory,
        "sk_listed\n",
        "anonymous",
        "kk_anon",
        &upstream,
        "",
    )
    .await;
    let listed = gateway.get("/", "sk_listed").await;
    assert_eq!(
        header(&listed, "ratelimit-policy").as_deref(),
        Some("\"default\";q=5;w=60, \"kk_anon\";q=3;w=3")
    );
    // Each invented key would have had 5; anonymous, they share [host] ip's
    // 3 (with every request from this IP: the listed key's took one).
    let anonymous = gateway.get("/", "sk_invented_1").await;
    assert_eq!(anonymous.status(), 200);
    assert_eq!(
        header(&anonymous, "ratelimit-policy").as_deref(),
        Some("\"kk_anon\";q=3;w=3")
    );
    assert_eq!(gateway.status("/", "sk_invented_2").await, 200);
    assert_eq!(gateway.status("/", "sk_invented_3").await, 429);
    let keyless = gateway
        .route_sample(
            "api_rate_limit_exceeded_total",
            &[
                ("plugin", "tollgate"),
                ("route", "kk_anon"),
                ("key_kind", "keyless"),
            ],
        )
        .await;
    assert_eq!(keyless, Some(1.0));
    // The decision endpoint: the same shared budget, now spent. (Its
    // refusals answer with its own refused_status, 429 by default.)
    let decided = gateway
        .client
        .get(gateway.url("/_decide"))
        .header("x-forwarded-uri", "/orders")
        .header("authorization", "Bearer sk_invented_4")
        .send()
        .await
        .unwrap();
    assert_eq!(decided.status(), 429);
    // A listed key keeps its own plan (the IP budget it shares is spent).
    assert_eq!(gateway.status("/", "sk_listed").await, 429);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn a_reload_reads_the_list_again_and_keeps_it_when_the_file_is_gone() {
    let upstream = Upstream::start().await;
    let directory = directory("known-reload");
    let gateway = gateway(&directory, "sk_old\n", "refuse", "kk_reload", &upstream, "").await;
    assert_eq!(gateway.status("/", "sk_new").await, 401);
    std::fs::write(directory.join("keys.txt"), "sk_old\nsk_new\n").unwrap();
    gateway.running.reload().unwrap();
    assert_eq!(gateway.status("/", "sk_new").await, 200);
    // A file that cannot be read: the reload goes on, the list stays.
    std::fs::remove_file(directory.join("keys.txt")).unwrap();
    gateway.running.reload().unwrap();
    assert_eq!(gateway.status("/", "sk_new").await, 200);
    assert_eq!(gateway.status("/", "sk_other").await, 401);
    // A malformed one likewise (its line is logged, never its keys).
    std::fs::write(directory.join("keys.txt"), "sk_old\nsha256:zz\n").unwrap();
    gateway.running.reload().unwrap();
    assert_eq!(gateway.status("/", "sk_new").await, 200);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn without_a_list_every_key_has_a_budget_of_its_own() {
    // The default, now documented: 30 invented keys, 30 fresh budgets.
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(
        &config(&format!(
            "[limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
             [[routes]]\nname = \"kk_none\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
            upstream.address
        )),
        0,
    )
    .await;
    for index in 0..30 {
        assert_eq!(
            gateway.status("/", &format!("sk_invented_{index}")).await,
            200
        );
    }
    assert_eq!(gateway.status("/", "sk_invented_0").await, 429);
}

#[tokio::test]
async fn a_start_with_a_bad_list_names_the_line() {
    let directory = directory("known-bad");
    let known = directory.join("keys.txt");
    std::fs::write(&known, "sk_secret\nsha256:abc\n").unwrap();
    let toml = config(&format!(
        "[keys]\nknown = \"{}\"\nunknown = \"refuse\"\n",
        known.display()
    ));
    let options = tollgate_gateway::ServeOptions::new(
        tollgate_gateway::ServeConfig::from_toml_str(&toml).unwrap(),
        None,
    );
    let error = tollgate_gateway::start(options)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("line 2 of the file of known keys is not a digest"),
        "{error}"
    );
    assert!(!error.contains("sk_secret"), "{error}");
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn an_anonymous_request_is_held_per_ip_whatever_it_sends() {
    // The route's own budget is keyed by a header; an invented key that
    // also varies the header still shares its client IP's one budget.
    let upstream = Upstream::start().await;
    let directory = directory("known-header");
    let rest = "rpm = 60\nburst = 2\nkey = \"header:x-client-id\"\n";
    let gateway = gateway(
        &directory,
        "sk_listed\n",
        "anonymous",
        "kk_header",
        &upstream,
        rest,
    )
    .await;
    let send = |key: &'static str, client: &'static str| {
        gateway
            .client
            .get(gateway.url("/x"))
            .header("authorization", format!("Bearer {key}"))
            .header("x-client-id", client)
            .send()
    };
    assert_eq!(send("sk_invented_1", "c1").await.unwrap().status(), 200);
    assert_eq!(send("sk_invented_2", "c2").await.unwrap().status(), 200);
    assert_eq!(send("sk_invented_3", "c3").await.unwrap().status(), 429);
    // A listed key is keyed by its header, as the route says.
    assert_eq!(send("sk_listed", "c4").await.unwrap().status(), 200);
    std::fs::remove_dir_all(&directory).unwrap();
}

#[tokio::test]
async fn a_reload_that_adds_a_list_it_cannot_read_changes_nothing() {
    let upstream = Upstream::start().await;
    let directory = directory("known-added");
    let route = format!(
        "[[routes]]\nname = \"kk_added\"\nprefix = \"/\"\nupstream = \"http://{}\"\n",
        upstream.address
    );
    let path = directory.join("gateway.toml");
    std::fs::write(&path, config(&route)).unwrap();
    let config_in_force = tollgate_gateway::ServeConfig::from_file(&path).unwrap();
    let gateway = Gateway::start_with(config_in_force, Some(path.clone()), 0).await;
    let missing = directory.join("missing.txt");
    std::fs::write(
        &path,
        config(&format!(
            "[keys]\nknown = \"{}\"\nunknown = \"refuse\"\n{route}",
            missing.display()
        )),
    )
    .unwrap();
    let error = gateway.running.reload().unwrap_err().to_string();
    assert!(error.contains("missing.txt"), "{error}");
    assert_eq!(gateway.status("/", "sk_any").await, 200);
    std::fs::remove_dir_all(&directory).unwrap();
}
