#!/usr/bin/env bash
# Instructions redis-server spends on one call of tollgate's acquire script
# (crates/tollgate-redis/lua, assembled as that revision's src/script.rs
# assembles it), counted by callgrind: a repeatable figure where calls per
# second move by ±15 % from one run to the next. Each call carries 10
# requests, each one counting fixed window (the Go rule, as `tollgate rls`
# sends it) of 10^9 per second on its own key, the same 10 keys every call
# (a steady state: after the first call every decision finds its window),
# Redis's time, a deadline far ahead. redis-server runs under callgrind for
# 500 and then 2,500 calls (redis-benchmark, one client); the difference of
# the totals over 2,000 calls cancels start-up and shut-down.
#
# Usage: [SHAPE=plan [REQUESTS=N]] [AS=function] bench/acquire_cost.sh [REVISION...]
# (default: HEAD and the work tree)
# A revision is anything `git show` takes (HEAD~1, a commit); `.` is the work
# tree. Installs valgrind and redis-server from Debian's packages if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null; then
    apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi
if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
# shellcheck source=bench/ports.sh
source bench/ports.sh

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# show REVISION PATH: the file at that revision (`.`: the work tree).
show() {
    if [ "$1" = . ]; then cat "$2"; else git show "$1:$2"; fi
}

# script REVISION: the acquire script of that revision, its files in the
# order of the `include_str!`s of `fn acquire` in src/script.rs.
script() {
    local file
    for file in $(show "$1" crates/tollgate-redis/src/script.rs \
        | sed -n '/fn acquire()/,/^}/p' | grep -oE 'lua/[a-z_]+\.lua'); do
        show "$1" "crates/tollgate-redis/$file"
    done
}

# library REVISION: the same files as a Redis Functions library (Redis 7.0
# and later; AS=function): every file but acquire.lua at its top level, run
# once at FUNCTION LOAD, and acquire.lua as the body of the function
# `acquire`, called with FCALL. A prototype, to count what running the
# script's body anew on every EVALSHA costs: the store sends EVALSHA.
library() {
    local source
    source="$(script "$1")"
    echo "#!lua name=tollgate_acquire_cost"
    echo "${source%%-- Requests held to their limits*}"
    echo "redis.register_function('acquire', function(KEYS, ARGV)"
    echo "-- Requests held to their limits${source#*-- Requests held to their limits}"
    echo "end)"
}

# The calls' shape: SHAPE=counting (the default, above) or SHAPE=plan:
# REQUESTS requests (default 20), each one token bucket of 10^6 a minute,
# burst 10^6, on its own plan key with its tier checked (`default`), as the
# throughput benchmark (crates/tollgate-redis/benches/throughput.rs) and the
# gateway send a plan.
keys=()
if [ "${SHAPE:-counting}" = plan ]; then
    requests="${REQUESTS:-20}"
    args=("" 0 1 t 1000000 60000000 1000000 pc1 "$requests")
    for i in $(seq 1 "$requests"); do
        keys+=("bench:{k$i}:s" "bench:{k$i}:tier")
        # One limit, WRITE, the deadline, NO_WAIT; rule 1, one unit, the
        # tier expected.
        args+=(1 1 9000000000000000 "" 1 1 default)
    done
    calls_of="$requests plan decisions"
else
    args=("" 0 1 c 1000000000 1000000 0 pc1 10)
    for i in 0 1 2 3 4 5 6 7 8 9; do
        keys+=("bench:{k$i}:s")
        # One limit, WRITE, the deadline, NO_WAIT; rule 1, one unit, NO_TIER
        # (the fields of acquire.lua's ARGV, per request and per limit).
        args+=(1 1 9000000000000000 "" 1 1 "")
    done
    calls_of="10 decisions"
fi

# total REVISION CALLS: callgrind's instruction total of a redis-server that
# answered CALLS calls of the script.
total() {
    local port pid call
    port=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$WORK/out.$2" \
        redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
        sleep 0.2
    done
    if [ "${AS:-script}" = function ]; then
        redis-cli -p "$port" function load "$(library "$1")" >/dev/null
        call=(fcall acquire)
    else
        call=(evalsha "$(redis-cli -p "$port" script load "$(script "$1")")")
    fi
    status=$(redis-cli -p "$port" "${call[@]}" "${#keys[@]}" "${keys[@]}" "${args[@]}" | sed -n 2p)
    if [ "$status" != 0 ]; then
        echo "$1: the script did not decide the requests (status $status)" >&2
        exit 1
    fi
    redis-benchmark -p "$port" -c 1 -n "$2" -q "${call[@]}" "${#keys[@]}" "${keys[@]}" "${args[@]}" \
        >/dev/null 2>&1
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    awk '/^(summary|totals):/ {print $2; exit}' "$WORK/out.$2"
}

[ $# -gt 0 ] || set -- HEAD .
for revision in "$@"; do
    few=$(total "$revision" 500)
    many=$(total "$revision" 2500)
    echo "$revision: $(( (many - few) / 2000 )) instructions per call of $calls_of"
done
