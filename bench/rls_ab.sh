#!/usr/bin/env bash
# Two builds of `tollgate rls` on one Redis, alternated: closed loops of
# crates/tollgate-rls/examples/rls_load.rs (64 calls in flight, one
# descriptor of 1,000 values, bench/rls-config's limit, which refuses
# nothing), ROUNDS rounds of A and B, their order alternating. For each run: calls per second, the
# CPU per call of tollgate and of redis-server apart (from /proc), and Redis's
# own time per script call and per decision (`INFO commandstats`, EVALSHA).
# The machine is shared and noisy: compare the two within one run, round by
# round.
#
# Usage: bench/rls_ab.sh BINARY_A BINARY_B [seconds per run, default 5]
#                        [rounds, default 3]
# (for instance a `tollgate` built from an earlier commit, copied aside,
# against ./target/release/tollgate). Starts its own redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."

A="$1"
B="$2"
SECONDS_PER_RUN="${3:-5}"
ROUNDS="${4:-3}"
WORK="$(mktemp -d)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -n "${REDIS_PORT:-}" ] && redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=bench/ports.sh
source bench/ports.sh
cargo build --release -q -p tollgate-rls --examples
LOAD=./target/release/examples/rls_load

REDIS_PORT=$(free_port)
start_redis "$REDIS_PORT" "$WORK"
REDIS_PID=$(cat "$WORK/redis.pid")

start_rls "$A" "$WORK/a.log" "redis://127.0.0.1:$REDIS_PORT"
PIDS+=("$RLS_PID")
A_PORT=$RLS_PORT
A_PID=$RLS_PID
start_rls "$B" "$WORK/b.log" "redis://127.0.0.1:$REDIS_PORT"
PIDS+=("$RLS_PID")
B_PORT=$RLS_PORT
B_PID=$RLS_PID
wait_port "$A_PORT"
wait_port "$B_PORT"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
evalsha() {
    redis-cli -p "$REDIS_PORT" info commandstats | tr -d '\r' \
        | awk -F'[=,]' '/^cmdstat_evalsha:/ {print $2, $6}'
}
field() { grep -oE "(^| )$1=[^ ]+" | head -1 | cut -d= -f2; }

# run NAME PORT PID: one closed loop, one line.
run() {
    local name="$1" port="$2" pid="$3" t0 r0 line calls t1 r1 hz scripts usec
    redis-cli -p "$REDIS_PORT" config resetstat >/dev/null
    t0=$(ticks "$pid")
    r0=$(ticks "$REDIS_PID")
    line=$("$LOAD" --target "http://127.0.0.1:$port" --warmup 1 \
        --seconds "$SECONDS_PER_RUN" --keys 1000 --concurrency 64)
    t1=$(ticks "$pid")
    r1=$(ticks "$REDIS_PID")
    hz=$(getconf CLK_TCK)
    calls=$(echo "$line" | field ok_calls)
    read -r scripts usec < <(evalsha)
    # CPU over warm-up and counted seconds, per call counted (scaled).
    awk -v name="$name" -v rate="$(echo "$line" | field calls_per_second)" -v n="$calls" \
        -v t=$((t1 - t0)) -v r=$((r1 - r0)) -v hz="$hz" -v s="$SECONDS_PER_RUN" \
        -v scripts="$scripts" -v usec="$usec" 'BEGIN {
            all = n * (s + 1) / s
            printf "%-3s %8s calls/s   tollgate %5.1f us/call   redis %5.1f us/call   EVALSHA %5.1f us each, %4.1f calls each, %4.2f us per call answered\n",
                name, rate, t / hz * 1e6 / all, r / hz * 1e6 / all, usec, all / scripts, usec * scripts / all
        }'
}

echo "--- A: $A"
echo "--- B: $B"
echo "--- closed loops of ${SECONDS_PER_RUN} s (+1 s warm-up), 64 in flight, $ROUNDS rounds: A B, then B A, ..."
for round in $(seq "$ROUNDS"); do
    # The order alternates, so that a machine slowing down (or speeding up)
    # over the run favours neither.
    if [ $((round % 2)) = 1 ]; then
        run A "$A_PORT" "$A_PID"
        run B "$B_PORT" "$B_PID"
    else
        run B "$B_PORT" "$B_PID"
        run A "$A_PORT" "$A_PID"
    fi
done
