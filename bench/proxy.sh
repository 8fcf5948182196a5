#!/usr/bin/env bash
# The cost of rate limiting in a gateway, measured with wrk on one machine in one
# run: the upstream directly, `tollgate serve` in front of it, and nginx in front
# of it with `limit_req` at the same per-key rate, keyed by the same header.
# For reference, a second `tollgate serve` with every benchmark key exempt
# (`tollgate_exempt`): the same proxy path with no limit decided and no
# rate-limit headers, the floor of what tollgate's HTTP stack costs; and nginx
# as a plain proxy (`nginx_plain_proxy`, no `limit_req`), nginx's floor; and
# `bare_proxy`, the floor of tollgate's HTTP stack: a reverse proxy of a few
# dozen lines on the same hyper, hyper-util and tokio and release profile, no
# routing, limiting or metrics (crates/tollgate-gateway/examples/bare_proxy.rs),
# with as many worker threads.
# Keyless routes (issue #26): `tollgate_per_ip`, a route with
# `api_key = "none"` limited per client IP, against `nginx_per_ip`, a location
# with `limit_req` keyed by `$binary_remote_addr`, both at the same rate (the
# one client IP of wrk). Concurrency limits: `tollgate_in_flight`, a route
# with `max_in_flight` per API key, against `nginx_limit_conn`, a location with
# `limit_conn` keyed by `$http_authorization`, both high enough that every
# request passes.
# (bench/limit_cost.sh counts the instructions of the same four under
# callgrind, which this busy machine cannot disturb.)
# The limits are high enough that every request passes, so the run measures the
# cost of limiting, not refusals. Installs nginx and wrk from Debian's packages
# if they are missing.
#
# Usage: bench/proxy.sh [seconds per run, default 10] [connections, default 64]
#                       [workers of tollgate and of the nginx limiter, default: CPUs]
#        TOLLGATE_BINARY=PATH in the environment: measure that tollgate build
#        (BARE_PROXY_BINARY=PATH likewise for the bare proxy)
# Each line: requests per second, p99 latency, and the CPU time the process
# answering spent per request (all its threads, from /proc). Results go to
# stdout and to bench/out/ (not committed).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${1:-10}"
CONNECTIONS="${2:-64}"
# Worker threads of tollgate and worker processes of the nginx limiter: the same.
WORKERS="${3:-$(nproc)}"
THREADS=2
KEYS=100
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; nginx -s stop -c "$WORK/upstream.conf" 2>/dev/null || true; nginx -s stop -c "$WORK/limiter.conf" 2>/dev/null || true; nginx -s stop -c "$WORK/plain.conf" 2>/dev/null || true; rm -rf "$WORK"' EXIT

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null; then
    echo "--- installing nginx and wrk"
    apt-get update -qq && apt-get install -y -qq nginx-light wrk >/dev/null
fi

UPSTREAM_PORT=18090
TOLLGATE_PORT=18091
TOLLGATE_ADMIN_PORT=18092
NGINX_PORT=18093
EXEMPT_PORT=18094
EXEMPT_ADMIN_PORT=18095
PLAIN_PORT=18096
# Per key: 100,000 requests per second (6,000,000 per minute), bursts of 100,000.
RATE=100000

# TOLLGATE_BINARY=PATH: measure that build (e.g. a previous commit's, for a
# comparison in one sitting) instead of building this checkout's.
if [ -n "${TOLLGATE_BINARY:-}" ]; then
    TOLLGATE="$TOLLGATE_BINARY"
else
    echo "--- building tollgate (release)"
    cargo build --release -q
    TOLLGATE=./target/release/tollgate
fi
BARE_PROXY="${BARE_PROXY_BINARY:-./target/release/examples/bare_proxy}"
if [ -z "${BARE_PROXY_BINARY:-}" ]; then
    cargo build --release -q -p tollgate-gateway --example bare_proxy
fi
BARE_PORT=18097

cat > "$WORK/upstream.conf" <<CONF
worker_processes 1;
pid $WORK/upstream.pid;
error_log $WORK/upstream-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$UPSTREAM_PORT;
        location / { return 200 "ok\n"; }
    }
}
CONF

# proxy_conf NAME PORT LIMIT: nginx in front of the upstream on PORT, with
# `limit_req` when LIMIT is "limit" (the limiter), without it otherwise (a
# plain proxy).
proxy_conf() {
    local name="$1" port="$2" zone="" limit="" per_ip
    if [ "$3" = limit ]; then
        zone="limit_req_zone \$http_authorization zone=per_key:10m rate=${RATE}r/s;
    limit_req_zone \$binary_remote_addr zone=per_ip:10m rate=${RATE}r/s;
    limit_conn_zone \$http_authorization zone=conn:10m;"
        limit="limit_req zone=per_key burst=$RATE nodelay; limit_req_status 429;"
        per_ip="location /ip/ { limit_req zone=per_ip burst=$RATE nodelay; limit_req_status 429; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_pass http://backend; }
        location /conn/ { limit_conn conn 1000; limit_conn_status 429; proxy_http_version 1.1; proxy_set_header Connection \"\"; proxy_pass http://backend; }"
    else
        per_ip=""
    fi
    cat > "$WORK/$name.conf" <<CONF
worker_processes $WORKERS;
pid $WORK/$name.pid;
error_log $WORK/$name-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    $zone
    upstream backend { server 127.0.0.1:$UPSTREAM_PORT; keepalive 128; }
    server {
        listen 127.0.0.1:$port;
        location / {
            $limit
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend;
        }
        $per_ip
    }
}
CONF
}
proxy_conf limiter $NGINX_PORT limit
proxy_conf plain $PLAIN_PORT plain

