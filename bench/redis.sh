#!/usr/bin/env bash
# Decisions per second through the Redis store with 64 concurrent callers,
# against the ceiling redis-benchmark measures on the same Redis for a one-line
# EVALSHA script (64 clients), in one run. Starts its own redis-server on a free
# port unless REDIS_URL is set; installs Debian's redis-server if missing.
#
# Usage: bench/redis.sh [seconds, default 10]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN="${1:-10}"

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
    apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
if [ -z "${REDIS_URL:-}" ]; then
    port=$(shuf -i 10000-14999 -n 1)
    dir=$(mktemp -d)
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
        --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
    export REDIS_URL="redis://127.0.0.1:$port"
    for _ in $(seq 100); do [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break; sleep 0.1; done
fi
host_port="${REDIS_URL#redis://}"
host="${host_port%%:*}"
port="${host_port##*:}"
port="${port%%/*}"

echo "--- ceiling: redis-benchmark, EVALSHA of 'return 1', 64 clients"
sha=$(redis-cli -h "$host" -p "$port" SCRIPT LOAD "return 1")
redis-benchmark -h "$host" -p "$port" -c 64 -n 500000 --precision 3 evalsha "$sha" 0 \
    | grep -E "throughput summary|latency summary" -A2 | grep -vE "^--"

echo "--- tollgate RedisStore, 64 concurrent callers, ${SECONDS_PER_RUN} s"
cargo build --release -q -p tollgate-redis --benches
SECONDS="$SECONDS_PER_RUN" CALLERS=64 cargo bench -q -p tollgate-redis --bench throughput 2>/dev/null | tail -1
