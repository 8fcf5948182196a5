//! The gRPC listener's worker threads (`TOLLGATE_WORKERS`): each a
//! single-threaded event loop of its own (thread names are read from
//! Linux's `/proc`); all of them deciding on one budget, and all of them ended
//! by a shutdown.

use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tollgate_rls::Rls;
use tollgate_test_support::rls;

const CONFIG: &str = "\
domain: rl
descriptors:
  - key: tenant
    rate_limit: {unit: day, requests_per_unit: 5}
";

/// The service on `CONFIG` with `workers` gRPC workers, and the directory
/// of its file.
#[cfg(target_os = "linux")]
async fn start(workers: usize) -> (Rls, tempfile::TempDir) {
    let mut arguments = rls::arguments();
    arguments.workers = Some(workers);
    rls::start_at_noon(CONFIG, arguments).await
}

/// One call for the tenant `acme`, one hit.
fn acme_request() -> RateLimitRequest {
    RateLimitRequest {
        domain: "rl".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "tenant".to_owned(),
                value: "acme".to_owned(),
            }],
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    }
}

/// Held by each test that starts a service: they count the process's worker
/// threads, so they run one at a time.
static ONE_SERVICE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits until no thread of this process serves gRPC: a joined thread
/// leaves `/proc` a moment after its join returns. The names still there
/// after a second.
#[cfg(target_os = "linux")]
async fn no_worker_threads_left() -> Vec<String> {
    for _ in 0..100 {
        if worker_threads().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    worker_threads()
}

/// The names of this process's threads that serve gRPC.
#[cfg(target_os = "linux")]
fn worker_threads() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim_end().to_owned())
        .filter(|name| name.starts_with("rls-worker-"))
        .collect();
    names.sort();
    names
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_workers_share_one_budget_and_shutdown_ends_them() {
    let _alone = ONE_SERVICE_AT_A_TIME.lock().await;
    let (rls, _directory) = start(3).await;
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    let request = acme_request();
    // Six connections, all held open, seven calls in turn over them: the
    // budget of 5 a day is one (which worker decides each call is proven by
    // `three_workers_decide_for_one_key`).
    let mut clients = Vec::new();
    for _ in 0..6 {
        clients.push(
            RateLimitServiceClient::connect(address.clone())
                .await
                .unwrap(),
        );
    }
    let mut codes = Vec::new();
    for call in 0..7 {
        let response = clients[call % 6]
            .should_rate_limit(request.clone())
            .await
            .unwrap()
            .into_inner();
        codes.push(response.overall_code);
    }
    // 1 is OK, 2 OVER_LIMIT.
    assert_eq!(codes, [1, 1, 1, 1, 1, 2, 2]);
    drop(clients);
    // A thread names itself as it starts; by now each has.
    assert_eq!(
        worker_threads(),
        ["rls-worker-0", "rls-worker-1", "rls-worker-2"]
    );
    rls::stop(rls).await;
    assert_eq!(no_worker_threads_left().await, Vec::<String>::new());
}

/// A health watch stream never ends on its own: the graceful shutdown waits
/// for it through its grace period (here 200 ms, `SHUTDOWN_GRACE`'s 10 s in
/// the service), then closes it and ends the workers.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_shutdown_closes_what_is_still_open_after_the_grace_period() {
    let _alone = ONE_SERVICE_AT_A_TIME.lock().await;
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_client::HealthClient;
    let (rls, _directory) = start(2).await;
    let address = format!("http://{}", rls.server().grpc_address().unwrap());
    let channel = tonic::transport::Channel::from_shared(address)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: "ratelimit".to_owned(),
        })
        .await
        .unwrap()
        .into_inner();
    // 1 is SERVING: the stream is open on a worker.
    assert_eq!(watch.message().await.unwrap().unwrap().status, 1);
    let grace = Duration::from_millis(200);
    tokio::time::timeout(grace + Duration::from_secs(20), rls.shutdown_within(grace))
        .await
        .expect("the shutdown ends");
    assert_eq!(no_worker_threads_left().await, Vec::<String>::new());
    // The stream reported NOT_SERVING (2) as the shutdown began, then was
    // closed.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(message)) = watch.message().await {
            rest.push(message.status);
        }
    });
    closed.await.expect("the stream is closed");
    assert_eq!(rest, [2]);
}

