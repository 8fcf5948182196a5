//! A gateway started in process on a manual clock, with a real HTTP
//! client, its metrics read sample by sample; and the configurations the
//! gateway's tests share.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tollgate_core::ManualClock;
use tollgate_gateway::{Running, ServeConfig, ServeOptions};

use crate::exposition::Exposition;
use crate::loopback::Upstream;

/// The TOML of a gateway on free ports with the admin token `secret`,
/// followed by `rest`.
pub fn config(rest: &str) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"secret\"\ntoken_env = \"TOLLGATE_TEST_TOKEN_UNSET\"\n{rest}"
    )
}

/// A gateway started in process (`tollgate_gateway::start`), on a manual
/// clock, with a client to call it.
pub struct Gateway {
    /// The running gateway.
    pub running: Running,
    /// Its clock, which the test moves.
    pub clock: ManualClock,
    /// A client for its listeners.
    pub client: reqwest::Client,
    /// The names of its routes.
    pub routes: Vec<String>,
}

/// For each route name, how many gateways of this test process have had it
/// and whether a test has read its metrics. Every gateway in a process
/// reports to the process's one metrics recorder, so a route's counters are
/// one gateway's only while no other gateway has its name: a read fails when
/// another gateway had the name before, and a gateway fails to start with a
/// name whose metrics were read, whatever order the tests run in.
static ROUTE_NAMES: Mutex<BTreeMap<String, (usize, bool)>> = Mutex::new(BTreeMap::new());

impl Gateway {
    /// A gateway on `toml` (see [`config`]), its clock at `start_s` seconds.
    pub async fn start(toml: &str, start_s: u64) -> Gateway {
        let config = ServeConfig::from_toml_str(toml).unwrap();
        Gateway::start_with(config, None, start_s).await
    }

    /// A gateway on `config`, read from `path` (where a reload reads it
    /// again), its clock at `start_s` seconds.
    pub async fn start_with(
        config: ServeConfig,
        path: Option<std::path::PathBuf>,
        start_s: u64,
    ) -> Gateway {
        Gateway::start_with_store(config, path, start_s, |_, _| None).await
    }

    /// [`Gateway::start_with`] on the store `store` makes from the
    /// gateway's manual clock and configuration (`None`: the store the
    /// configuration names).
    pub async fn start_with_store(
        config: ServeConfig,
        path: Option<std::path::PathBuf>,
        start_s: u64,
        store: impl FnOnce(&ManualClock, &ServeConfig) -> Option<Arc<dyn tollgate_core::Store>>,
    ) -> Gateway {
        let clock = ManualClock::new(start_s * 1_000_000_000);
        let routes: Vec<String> = config
            .routes
            .iter()
            .map(|route| route.name().to_owned())
            .collect();
        register_route_names(&routes);
        let store = store(&clock, &config);
        let mut options = ServeOptions::new(config, path);
        options.clock = Arc::new(clock.clone());
        options.store = store;
        let running = tollgate_gateway::start(options).await.unwrap();
        Gateway {
            running,
            clock,
            client: reqwest::Client::new(),
            routes,
        }
    }

    /// [`Gateway::start_with_store`] on the Redis (or cluster) at `url`,
    /// under `prefix`: the store on the gateway's manual clock, calls
    /// timing out after 2 s, and a minimum TTL of an hour, since Redis
    /// expires keys on its own clock, which runs while the manual clock
    /// stands still.
    #[cfg(feature = "redis")]
    pub async fn start_on_redis(
        config: ServeConfig,
        start_s: u64,
        url: &str,
        prefix: &str,
    ) -> Gateway {
        Gateway::start_with_store(config, None, start_s, |clock, config| {
            let mut redis = tollgate_redis::RedisConfig::new(url);
            redis.prefix = prefix.to_owned();
            redis.timeout = std::time::Duration::from_secs(2);
            redis.time = tollgate_redis::TimeSource::Clock(Arc::new(clock.clone()));
            redis.minimum_ttl = std::time::Duration::from_secs(3600);
            Some(Arc::new(
                tollgate_redis::RedisStore::connect(redis, &config.limits).unwrap(),
            ))
        })
        .await
    }

