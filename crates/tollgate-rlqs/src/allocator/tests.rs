use std::collections::HashMap;

use tollgate_rls::LoaderOptions;

use super::*;

const SECOND: u64 = 1_000_000_000;

const YAML: &str = "
domain: edge
descriptors:
  - key: name
    value: shared
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: name
    value: closed
    rate_limit: {unit: second, requests_per_unit: 0}
";

fn config(yaml: &str) -> Option<Arc<RateLimitConfig>> {
    Some(Arc::new(
        RateLimitConfig::from_sources(&[("edge.yaml", yaml)], &LoaderOptions::default()).unwrap(),
    ))
}

fn key(value: &str) -> BucketKey {
    BucketKey::from_map(&HashMap::from([("name".to_owned(), value.to_owned())])).unwrap()
}

fn usage(value: &str, allowed: u64, denied: u64) -> Usage {
    (key(value), BucketReport { allowed, denied })
}

fn bucket(max_tokens: u32, tokens_per_fill: u32) -> QuotaAssignment {
    QuotaAssignment::TokenBucket {
        max_tokens,
        tokens_per_fill,
        fill_interval_s: 1,
    }
}

fn answered(
    allocator: &mut Allocator,
    stream: u64,
    usages: &[Usage],
    now_ns: u64,
) -> Vec<QuotaAssignment> {
    allocator.count_reported("edge", usages);
    assigned(&allocator.report(stream, "edge", usages, now_ns).0)
}

fn assigned(answers: &[BucketAnswer]) -> Vec<QuotaAssignment> {
    answers
        .iter()
        .map(|answer| match answer {
            BucketAnswer::Assign { assignment, .. } => *assignment,
            BucketAnswer::Abandon { .. } => panic!("an abandon"),
        })
        .collect()
}

#[test]
fn streams_share_a_bucket_by_demand() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    // Over 5 s: 350 and 150 requests, 70 and 30 a second, 100 in all: each
    // gets its demand (the first of them all the budget, being alone).
    assert_eq!(
        answered(&mut allocator, 1, &[usage("shared", 350, 0)], 0),
        vec![bucket(100, 100)]
    );
    // The second gets what the first leaves: 0, refused until the first
    // reports again.
    assert_eq!(
        answered(&mut allocator, 2, &[usage("shared", 100, 50)], 0),
        vec![QuotaAssignment::DenyAll]
    );
    // Stream 1 reports again: 70, freeing 30, pushed to stream 2 at once.
    allocator.count_reported("edge", &[usage("shared", 350, 0)]);
    let (answers, pushes) = allocator.report(1, "edge", &[usage("shared", 350, 0)], 5 * SECOND);
    assert_eq!(assigned(&answers), vec![bucket(70, 70)]);
    assert_eq!(assigned(&pushes[&2]), vec![bucket(30, 30)]);
    assert_eq!(
        answered(&mut allocator, 2, &[usage("shared", 150, 0)], 5 * SECOND),
        vec![bucket(30, 30)]
    );
    let counters = allocator.counters();
    let edge = counters.get("edge").unwrap();
    assert_eq!((edge.streams, edge.buckets), (2, 1));
    // Four answers and one push.
    assert_eq!((edge.allowed, edge.denied, edge.assignments), (950, 50, 5));
}

#[test]
fn a_closed_streams_part_returns_at_once() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    allocator.report(1, "edge", &[usage("shared", 250, 0)], 0);
    allocator.report(2, "edge", &[usage("shared", 250, 0)], 0);
    allocator.report(1, "edge", &[usage("shared", 250, 0)], 5 * SECOND);
    // Stream 1's report freed 50, which went to stream 2.
    // Stream 2 closes: its 50 go back to stream 1 at once, 100 in all.
    let pushes = allocator.close(2);
    assert_eq!(assigned(&pushes[&1]), vec![bucket(100, 100)]);
    // And stay with it at its next report.
    assert_eq!(
        answered(&mut allocator, 1, &[usage("shared", 250, 0)], 10 * SECOND),
        vec![bucket(100, 100)]
    );
    assert_eq!(allocator.counters().get("edge").unwrap().streams, 1);
}

