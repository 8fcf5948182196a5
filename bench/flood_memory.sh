#!/usr/bin/env bash
# The gateway's resident memory through a flood of distinct API keys and after
# idle eviction has dropped them (issue #13 item 11): `tollgate serve` (release,
# in-memory store, the demo backend), flooded by wrk with a new key on every
# request, its idle eviction a little longer than the flood, so every key of
# the flood is held at its end. Then steady traffic of one key goes on while
# the flood's keys go idle, and a `GET /admin/stats` (which sweeps every
# shard) drops them. The resident size (VmRSS) is read before, at the end of
# the flood, once every key has gone, and after 10 more seconds of steady traffic.
#
# Usage: bench/flood_memory.sh [seconds of flood, default 40] [algorithm: fixed_window |
#        token_bucket | sliding_log, default fixed_window]
#        STEADY=0 in the environment: no steady traffic after the flood
# Installs wrk from Debian's packages if it is missing. Results go to stdout and
# bench/out/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${1:-40}"
ALGORITHM="${2:-fixed_window}"
IDLE_S=$((DURATION + 5))
PORT=18191
ADMIN_PORT=18192
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

if ! command -v wrk >/dev/null; then
    echo "--- installing wrk"
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
cargo build --release --quiet --bin tollgate
BINARY=target/release/tollgate

BURST=""
[ "$ALGORITHM" = token_bucket ] && BURST="burst = 10"
cat >"$WORK/gateway.toml" <<EOF
listen = "127.0.0.1:$PORT"
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
token = "flood-bench-token"
[limits]
idle_eviction_s = $IDLE_S
max_tracked_keys = 100000000
[limits.default_policy]
algorithm = "$ALGORITHM"
limit = 10
window_s = 60
$BURST
EOF

cat >"$WORK/flood.lua" <<'EOF'
-- A new API key on every request: "flood-<thread>-<counter>".
local counter = 0
local thread_id = 0
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("id", threads)
end
function init(args)
    thread_id = id
end
function request()
    counter = counter + 1
    return wrk.format("GET", "/", { ["X-API-Key"] = "flood-" .. thread_id .. "-" .. counter })
end
EOF

"$BINARY" serve --config "$WORK/gateway.toml" >"$WORK/serve.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done

rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"; }
tracked() { curl -fsS -H "Authorization: Bearer flood-bench-token" "http://127.0.0.1:$ADMIN_PORT/admin/stats" | sed 's/.*"tracked_keys":\([0-9]*\).*/\1/'; }

BEFORE="$(rss_mb)"
wrk -t2 -c64 -d"${DURATION}s" -s "$WORK/flood.lua" "http://127.0.0.1:$PORT/" >"$WORK/wrk.txt"
REQUESTS="$(awk '/requests in/ { print $1 }' "$WORK/wrk.txt")"
PEAK_KEYS="$(tracked)"
PEAK="$(rss_mb)"
# Steady traffic of one key (refused once its budget is used: still requests).
# STEADY=0 in the environment: no traffic at all after the flood.
if [ "${STEADY:-1}" != 0 ]; then
    wrk -t1 -c2 -d"$((IDLE_S + 20))s" -H "X-API-Key: steady" "http://127.0.0.1:$PORT/" >/dev/null &
else
    sleep "$((IDLE_S + 20))" &
fi
STEADY_PID=$!
sleep $((IDLE_S + 5))
AFTER_KEYS="$(tracked)"
sleep 1
AFTER="$(rss_mb)"
sleep 10
LATER="$(rss_mb)"
wait "$STEADY_PID" || true

{
    echo "algorithm $ALGORITHM, steady traffic ${STEADY:-1}, $REQUESTS requests (one new key each) in ${DURATION}s"
    echo "resident before: $BEFORE MB"
    echo "resident after the flood: $PEAK MB, tracked keys $PEAK_KEYS"
    echo "resident once the keys have gone: $AFTER MB, tracked keys $AFTER_KEYS"
    echo "resident 10 s later: $LATER MB"
} | tee "$OUT/flood_memory-$ALGORITHM.txt"
