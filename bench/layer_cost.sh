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
# Installs valgrind and python3 from Debian's packages if missing
# (bench/example_cost.sh, shared with the other example counts).
#
# Usage: bench/layer_cost.sh [requests, default 20000]
# (NO_BUILD=1 measures the release example already built.)
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS="${1:-20000}"
OUT="bench/out"
source bench/example_cost.sh
example_cost tollgate-tower layer_cost "$REQUESTS" \
    bare tollgate tower_governor tower_governor_with_headers
for mode in bare tollgate tower_governor tower_governor_with_headers; do
    printf '%-28s %6d instructions per request\n' "$mode" "${PER_CALL[$mode]}"
done

awk -v b="${PER_CALL[bare]}" -v t="${PER_CALL[tollgate]}" \
    -v g="${PER_CALL[tower_governor]}" -v h="${PER_CALL[tower_governor_with_headers]}" 'BEGIN {
    printf "tollgate / tower_governor with headers: %.2f (target: at most 1.0)\n", t / h
    printf "over the bare service: tollgate %d, tower_governor with headers %d (%.2f x), without %d\n", t - b, h - b, (t - b) / (h - b), g - b
}'
python3 bench/by_function.py 40 "$OUT/layer_cost-tollgate.callgrind" "$REQUESTS" \
    "$OUT/layer_cost-tower_governor_with_headers.callgrind" "$REQUESTS" \
    >"$OUT/layer_cost-tollgate-over-governor.txt"
echo "--- what tollgate's layer adds over tower_governor's with headers, by function"
head -22 "$OUT/layer_cost-tollgate-over-governor.txt" | cut -c1-150
echo "breakdown: $OUT/layer_cost-tollgate-over-governor.txt"