#[test]
fn idle_buckets_are_abandoned_and_forgotten() {
    let settings = AllocatorSettings {
        idle_ns: 30 * SECOND,
        ..AllocatorSettings::default()
    };
    let mut allocator = Allocator::new(settings, config(YAML));
    allocator.report(1, "edge", &[usage("shared", 5, 0)], 0);
    for at in [5, 10, 15, 20, 25] {
        allocator.report(1, "edge", &[usage("shared", 0, 0)], at * SECOND);
    }
    assert!(allocator.take_idle(29 * SECOND).0.is_empty());
    let (abandons, abandoned) = allocator.take_idle(30 * SECOND);
    assert_eq!(abandoned, vec![(1, Arc::from("edge"), key("shared"))]);
    assert_eq!(
        abandons,
        BTreeMap::from([(
            1,
            vec![BucketAnswer::Abandon {
                bucket: key("shared")
            }]
        )])
    );
    let counters = allocator.counters();
    let edge = counters.get("edge").unwrap();
    assert_eq!((edge.streams, edge.buckets, edge.abandons), (0, 0, 1));
}

#[test]
fn blanket_limits_and_unknown_buckets() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    let (answers, _) = allocator.report(
        1,
        "edge",
        &[usage("closed", 1, 0), usage("elsewhere", 9, 0)],
        0,
    );
    assert_eq!(
        assigned(&answers),
        vec![QuotaAssignment::DenyAll, QuotaAssignment::AllowAll]
    );
    match &answers[0] {
        BucketAnswer::Assign { ttl_s, .. } => assert_eq!(*ttl_s, 15),
        BucketAnswer::Abandon { .. } => panic!("an abandon"),
    }
}

#[test]
fn buckets_past_a_cap_get_the_over_cap_assignment_and_are_not_kept() {
    let settings = AllocatorSettings {
        max_buckets_per_stream: 2,
        max_buckets: 3,
        ..AllocatorSettings::default()
    };
    let mut allocator = Allocator::new(settings, config(YAML));
    let (answers, _) = allocator.report(
        1,
        "edge",
        &[usage("a", 1, 0), usage("b", 1, 0), usage("c", 1, 0)],
        0,
    );
    assert_eq!(
        assigned(&answers),
        vec![
            QuotaAssignment::AllowAll,
            QuotaAssignment::AllowAll,
            QuotaAssignment::DenyAll
        ]
    );
    // A bucket the stream holds is still answered.
    assert_eq!(
        answered(&mut allocator, 1, &[usage("a", 1, 0)], SECOND),
        vec![QuotaAssignment::AllowAll]
    );
    // Stream 2 may add one more (3 in all), then none.
    assert_eq!(
        answered(&mut allocator, 2, &[usage("d", 1, 0), usage("e", 1, 0)], 0),
        vec![QuotaAssignment::AllowAll, QuotaAssignment::DenyAll]
    );
    let counters = allocator.counters();
    let edge = counters.get("edge").unwrap();
    assert_eq!((edge.buckets, edge.over_cap), (3, 2));
}

#[test]
fn a_reload_pushes_the_new_limit_to_every_stream() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    allocator.report(1, "edge", &[usage("shared", 350, 0)], 0);
    allocator.report(2, "edge", &[usage("shared", 150, 0)], 0);
    let (pushes, reshares) = allocator.reload(config(&YAML.replace("100}", "10}")));
    assert!(
        reshares.is_empty(),
        "in memory, nothing to split in a record"
    );
    // 70 and 30 a second against 10: 7 and 3.
    assert_eq!(assigned(&pushes[&1]), vec![bucket(7, 7)]);
    assert_eq!(assigned(&pushes[&2]), vec![bucket(3, 3)]);
    // The same configuration again pushes nothing.
    assert!(
        allocator
            .reload(config(&YAML.replace("100}", "10}")))
            .0
            .is_empty()
    );
}

#[test]
fn domains_the_configuration_lacks_are_counted_as_one() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    for domain in ["made-up-1", "made-up-2", "made-up-3"] {
        allocator.count_reported(domain, &[usage("shared", 1, 0)]);
        let (answers, _) = allocator.report(1, domain, &[usage("shared", 1, 0)], 0);
        assert_eq!(assigned(&answers), vec![QuotaAssignment::AllowAll]);
    }
    let counters = allocator.counters();
    assert_eq!(
        counters.keys().map(|domain| &**domain).collect::<Vec<_>>(),
        vec![UNKNOWN_DOMAIN]
    );
    assert_eq!(counters[UNKNOWN_DOMAIN].allowed, 3);
    // Each domain's bucket is kept under its own name (a reload that adds
    // the domain finds it), counted with the others.
    assert_eq!(counters[UNKNOWN_DOMAIN].buckets, 3);
}

