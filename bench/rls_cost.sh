#!/usr/bin/env bash
# What a ShouldRateLimit call costs the serving process, in user-space
# instructions per call counted by callgrind (repeatable on a busy machine,
# where bench/rls.sh's calls per second are not). Three servers, each run alone
# under `valgrind --tool=callgrind`, everything on 127.0.0.1:
#
#   bare    examples/rls_bare.rs: tonic answering OK without deciding, the
#           floor of serving the call (bench/rls.sh's (a))
#   memory  `tollgate rls` on its in-memory store ((b))
#   redis   `tollgate rls` on a redis-server this script starts ((c); Redis's
#           own cost is not counted, its EVALSHA time per decision is printed
#           from INFO commandstats)
#
# For each: rls_load's closed loop (64 calls in flight, one descriptor among
# 1,000 values, a limit refusing nothing, as bench/rls.sh) makes SMALL calls,
# then LARGE calls in a second server run; the cost per call is the difference
# of the two runs' totals over the difference of their calls, so start-up and
# shut-down cancel out. The counts are the process's every thread, kernel time
# excluded (the system calls themselves are not counted, only the code that
# makes them). Breakdowns by function (inclusive) go to bench/out/.
#
# Usage: bench/rls_cost.sh [large, default 20000] [small, default 2000]
# (TOLLGATE_BINARY=PATH measures that build of `tollgate`; only the examples
# are built then.)
set -euo pipefail
cd "$(dirname "$0")/.."

LARGE="${1:-20000}"
SMALL="${2:-2000}"
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
SERVER_PID=""
REDIS_PORT=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; fi
    if [ -n "$REDIS_PORT" ]; then
        redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# free_port, start_redis.
# shellcheck source=bench/ports.sh
source bench/ports.sh
REDIS_PORT=$(free_port)
GRPC_PORT=$(free_port)
HTTP_PORT=$(free_port)
DEBUG_PORT=$(free_port)

if ! command -v valgrind >/dev/null || ! command -v redis-server >/dev/null; then
    echo "--- installing valgrind and redis-server"
    apt-get update -qq && apt-get install -y -qq valgrind redis-server >/dev/null
fi
TOLLGATE="${TOLLGATE_BINARY:-./target/release/tollgate}"
if [ -z "${TOLLGATE_BINARY:-}" ]; then
    echo "--- building (release)"
    cargo build --release -q -p tollgate -p tollgate-rls --bins --examples
else
    cargo build --release -q -p tollgate-rls --examples
fi
LOAD=./target/release/examples/rls_load

start_redis "$REDIS_PORT" "$WORK"

# measure NAME CALLS: one server run under callgrind answering CALLS calls;
# leaves "TOTAL OK_CALLS" in $WORK/NAME-CALLS.result (run in this shell, not
# in a command substitution, so that `set -e` holds and the trap sees the
# server).
measure() {
    local name="$1" calls="$2" out="$WORK/$1-$2.out" ok total
    local grind=(valgrind --tool=callgrind --callgrind-out-file="$out")
    case "$name" in
        bare) "${grind[@]}" ./target/release/examples/rls_bare --port "$GRPC_PORT" \
                  >"$WORK/$name.log" 2>&1 & ;;
        memory|redis)
            env -u REDIS_URL USE_STATSD=false LOG_LEVEL=warn HOST=127.0.0.1 PORT="$HTTP_PORT" \
                GRPC_HOST=127.0.0.1 GRPC_PORT="$GRPC_PORT" DEBUG_HOST=127.0.0.1 \
                DEBUG_PORT="$DEBUG_PORT" ${REDIS_URL_FOR:+REDIS_URL="$REDIS_URL_FOR"} \
                "${grind[@]}" "$TOLLGATE" rls --config bench/rls-config >"$WORK/$name.log" 2>&1 & ;;
    esac
    SERVER_PID=$!
    # Under callgrind a server takes seconds to listen.
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$GRPC_PORT") 2>/dev/null && break
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/$name.log" >&2; exit 1; }
        sleep 0.1
    done
    redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
    # Calls answered slowly while callgrind warms up count as errors, not OK.
    "$LOAD" --target "http://127.0.0.1:$GRPC_PORT" --warmup 0 --seconds 600 \
        --max-calls "$calls" --concurrency 64 --call-timeout-ms 10000 > "$WORK/$name-$calls.load"
    ok=$(grep -oE 'ok_calls=[0-9]+' "$WORK/$name-$calls.load" | cut -d= -f2)
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" 2>/dev/null || true
    SERVER_PID=""
    # (awk reads to the end: an early exit would fail the pipe under pipefail)
    total=$(callgrind_annotate "$out" 2>/dev/null \
        | awk '/PROGRAM TOTALS/ && !found {gsub(",", "", $1); print $1; found = 1}')
    if [ -z "$ok" ] || [ "$ok" = 0 ] || [ -z "$total" ]; then
        echo "$name: no OK calls or no callgrind total (see $WORK/$name.log)" >&2
        exit 1
    fi
    if [ "$calls" = "$LARGE" ]; then
        callgrind_annotate --inclusive=yes "$out" 2>/dev/null | cut -c1-200 | sed -n 1,80p \
            > "$OUT/rls-cost-$name.txt"
        if [ "$name" = redis ]; then
            redis-cli -p "$REDIS_PORT" info commandstats | grep -E '^cmdstat_evalsha:' \
                > "$OUT/rls-cost-evalsha.txt" || true
            echo "$ok" > "$WORK/redis-large-ok"
        fi
    fi
    echo "$total $ok" > "$WORK/$name-$calls.result"
}

echo "--- instructions per call (callgrind), $SMALL and $LARGE calls, 64 in flight"
for name in bare memory redis; do
    REDIS_URL_FOR=""
    [ "$name" = redis ] && REDIS_URL_FOR="redis://127.0.0.1:$REDIS_PORT"
    measure "$name" "$SMALL"
    measure "$name" "$LARGE"
    read -r small_total small_ok < "$WORK/$name-$SMALL.result"
    read -r large_total large_ok < "$WORK/$name-$LARGE.result"
    per_call=$(( (large_total - small_total) / (large_ok - small_ok) ))
    echo "$per_call" > "$WORK/per-call-$name"
    printf '%-8s %9d instructions per call   (%s - %s instructions over %s - %s OK calls)\n' \
        "$name" "$per_call" "$large_total" "$small_total" "$large_ok" "$small_ok"
done
if [ -s "$OUT/rls-cost-evalsha.txt" ]; then
    awk -F'[=,]' -v n="$(cat "$WORK/redis-large-ok")" '{ printf "redis: %s script calls, %.1f decisions per call, %s us per call inside Redis\n", $2, n / $2, $6 }' \
        "$OUT/rls-cost-evalsha.txt"
fi
awk -v a="$(cat "$WORK/per-call-bare")" -v b="$(cat "$WORK/per-call-memory")" \
    -v c="$(cat "$WORK/per-call-redis")" 'BEGIN {
    printf "memory / bare %.2f, redis / bare %.2f (tollgate only), redis - memory %d per call\n", b / a, c / a, c - b
}'
