//! Waiting instead of refusing (a route's `delay`, issue #26) in memory:
//! the scenarios of `delay_scenarios/`, the `tollgate_delayed_total`
//! counter, and the settings refused at load. (A delayed request's access
//! log line, `wait_us` and headers: `access_log.rs`.)

mod delay_scenarios;

use tollgate_gateway::ServeConfig;
use tollgate_test_support::gateway::Gateway;
use tollgate_test_support::loopback::Upstream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_their_turn_in_memory() {
    let upstream = Upstream::start().await;
    let config = delay_scenarios::routes(&upstream, "dl_memory", "");
    let gateway = Gateway::start(&config, 0).await;
    delay_scenarios::twelve_requests_queue_at_the_rate(&gateway, &upstream).await;
    delay_scenarios::a_client_gone_while_it_waits_gives_its_turn_back(&gateway, &upstream).await;
    delay_scenarios::at_most_max_waiting_requests_wait(&gateway, &upstream).await;
    // Counted once served after a wait: ten of the twelve; one of /gone
    // (the one that left before its turn is not); two of /full.
    let delayed = |route: &'static str| {
        let gateway = &gateway;
        async move {
            gateway
                .route_sample(
                    "tollgate_delayed_total",
                    &[("tier", "keyless"), ("route", route)],
                )
                .await
        }
    };
    assert_eq!(delayed("dl_memory_queue").await, Some(10.0));
    assert_eq!(delayed("dl_memory_gone").await, Some(1.0));
    assert_eq!(delayed("dl_memory_full").await, Some(2.0));
}

/// The decision endpoint (`[forward_auth]`) waits as proxying does, before
/// it answers: on one every 3 s with a burst of 1 and 4 s of delay, of
/// three decisions asked at once for one client, one is allowed at once,
/// one after its wait (3 s), and one (6 s away) refused at once with
/// `Retry-After: 2`. Nothing is forwarded; nothing is held at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_endpoint_waits_before_it_answers() {
    let upstream = Upstream::start().await;
    let config = tollgate_test_support::gateway::config(&format!(
        "[client_ip]\ntrusted_proxies = [\"127.0.0.1/32\"]\n\
         [forward_auth]\npath = \"/_tollgate/decide\"\n\
         [[routes]]\nname = \"dl_decide\"\nprefix = \"/decide\"\nupstream = \"http://{}\"\n\
         api_key = \"none\"\nkey = \"ip\"\nrpm = 20\nburst = 1\ndelay = \"4s\"\n",
        upstream.address
    ));
    let gateway = Gateway::start(&config, 0).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let ask = gateway
            .client
            .get(gateway.url("/_tollgate/decide"))
            .header("x-forwarded-uri", "/decide/x")
            .header("x-forwarded-for", "192.0.2.7")
            .send();
        let sender = sender.clone();
        tokio::spawn(async move {
            let answer = ask.await.unwrap();
            let retry_after = tollgate_test_support::gateway::header(&answer, "retry-after");
            sender
                .send((answer.status().as_u16(), retry_after))
                .unwrap();
        });
    }
    drop(sender);
    let mut answers = Vec::new();
    while let Some(answer) = receiver.recv().await {
        answers.push(answer);
    }
    // In the order answered: the two at once (either order), then the one
    // that waited.
    let mut first_two = answers[..2].to_vec();
    first_two.sort();
    assert_eq!(first_two, [(200, None), (429, Some("2".to_owned()))]);
    assert_eq!(answers[2], (200, None));
    assert_eq!(upstream.requests(), 0);
    let delayed = gateway
        .route_sample(
            "tollgate_delayed_total",
            &[("tier", "keyless"), ("route", "dl_decide")],
        )
        .await;
    assert_eq!(delayed, Some(1.0));
    gateway.until_nothing_held().await;
}

#[test]
fn bad_delays_are_refused_at_load() {
    let refused = |settings: &str| {
        ServeConfig::from_toml_str(&format!(
            "[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\nrpm = 60\n{settings}"
        ))
        .unwrap_err()
        .to_string()
    };
    assert_eq!(
        refused("delay = \"2h\""),
        "route r (/r): delay must be at most 1h, how long a request may wait for its turn"
    );
    assert_eq!(
        refused("max_waiting = 5"),
        "route r (/r): max_waiting applies to a delay, the route's or a tier's in \
         limits.tier_defaults, and neither is set: set one too"
    );
    assert_eq!(
        refused("delay = \"1s\"\nmax_waiting = 0"),
        "route r (/r): max_waiting must be 1 to 4294967296 (2^32), the requests of one key \
         waiting at once"
    );
    // Shadow mode observes a limit; a delay acts on it.
    assert_eq!(
        refused("delay = \"1s\"\nshadow = true"),
        "route r (/r): delay makes requests wait for the route's budget, and shadow only \
         observes it: remove one"
    );
    let everywhere = ServeConfig::from_toml_str(
        "[refusal]\nshadow = true\n[[routes]]\nname = \"r\"\nprefix = \"/r\"\n\
         upstream = \"http://h:1\"\nrpm = 60\ndelay = \"1s\"",
    )
    .unwrap_err()
    .to_string();
    assert!(
        everywhere.ends_with(
            "routes.r.delay makes requests wait for their limits, and refusal.shadow only \
             observes them: remove one"
        ),
        "{everywhere}"
    );
    let refused_whole = |toml: &str| ServeConfig::from_toml_str(toml).unwrap_err().to_string();
    let route = "[[routes]]\nname = \"r\"\nprefix = \"/r\"\nupstream = \"http://h:1\"\n\
                 rpm = 60\ndelay = \"61s\"\n";
    let trial = refused_whole(&format!(
        "[limits.tiers.trial]\nalgorithm = \"fixed_window\"\nlimit = 1\nwindow_s = 60\n\
         [refusal]\nshadow_tiers = [\"trial\"]\n{route}"
    ));
    assert!(
        trial.ends_with(
            "routes.r.delay makes requests wait for their limits, and refusal.shadow_tiers \
             only observes them: remove one"
        ),
        "{trial}"
    );
    // A waiting request's state outlives its wait.
    let idle = refused_whole(&format!("[limits]\nidle_eviction_s = 60\n{route}"));
    assert!(
        idle.ends_with(
            "routes.r.delay (1m 1s) must be at most limits.idle_eviction_s (60 s): a key \
             idle that long loses the turns its requests wait for"
        ),
        "{idle}"
    );
    let negative = refused("delay = \"-1s\"");
    assert!(
        negative.contains("delay") && negative.contains("\"-1s\" is negative"),
        "{negative}"
    );
    let unreadable = refused("delay = \"soon\"");
    assert!(unreadable.contains("delay"), "{unreadable}");
}