#[test]
fn a_worker_count_of_zero_or_past_1024_is_refused() {
    let refused = tollgate_rls::RlsArguments::try_parse_from(["tollgate", "--workers", "0"]);
    assert!(refused.is_err());
    let past = tollgate_rls::RlsArguments::try_parse_from(["tollgate", "--workers", "1025"]);
    assert!(past.is_err());
    let most = tollgate_rls::RlsArguments::try_parse_from(["tollgate", "--workers", "1024"]);
    assert_eq!(most.unwrap().workers, Some(1024));
    let taken = tollgate_rls::RlsArguments::try_parse_from(["tollgate", "--workers", "4"]).unwrap();
    assert_eq!(taken.workers, Some(4));
    assert_eq!(taken.worker_count(), 4);
}

/// The rate limit service, recording the name of the thread that decides
/// each call.
struct Recording {
    service: tollgate_rls::RateLimitService,
    threads: std::sync::Mutex<Vec<String>>,
}

impl tollgate_rls::server::Decide for Recording {
    fn decide<'a>(
        &'a self,
        request: &'a tollgate_rls::proto::RateLimitRequest,
    ) -> tollgate_rls::server::DecideFuture<'a> {
        let name = std::thread::current().name().unwrap_or_default().to_owned();
        self.threads.lock().unwrap().push(name);
        self.service.decide(request)
    }
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn three_workers_decide_for_one_key() {
    use std::sync::Arc;
    use tollgate_core::{LimiterConfig, ManualClock, MemoryStore};
    use tollgate_rls::server::{DebugPages, Health, ListenAddresses, Listeners};
    use tollgate_rls::{LoaderOptions, RateLimitConfig, RateLimitService, ServiceSettings};
    let _alone = ONE_SERVICE_AT_A_TIME.lock().await;
    // Noon: no day's window ends during the test.
    let clock = Arc::new(ManualClock::new(4_102_488_000_000_000_000));
    let store = Arc::new(MemoryStore::new(&LimiterConfig::default(), clock.clone()).unwrap());
    let config =
        RateLimitConfig::from_sources(&[("rl.yaml", CONFIG)], &LoaderOptions::default()).unwrap();
    let recording = Arc::new(Recording {
        service: RateLimitService::new(store, config, ServiceSettings::default(), clock),
        threads: std::sync::Mutex::new(Vec::new()),
    });
    let listeners = Listeners::bind(&ListenAddresses {
        grpc: "127.0.0.1:0".to_owned(),
        http: "127.0.0.1:0".to_owned(),
        debug: None,
    })
    .await
    .unwrap();
    let empty = || Arc::new(String::new) as Arc<dyn Fn() -> String + Send + Sync>;
    let pages = DebugPages {
        stats: empty(),
        config: empty(),
        settings: empty(),
    };
    let server = listeners
        .serve(3, recording.clone(), Health::serving().await, pages)
        .unwrap();
    let address = format!("http://{}", server.grpc_address().unwrap());
    let request = acme_request();
    // Three connections held open: each new one goes to the worker with
    // the fewest open, so one each (0, 1, 2). Seven calls in turn over
    // them: 1 is OK, 2 OVER_LIMIT; the budget of 5 a day is one.
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            RateLimitServiceClient::connect(address.clone())
                .await
                .unwrap(),
        );
    }
    let mut codes = Vec::new();
    for call in 0..7 {
        let response = clients[call % 3]
            .should_rate_limit(request.clone())
            .await
            .unwrap()
            .into_inner();
        codes.push(response.overall_code);
    }
    assert_eq!(codes, [1, 1, 1, 1, 1, 2, 2]);
    // Each call was decided on its connection's worker thread.
    assert_eq!(
        *recording.threads.lock().unwrap(),
        [
            "rls-worker-0",
            "rls-worker-1",
            "rls-worker-2",
            "rls-worker-0",
            "rls-worker-1",
            "rls-worker-2",
            "rls-worker-0"
        ]
    );
    drop(clients);
    server.shutdown_within(Duration::from_millis(200)).await;
    assert_eq!(no_worker_threads_left().await, Vec::<String>::new());
}
