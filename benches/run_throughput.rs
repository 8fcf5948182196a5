//! Throughput of `tollgate run` on a generated file of 1M operations over 100k
//! keys: the built binary end to end (read, parse, decide, print), and the
//! harness in process.
//!
//! Run: `cargo bench --bench run_throughput`.

use std::path::PathBuf;
use std::process::Command;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tollgate_core::{Harness, LimiterConfig};

const OPERATIONS: usize = 1_000_000;
const KEYS: u64 = 100_000;

/// A deterministic mix: 80% requests, 15% batches, and the rest stats, resets,
/// tier assignments and an occasional configure; time moves one second every
/// 1000 operations.
fn operations() -> String {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut text = String::with_capacity(OPERATIONS * 40);
    text.push('[');
    for i in 0..OPERATIONS {
        if i > 0 {
            text.push_str(",\n");
        }
        let now = i / 1000;
        let key = next() % KEYS;
        let op = match next() % 100 {
            0..80 => format!(r#"["request","sk_{key}",{now}]"#),
            80..95 => format!(
                r#"["request_batch","Bearer sk_{key}",{now},{}]"#,
                next() % 10 + 1
            ),
            95..97 => format!(r#"["reset","sk_{key}"]"#),
            97..99 => format!(r#"["assign_tier","sk_{key}","pro"]"#),
            _ if i % 100_000 == 99 => {
                r#"["configure",{"algorithm":"token_bucket","limit":7,"window_s":60}]"#.to_owned()
            }
            _ => format!(r#"["stats",{now}]"#),
        };
        text.push_str(&op);
    }
    text.push(']');
    text
}

fn run_throughput(criterion: &mut Criterion) {
    let input = operations();
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ops_1m.json");
    std::fs::write(&path, &input).unwrap();
    let mut group = criterion.benchmark_group("run_1m_operations");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OPERATIONS as u64));
    group.bench_function("binary", |bencher| {
        bencher.iter(|| {
            let output = Command::new(env!("CARGO_BIN_EXE_tollgate"))
                .arg("run")
                .arg(&path)
                .output()
                .unwrap();
            assert!(output.status.success());
            output.stdout.len()
        });
    });
    group.bench_function("harness_in_process", |bencher| {
        bencher.iter(|| {
            let mut harness = Harness::new(&LimiterConfig::default()).unwrap();
            let mut out = Vec::new();
            harness.run(input.as_bytes(), &mut out).unwrap();
            out.len()
        });
    });
    group.finish();
}

criterion_group!(benches, run_throughput);
criterion_main!(benches);
