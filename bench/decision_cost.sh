#!/usr/bin/env bash
# One decision's cost on a hot key, in instructions counted by callgrind
# (repeatable on a busy machine, where `cargo bench --bench decision`'s
# times are not): tollgate's Limiter::request under each algorithm and
# governor's keyed limiter, with the quota, key and clock read of the
# criterion benchmark's hot-key group, on one thread.
#
# Each runs crates/tollgate-core/examples/decision_cost.rs under
# `valgrind --tool=callgrind --toggle-collect=decision_cost::measured`: only
# the measured decisions count (not the set-up or a thousand warm-up ones),
# so the instructions collected divided by the decisions is the cost of one.
# Prints each and its ratio to governor (target: at most 1.0); writes what
# the token bucket adds over governor, function by function (self
# instructions per decision), to bench/out/decision_cost-token_bucket-over-governor.txt.
# Installs valgrind and python3 from Debian's packages if missing
# (bench/example_cost.sh, shared with the other example counts).
#
# Usage: bench/decision_cost.sh [decisions, default 100000]
# (NO_BUILD=1 measures the release example already built.)
set -euo pipefail
cd "$(dirname "$0")/.."

DECISIONS="${1:-100000}"
OUT="bench/out"
source bench/example_cost.sh
example_cost tollgate-core decision_cost "$DECISIONS" \
    governor fixed_window sliding_log token_bucket
for mode in governor fixed_window sliding_log token_bucket; do
    awk -v mode="$mode" -v n="${PER_CALL[$mode]}" -v g="${PER_CALL[governor]}" \
        'BEGIN { printf "%-14s %5d instructions per decision (%.2f x governor)\n", mode, n, n / g }'
done
python3 bench/by_function.py 30 "$OUT/decision_cost-token_bucket.callgrind" "$DECISIONS" \
    "$OUT/decision_cost-governor.callgrind" "$DECISIONS" \
    >"$OUT/decision_cost-token_bucket-over-governor.txt"
echo "--- what the token bucket adds over governor, by function"
head -22 "$OUT/decision_cost-token_bucket-over-governor.txt" | cut -c1-150
echo "breakdown: $OUT/decision_cost-token_bucket-over-governor.txt"