cat > "$WORK/tollgate.toml" <<CONF
listen = "127.0.0.1:$TOLLGATE_PORT"
workers = $WORKERS
[admin]
listen = "127.0.0.1:$TOLLGATE_ADMIN_PORT"
[limits.default_policy]
algorithm = "token_bucket"
limit = $((RATE * 60))
window_s = 60
burst = $RATE
[[routes]]
prefix = "/"
upstream = "http://127.0.0.1:$UPSTREAM_PORT"
[[routes]]
name = "per_ip"
prefix = "/ip"
upstream = "http://127.0.0.1:$UPSTREAM_PORT"
api_key = "none"
rpm = $((RATE * 60))
burst = $RATE
[[routes]]
name = "in_flight"
prefix = "/conn"
upstream = "http://127.0.0.1:$UPSTREAM_PORT"
max_in_flight = 1000
CONF

# The same gateway with every benchmark key exempt.
{
    echo "listen = \"127.0.0.1:$EXEMPT_PORT\""
    echo "workers = $WORKERS"
    echo "[admin]"
    echo "listen = \"127.0.0.1:$EXEMPT_ADMIN_PORT\""
    echo "[limits]"
    echo "exempt_keys = [$(seq -s, -f '"sk_bench_%g"' 0 $((KEYS - 1)))]"
    sed -n '/^\[limits.default_policy\]/,$p' "$WORK/tollgate.toml"
} > "$WORK/tollgate-exempt.toml"

# wrk: every request carries one of $KEYS API keys, in turn.
cat > "$WORK/keys.lua" <<LUA
local counter = 0
request = function()
    counter = counter + 1
    return wrk.format("GET", nil, { ["Authorization"] = "Bearer sk_bench_" .. (counter % $KEYS) })
end
LUA

nginx -c "$WORK/upstream.conf"
nginx -c "$WORK/limiter.conf"
nginx -c "$WORK/plain.conf"
RUST_LOG=warn "$TOLLGATE" serve --config "$WORK/tollgate.toml" 2>"$WORK/tollgate.log" &
TOLLGATE_PID=$!
RUST_LOG=warn "$TOLLGATE" serve --config "$WORK/tollgate-exempt.toml" 2>"$WORK/tollgate-exempt.log" &
EXEMPT_PID=$!
"$BARE_PROXY" "127.0.0.1:$BARE_PORT" "127.0.0.1:$UPSTREAM_PORT" "$WORKERS" &
BARE_PID=$!
for port in $UPSTREAM_PORT $TOLLGATE_PORT $NGINX_PORT $EXEMPT_PORT $PLAIN_PORT $BARE_PORT; do
    for _ in $(seq 100); do
        curl -s -o /dev/null -H 'Authorization: Bearer warmup' "http://127.0.0.1:$port/" && break
        sleep 0.1
    done
done

# CPU time (user + system, clock ticks) of processes $@, all their threads
# (those that ended included).
cpu_ticks() {
    local total=0 ticks
    for pid in "$@"; do
        ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + ticks))
    done
    echo "$total"
}

# run NAME PORT PIDS...: wrk against PORT (path $RUN_PATH, default /); the
# CPU per request is that of PIDS (the process that answers on PORT) over the
# run.
run() {
    local name="$1" port="$2"
    shift 2
    local before after
    before=$(cpu_ticks "$@")
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency -s "$WORK/keys.lua" \
        "http://127.0.0.1:$port${RUN_PATH:-/}" > "$OUT/$name.txt"
    after=$(cpu_ticks "$@")
    local rps p99 non2xx requests cpu
    rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/$name.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$OUT/$name.txt")
    non2xx=$(awk '/Non-2xx/ {print $4}' "$OUT/$name.txt")
    requests=$(awk '/requests in/ {print $1}' "$OUT/$name.txt")
    cpu=$(awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.1f", ticks / hz * 1e6 / n }')
    printf '%-22s %12s req/s   p99 %8s   CPU %5s us/request   non-2xx %s\n' \
        "$name" "$rps" "$p99" "$cpu" "${non2xx:-0}"
}

echo "--- wrk -t$THREADS -c$CONNECTIONS -d${DURATION}s, $KEYS keys; $WORKERS workers each"
upstream_pids=$(pgrep -P "$(cat "$WORK/upstream.pid")" | tr '\n' ' ')
limiter_pids=$(pgrep -P "$(cat "$WORK/limiter.pid")" | tr '\n' ' ')
plain_pids=$(pgrep -P "$(cat "$WORK/plain.pid")" | tr '\n' ' ')
# shellcheck disable=SC2086 # lists of PIDs
{
    run upstream_direct $UPSTREAM_PORT $upstream_pids
    run tollgate $TOLLGATE_PORT $TOLLGATE_PID
    run nginx_limit_req $NGINX_PORT $limiter_pids
    run tollgate_again $TOLLGATE_PORT $TOLLGATE_PID
    run nginx_limit_req_again $NGINX_PORT $limiter_pids
    run tollgate_exempt $EXEMPT_PORT $EXEMPT_PID
    run nginx_plain_proxy $PLAIN_PORT $plain_pids
    run bare_proxy $BARE_PORT $BARE_PID
    RUN_PATH=/ip/ run tollgate_per_ip $TOLLGATE_PORT $TOLLGATE_PID
    RUN_PATH=/ip/ run nginx_per_ip $NGINX_PORT $limiter_pids
    RUN_PATH=/conn/ run tollgate_in_flight $TOLLGATE_PORT $TOLLGATE_PID
    RUN_PATH=/conn/ run nginx_limit_conn $NGINX_PORT $limiter_pids
}
