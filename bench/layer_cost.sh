#!/usr/bin/env bash
# The tower layer's cost, in instructions per request counted by callgrind
# (repeatable on a busy machine, where the criterion benchmark's times are
# not): the same request shape through the bare service, tollgate's route
# layer and tower_governor with and without its headers, built as
# crates/tollgate-tower/benches/layer.rs builds them (every request passes).
#
# Each runs crates/tollgate-tower/examples/layer_cost.rs under
# `valgrind --tool=callgrind --toggle-collect=layer_cost::measured`: only the
# measured requests count (not the set-up or a thousand warm-up requests),
# so the instructions collected divided by the requests is the cost of one.
# Prints each, tollgate against tower_governor with its headers (target: at
# most 1.0), and each layer's cost over the bare service; writes what
# tollgate's layer adds over tower_governor's, function by function (self
# instructions per request), to bench/out/layer_cost-tollgate-over-governor.txt.
# Installs valgrind and python3 from Debian's packages if missing.
#
# Usage: bench/layer_cost.sh [requests, default 20000]
# (NO_BUILD=1 measures the release example already built.)
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS="${1:-20000}"
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if ! command -v valgrind >/dev/null || ! command -v python3 >/dev/null; then
    echo "--- installing valgrind and python3"
    apt-get update -qq && apt-get install -y -qq valgrind python3 >/dev/null
fi
if [ -z "${NO_BUILD:-}" ]; then
    echo "--- building the example (release)"
    cargo build --release -q -p tollgate-tower --example layer_cost
fi
EXAMPLE="${CARGO_TARGET_DIR:-target}/release/examples/layer_cost"

echo "--- callgrind, $REQUESTS requests each"
declare -A PER_REQUEST
for mode in bare tollgate tower_governor tower_governor_with_headers; do
    valgrind --tool=callgrind --toggle-collect='layer_cost::measured' \
        --callgrind-out-file="$OUT/layer_cost-$mode.callgrind" \
        "$EXAMPLE" "$mode" "$REQUESTS" >"$WORK/$mode.log" 2>&1 || {
        cat "$WORK/$mode.log" >&2
        exit 1
    }
    collected=$(awk '/^(summary|totals):/ {print $2; exit}' "$OUT/layer_cost-$mode.callgrind")
    PER_REQUEST[$mode]=$((collected / REQUESTS))
    printf '%-28s %6d instructions per request\n' "$mode" "${PER_REQUEST[$mode]}"
done

awk -v b="${PER_REQUEST[bare]}" -v t="${PER_REQUEST[tollgate]}" \
    -v g="${PER_REQUEST[tower_governor]}" -v h="${PER_REQUEST[tower_governor_with_headers]}" 'BEGIN {
    printf "tollgate / tower_governor with headers: %.2f (target: at most 1.0)\n", t / h
    printf "over the bare service: tollgate %d, tower_governor with headers %d (%.2f x), without %d\n", t - b, h - b, (t - b) / (h - b), g - b
}'
python3 bench/by_function.py 40 "$OUT/layer_cost-tollgate.callgrind" "$REQUESTS" \
    "$OUT/layer_cost-tower_governor_with_headers.callgrind" "$REQUESTS" \
    >"$OUT/layer_cost-tollgate-over-governor.txt"
echo "--- what tollgate's layer adds over tower_governor's with headers, by function"
head -22 "$OUT/layer_cost-tollgate-over-governor.txt" | cut -c1-150
echo "breakdown: $OUT/layer_cost-tollgate-over-governor.txt"