#[test]
fn a_reporters_own_raise_is_in_its_answer_not_a_push() {
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(YAML));
    // 70 and 30 a second: 70 and 30 of 100.
    allocator.report(1, "edge", &[usage("shared", 350, 0)], 0);
    allocator.report(2, "edge", &[usage("shared", 150, 0)], 0);
    allocator.report(1, "edge", &[usage("shared", 350, 0)], 5 * SECOND);
    allocator.report(2, "edge", &[usage("shared", 150, 0)], 5 * SECOND);
    // Stream 2 closes: its 30 go to stream 1 (100).
    allocator.close(2);
    // Stream 1 reports 350 over 5 s again: alone, its part is all 100, held
    // already: one answer, no push to itself.
    let (answers, pushes) = allocator.report(1, "edge", &[usage("shared", 350, 0)], 10 * SECOND);
    assert_eq!(assigned(&answers), vec![bucket(100, 100)]);
    assert!(pushes.is_empty(), "{pushes:?}");
    // A new stream 3 of 30 a second is cut to what 1 leaves (0). Then 1's
    // report lowers it to its part by demand, 70, freeing 30, pushed to
    // stream 3, while stream 1's answer carries its own 70.
    assert_eq!(
        answered(&mut allocator, 3, &[usage("shared", 150, 0)], 10 * SECOND),
        vec![QuotaAssignment::DenyAll]
    );
    let (answers, pushes) = allocator.report(1, "edge", &[usage("shared", 350, 0)], 15 * SECOND);
    assert_eq!(assigned(&answers), vec![bucket(70, 70)]);
    assert_eq!(pushes.keys().copied().collect::<Vec<_>>(), vec![3]);
    assert_eq!(assigned(&pushes[&3]), vec![bucket(30, 30)]);
}

#[test]
fn a_shared_allocator_raises_no_part_outside_a_report() {
    let mut allocator =
        Allocator::new(AllocatorSettings::default(), config(YAML)).kept_in_a_shared_store();
    allocator.report(1, "edge", &[usage("shared", 250, 0)], 0);
    allocator.report(2, "edge", &[usage("shared", 250, 0)], 0);
    allocator.report(1, "edge", &[usage("shared", 250, 0)], 5 * SECOND);
    // Closing stream 1 pushes nothing to stream 2 (the record, not this
    // copy, decides).
    assert!(allocator.close(1).is_empty());
    // A new limit is handed back to be split in the record.
    let (pushes, reshares) = allocator.reload(config(&YAML.replace("100}", "10}")));
    assert!(pushes.is_empty());
    assert_eq!(reshares.len(), 1);
    assert_eq!(reshares[0].rate.tokens, 10);
}

#[test]
fn a_fixed_window_of_a_minute_is_counted_and_lends_its_rest() {
    let yaml = "
domain: edge
descriptors:
  - key: name
    value: minute
    rate_limit: {unit: minute, requests_per_unit: 600}
";
    let mut allocator = Allocator::new(AllocatorSettings::default(), config(yaml));
    let minute = |max_tokens, tokens_per_fill| QuotaAssignment::TokenBucket {
        max_tokens,
        tokens_per_fill,
        fill_interval_s: 60,
    };
    // The window [3,600 s, 3,660 s). At its start, 50 reported: 550 left
    // over 60 s, a budget of 550 a minute, all the lone stream's (a burst of
    // a second of it: 550 / 60, rounded up, 10).
    assert_eq!(
        answered(&mut allocator, 1, &[usage("minute", 50, 0)], 3_600 * SECOND),
        vec![minute(10, 550)]
    );
    // 30 s in, 100 more: 150 used, 450 left over 30 s: 900 a minute (15 a
    // second, lent by the quiet start); its demand, 200 a minute, and the
    // rest lent to it alone.
    assert_eq!(
        answered(
            &mut allocator,
            1,
            &[usage("minute", 100, 0)],
            3_630 * SECOND
        ),
        vec![minute(15, 900)]
    );
    // 50 s in, 450 more: 600 used, nothing left.
    assert_eq!(
        answered(
            &mut allocator,
            1,
            &[usage("minute", 450, 0)],
            3_650 * SECOND
        ),
        vec![QuotaAssignment::DenyAll]
    );
    // The next window starts afresh: 600 over 60 s.
    assert_eq!(
        answered(&mut allocator, 1, &[usage("minute", 0, 0)], 3_660 * SECOND),
        vec![minute(10, 600)]
    );
}