    /// Waits (at most 10 s, in steps of 10 ms) until the gateway holds
    /// nothing: no concurrency slot, no request waiting, no turn booked and
    /// not yet served nor given back; panics naming what it still holds.
    /// The check at the end of every concurrency and delay test: no path
    /// leaks a slot or a reservation.
    pub async fn until_nothing_held(&self) {
        let held = || {
            (
                self.running.slots_held(),
                self.running.requests_waiting(),
                self.running.turns_booked(),
            )
        };
        for _ in 0..1000 {
            if held() == (0, 0, 0) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let (slots, waiting, turns) = held();
        panic!("held at the end: {slots} slots, {waiting} requests waiting, {turns} turns booked");
    }

    /// The URL of `path` on its proxy listener.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.running.address)
    }

    /// The URL of `path` on its admin listener.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.running.admin_address)
    }

    /// A GET of `path` with `Authorization: Bearer <key>`.
    pub async fn get(&self, path: &str, key: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .header("authorization", format!("Bearer {key}"))
            .send()
            .await
            .unwrap()
    }

    /// The status of a [`Gateway::get`].
    pub async fn status(&self, path: &str, key: &str) -> u16 {
        self.get(path, key).await.status().as_u16()
    }

    /// The Prometheus text of the admin listener's `/metrics`.
    pub async fn metrics(&self) -> String {
        let response = self.client.get(self.admin_url("/metrics")).send();
        response.await.unwrap().text().await.unwrap()
    }

    /// `/metrics` read into samples.
    pub async fn samples(&self) -> Exposition {
        Exposition::parse(&self.metrics().await)
    }

    /// The value of the sample `name` whose labels are exactly `labels`
    /// (`None` when there is none). The labels name a `route` of this
    /// gateway that no other gateway of this test process has had, so the
    /// value counts this gateway's requests only; otherwise this panics.
    pub async fn route_sample(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let route = labels
            .iter()
            .find(|(key, _)| *key == "route")
            .map(|(_, route)| *route)
            .expect("a route label");
        self.assert_route_of_its_own(route);
        self.samples().await.value(name, labels)
    }

    /// Whether any sample of `name` has the `route` label `route`, a route
    /// of this gateway's own (see [`Gateway::route_sample`]).
    pub async fn route_has_samples(&self, name: &str, route: &str) -> bool {
        self.assert_route_of_its_own(route);
        self.samples().await.any_with(name, "route", route)
    }

    fn assert_route_of_its_own(&self, route: &str) {
        assert!(
            self.routes.iter().any(|own| own == route),
            "{route} is not a route of this gateway: {:?}",
            self.routes
        );
        let mut names = ROUTE_NAMES.lock().unwrap();
        let (gateways, read) = names.get_mut(route).unwrap();
        *read = true;
        assert_eq!(
            *gateways, 1,
            "{gateways} gateways of this test process have a route named {route}, and they \
             share its metrics: give this test's route a name of its own"
        );
    }

    /// An admin call with the right token.
    pub async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> reqwest::Response {
        let mut request = self
            .client
            .request(method, self.admin_url(path))
            .header("authorization", "Bearer secret");
        if let Some(body) = body {
            request = request.body(body.to_string());
        }
        request.send().await.unwrap()
    }
}

/// Counts a gateway with `routes` in [`ROUTE_NAMES`].
fn register_route_names(routes: &[String]) {
    let mut names = ROUTE_NAMES.lock().unwrap();
    for name in routes {
        let (gateways, read) = names.entry(name.clone()).or_default();
        assert!(
            !*read,
            "another test reads the metrics of its route {name}: give this gateway's route a \
             name of its own"
        );
        *gateways += 1;
    }
}

/// The header `name` of `response`, as text.
pub fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().unwrap().to_owned())
}

/// Plans: default fixed window 5 per 60 s, tier `pro` sliding log 20 per 60 s;
/// `sk_internal` exempt; every path to `upstream`.
pub fn plans(upstream: &Upstream, extra: &str) -> String {
    config(&format!(
        "[limits]\nexempt_keys = [\"sk_internal\"]\n\
         [limits.default_policy]\nalgorithm = \"fixed_window\"\nlimit = 5\nwindow_s = 60\n\
         [limits.tiers.pro]\nalgorithm = \"sliding_log\"\nlimit = 20\nwindow_s = 60\n\
         [[routes]]\nname = \"all\"\nprefix = \"/\"\nupstream = \"http://{}\"\n{extra}",
        upstream.address
    ))
}

/// The status and head of a GET of `path` sent byte for byte (no client-side
/// cleaning of the path).
pub async fn raw_get(address: std::net::SocketAddr, path: &str, key: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    (response[9..12].parse().unwrap(), response)
}
