#!/usr/bin/env bash
# The cost of limiting, in user-space instructions per proxied request, counted
# by callgrind (repeatable on a busy machine, where wall-clock figures are not).
# Ten servers in front of one nginx upstream answering 200, each run alone
# under `valgrind --tool=callgrind`:
#
#   tollgate_limiting  `tollgate serve`, one worker, a token bucket per API key
#                      (every request passes) and its rate-limit headers
#   tollgate_exempt    the same with every benchmark key exempt: no limit
#                      decided, no rate-limit headers (the proxy path alone)
#   tollgate_no_top_keys  limiting, without counting the top keys
#                      (`[admin] top_keys = false`): what `/admin/top` costs
#   tollgate_headers_none, tollgate_headers_ietf  limiting with no rate-limit
#                      headers, and with RateLimit-Policy and RateLimit only
#                      (`[responses] rate_limit_headers`): what the headers cost
#   bare_proxy         the floor of tollgate's HTTP stack: a reverse proxy of a
#                      few dozen lines on the same hyper, hyper-util and tokio
#                      and release profile, no routing, limiting or metrics
#                      (crates/tollgate-gateway/examples/bare_proxy.rs)
#   bare_proxy_one_task  the same with its upstream connection driven in the
#                      client connection's task, not a spawned one: the
#                      prototype of hyper's conn APIs driven differently
#   bare_proxy_auto    the bare proxy with its client connections served by
#                      hyper-util's `auto` builder, as the gateway's listener
#                      serves them: what HTTP/1-or-HTTP/2 detection costs
#   nginx_plain        nginx as a plain proxy (one process)
#   nginx_limit_req    the same with `limit_req` keyed by the same header
#
# For each: a warm-up, the counters zeroed, `wrk -t1 -c8 -d<seconds>s` with
# every request carrying one of 100 API keys in turn, the counters dumped; the
# instructions (all threads) divided by wrk's request count. The cost of
# limiting is limiting less exempt for tollgate and limit_req less plain for
# nginx; the script prints both and their ratio, limiting without headers
# (headers_none less exempt) against nginx's, the five headers' cost (all
# less none) and each family's (ietf less none, all less ietf), tollgate's
# own overhead (exempt / bare proxy), the stack's (bare proxy / nginx plain)
# and the whole path against nginx's (limiting / limit_req), and writes each
# server's callgrind breakdown by function (inclusive and self) to
# bench/out/, and what limiting adds, function by function (limiting less
# exempt, limit_req less plain, headers_none less exempt, limiting less
# headers_ietf: the X-RateLimit-* headers; the script's Python part reads
# callgrind's output files).
# Installs valgrind, nginx, wrk and python3 from Debian's packages if missing.
#
# Usage: bench/limit_cost.sh [seconds under wrk, default 8]
# (NO_BUILD=1 measures the release binaries already built; TOLLGATE_BINARY=PATH
# measures that build instead, e.g. a previous commit's, and builds nothing;
# BARE_PROXY_BINARY=PATH likewise for the bare proxy.)
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION="${1:-8}"
KEYS=100
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
cleanup() {
    kill $(jobs -p) 2>/dev/null || true
    nginx -s stop -p "$WORK" -c "$WORK/upstream.conf" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v nginx >/dev/null || ! command -v wrk >/dev/null || ! command -v valgrind >/dev/null \
    || ! command -v python3 >/dev/null; then
    echo "--- installing nginx, wrk, valgrind and python3"
    apt-get update -qq && apt-get install -y -qq nginx-light wrk valgrind python3 >/dev/null
fi

UPSTREAM_PORT=18190
SERVER_PORT=18191
ADMIN_PORT=18192
# Per key: 100,000 requests per second (6,000,000 per minute), bursts of 100,000.
RATE=100000

TOLLGATE="${TOLLGATE_BINARY:-./target/release/tollgate}"
BARE_PROXY="${BARE_PROXY_BINARY:-./target/release/examples/bare_proxy}"
if [ -z "${NO_BUILD:-}" ] && [ -z "${TOLLGATE_BINARY:-}" ]; then
    echo "--- building tollgate and the bare proxy (release)"
    cargo build --release -q -p tollgate
    cargo build --release -q -p tollgate-gateway --example bare_proxy
elif [ ! -x "$BARE_PROXY" ]; then
    cargo build --release -q -p tollgate-gateway --example bare_proxy
fi

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

# nginx_conf NAME LIMIT_REQ_LINES: one nginx process (no master, in the
# foreground) proxying to the upstream, so callgrind sees all of its work.
nginx_conf() {
    local name="$1" zone="$2" limit="$3"
    cat > "$WORK/$name.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
pid $WORK/$name.pid;
error_log $WORK/$name-error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $WORK/$name-body;
    proxy_temp_path $WORK/$name-proxy;
    fastcgi_temp_path $WORK/$name-fastcgi;
    uwsgi_temp_path $WORK/$name-uwsgi;
    scgi_temp_path $WORK/$name-scgi;
    $zone
    upstream backend { server 127.0.0.1:$UPSTREAM_PORT; keepalive 128; }
    server {
        listen 127.0.0.1:$SERVER_PORT;
        location / {
            $limit
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://backend;
        }
    }
}
CONF
}
nginx_conf nginx_plain "" ""
nginx_conf nginx_limit_req \
    "limit_req_zone \$http_authorization zone=per_key:10m rate=${RATE}r/s;" \
    "limit_req zone=per_key burst=$RATE nodelay; limit_req_status 429;"

cat > "$WORK/tollgate_limiting.toml" <<CONF
listen = "127.0.0.1:$SERVER_PORT"
workers = 1
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[limits.default_policy]
algorithm = "token_bucket"
limit = $((RATE * 60))
window_s = 60
burst = $RATE
[[routes]]
prefix = "/"
upstream = "http://127.0.0.1:$UPSTREAM_PORT"
CONF
# The same gateway with every benchmark key exempt.
{
    sed -n '1,/^\[admin\]/p' "$WORK/tollgate_limiting.toml"
    echo "listen = \"127.0.0.1:$ADMIN_PORT\""
    echo "[limits]"
    echo "exempt_keys = [$(seq -s, -f '"sk_bench_%g"' 0 $((KEYS - 1)))]"
    sed -n '/^\[limits.default_policy\]/,$p' "$WORK/tollgate_limiting.toml"
} > "$WORK/tollgate_exempt.toml"

# The limiting gateway without counting its top keys (`[admin] top_keys`).
sed 's/^\[admin\]$/[admin]\ntop_keys = false/' "$WORK/tollgate_limiting.toml" \
    >"$WORK/tollgate_no_top_keys.toml"

# The limiting gateway with no rate-limit headers, and with the IETF
# draft's two only (`[responses] rate_limit_headers`).
for set in none ietf; do
    { cat "$WORK/tollgate_limiting.toml"; printf '[responses]\nrate_limit_headers = "%s"\n' "$set"; } \
        >"$WORK/tollgate_headers_$set.toml"
done

# wrk: every request carries one of $KEYS API keys, in turn.
cat > "$WORK/keys.lua" <<LUA
local counter = 0
request = function()
    counter = counter + 1
    return wrk.format("GET", "/", { ["Authorization"] = "Bearer sk_bench_" .. (counter % $KEYS) })
end
LUA

nginx -p "$WORK" -c "$WORK/upstream.conf"

wait_for_port() {
    for _ in $(seq 600); do
        curl -s -o /dev/null -H 'Authorization: Bearer sk_bench_0' "http://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    echo "nothing answers on port $1" >&2
    return 1
}
wait_for_port $UPSTREAM_PORT

# measure NAME COMMAND...: COMMAND under callgrind; prints the instructions per
# request and keeps the breakdown in $OUT/limit_cost-NAME.txt.
measure() {
    local name="$1"
    shift
    RUST_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.cg" \
        "$@" >"$WORK/$name.log" 2>&1 &
    local pid=$!
    wait_for_port $SERVER_PORT
    # Warm-up: connections, upstream connections, every key's state and headers.
    wrk -t1 -c8 -d2s -s "$WORK/keys.lua" "http://127.0.0.1:$SERVER_PORT/" >/dev/null
    callgrind_control -z "$pid" >/dev/null
    wrk -t1 -c8 -d"${DURATION}s" -s "$WORK/keys.lua" "http://127.0.0.1:$SERVER_PORT/" \
        >"$OUT/limit_cost-$name-wrk.txt"
    callgrind_control -d "$pid" >/dev/null
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    local dump requests instructions non2xx
    dump=$(ls -t "$WORK/$name.cg".* | head -1)
    requests=$(awk '/requests in/ {print $1}' "$OUT/limit_cost-$name-wrk.txt")
    non2xx=$(awk '/Non-2xx/ {print $4}' "$OUT/limit_cost-$name-wrk.txt")
    instructions=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
    callgrind_annotate --inclusive=yes "$dump" >"$WORK/$name-inclusive.txt" 2>&1 || true
    callgrind_annotate "$dump" >"$WORK/$name-self.txt" 2>&1 || true
    {
        echo "# $name: $instructions instructions over $requests requests"
        echo "# inclusive"
        sed -n '1,100p' "$WORK/$name-inclusive.txt"
        echo "# self"
        sed -n '1,100p' "$WORK/$name-self.txt"
    } >"$OUT/limit_cost-$name.txt"
    cp "$dump" "$OUT/limit_cost-$name.callgrind"
    PER_REQUEST=$((instructions / requests))
    REQUESTS=$requests
    printf '%-18s %9d instructions per request (%d requests, non-2xx %s)\n' \
        "$name" "$PER_REQUEST" "$requests" "${non2xx:-0}"
}

echo "--- callgrind, wrk -t1 -c8 -d${DURATION}s, $KEYS keys"
measure tollgate_limiting "$TOLLGATE" serve --config "$WORK/tollgate_limiting.toml"
TOLLGATE_LIMITING=$PER_REQUEST
TOLLGATE_LIMITING_REQUESTS=$REQUESTS
measure tollgate_exempt "$TOLLGATE" serve --config "$WORK/tollgate_exempt.toml"
TOLLGATE_EXEMPT=$PER_REQUEST
TOLLGATE_EXEMPT_REQUESTS=$REQUESTS
measure tollgate_no_top_keys "$TOLLGATE" serve --config "$WORK/tollgate_no_top_keys.toml"
TOLLGATE_NO_TOP_KEYS=$PER_REQUEST
measure tollgate_headers_none "$TOLLGATE" serve --config "$WORK/tollgate_headers_none.toml"
TOLLGATE_HEADERS_NONE=$PER_REQUEST
TOLLGATE_HEADERS_NONE_REQUESTS=$REQUESTS
measure tollgate_headers_ietf "$TOLLGATE" serve --config "$WORK/tollgate_headers_ietf.toml"
TOLLGATE_HEADERS_IETF=$PER_REQUEST
TOLLGATE_HEADERS_IETF_REQUESTS=$REQUESTS
measure bare_proxy "$BARE_PROXY" "127.0.0.1:$SERVER_PORT" "127.0.0.1:$UPSTREAM_PORT" 1
BARE=$PER_REQUEST
BARE_REQUESTS=$REQUESTS
measure bare_proxy_one_task "$BARE_PROXY" "127.0.0.1:$SERVER_PORT" "127.0.0.1:$UPSTREAM_PORT" 1 one-task
BARE_ONE_TASK=$PER_REQUEST
BARE_ONE_TASK_REQUESTS=$REQUESTS
measure bare_proxy_auto "$BARE_PROXY" "127.0.0.1:$SERVER_PORT" "127.0.0.1:$UPSTREAM_PORT" 1 auto
BARE_AUTO=$PER_REQUEST
BARE_AUTO_REQUESTS=$REQUESTS
measure nginx_plain nginx -p "$WORK" -c "$WORK/nginx_plain.conf"
NGINX_PLAIN=$PER_REQUEST
NGINX_PLAIN_REQUESTS=$REQUESTS
measure nginx_limit_req nginx -p "$WORK" -c "$WORK/nginx_limit_req.conf"
NGINX_LIMIT_REQ=$PER_REQUEST
NGINX_LIMIT_REQ_REQUESTS=$REQUESTS

TOLLGATE_COST=$((TOLLGATE_LIMITING - TOLLGATE_EXEMPT))
NGINX_COST=$((NGINX_LIMIT_REQ - NGINX_PLAIN))
echo "--- the cost of limiting, instructions per request"
echo "tollgate (limiting - exempt):    $TOLLGATE_COST"
echo "nginx (limit_req - plain proxy): $NGINX_COST"
echo "tollgate's top keys (limiting - limiting with [admin] top_keys = false): \
$((TOLLGATE_LIMITING - TOLLGATE_NO_TOP_KEYS))"
awk -v t="$TOLLGATE_COST" -v n="$NGINX_COST" \
    'BEGIN { if (n > 0) printf "ratio tollgate / nginx: %.2f\n", t / n }'
echo "--- limiting without rate-limit headers, and each header's cost"
TOLLGATE_COST_NO_HEADERS=$((TOLLGATE_HEADERS_NONE - TOLLGATE_EXEMPT))
echo "tollgate without headers (rate_limit_headers = none, less exempt): $TOLLGATE_COST_NO_HEADERS"
awk -v t="$TOLLGATE_COST_NO_HEADERS" -v n="$NGINX_COST" \
    'BEGIN { if (n > 0) printf "ratio tollgate without headers / nginx: %.2f (target: at most 1.0)\n", t / n }'
awk -v all="$TOLLGATE_LIMITING" -v ietf="$TOLLGATE_HEADERS_IETF" -v none="$TOLLGATE_HEADERS_NONE" \
    'BEGIN {
        printf "the five headers (all - none): %d, %.0f each (target: at most 250 each)\n", all - none, (all - none) / 5
        printf "RateLimit-Policy and RateLimit (ietf - none): %d, %.0f each\n", ietf - none, (ietf - none) / 2
        printf "the three X-RateLimit-* (all - ietf): %d, %.0f each\n", all - ietf, (all - ietf) / 3
    }'
echo "--- the whole path, instructions per request"
awk -v e="$TOLLGATE_EXEMPT" -v b="$BARE" -v p="$NGINX_PLAIN" -v l="$TOLLGATE_LIMITING" -v o="$BARE_ONE_TASK" \
    -v a="$BARE_AUTO" -v r="$NGINX_LIMIT_REQ" 'BEGIN {
        printf "own overhead, exempt / bare proxy:  %.2f (target: at most 1.15)\n", e / b
        printf "the stack, bare proxy / nginx plain: %.2f\n", b / p
        printf "the prototype, upstream connection in the client connection'"'"'s task / bare proxy: %.3f\n", o / b
        printf "hyper-util auto detection, bare proxy auto - bare proxy: %+d\n", a - b
        printf "whole path, limiting / limit_req:    %.2f (target: at most 1.3)\n", l / r
    }'
# What limiting adds, by function: self instructions per request with
# limiting less without, largest first.
by_function() {
    python3 bench/by_function.py "$@"
}
by_function 40 "$OUT/limit_cost-tollgate_limiting.callgrind" "$TOLLGATE_LIMITING_REQUESTS" \
    "$OUT/limit_cost-tollgate_exempt.callgrind" "$TOLLGATE_EXEMPT_REQUESTS" \
    >"$OUT/limit_cost-tollgate-added.txt"
by_function 40 "$OUT/limit_cost-nginx_limit_req.callgrind" "$NGINX_LIMIT_REQ_REQUESTS" \
    "$OUT/limit_cost-nginx_plain.callgrind" "$NGINX_PLAIN_REQUESTS" \
    >"$OUT/limit_cost-nginx-added.txt"
by_function 40 "$OUT/limit_cost-tollgate_exempt.callgrind" "$TOLLGATE_EXEMPT_REQUESTS" \
    "$OUT/limit_cost-bare_proxy.callgrind" "$BARE_REQUESTS" \
    >"$OUT/limit_cost-tollgate-over-bare.txt"
by_function 40 "$OUT/limit_cost-tollgate_headers_none.callgrind" "$TOLLGATE_HEADERS_NONE_REQUESTS" \
    "$OUT/limit_cost-tollgate_exempt.callgrind" "$TOLLGATE_EXEMPT_REQUESTS" \
    >"$OUT/limit_cost-tollgate-no-headers-added.txt"
by_function 40 "$OUT/limit_cost-tollgate_limiting.callgrind" "$TOLLGATE_LIMITING_REQUESTS" \
    "$OUT/limit_cost-tollgate_headers_ietf.callgrind" "$TOLLGATE_HEADERS_IETF_REQUESTS" \
    >"$OUT/limit_cost-tollgate-x-ratelimit-headers.txt"
by_function 40 "$OUT/limit_cost-bare_proxy_one_task.callgrind" "$BARE_ONE_TASK_REQUESTS" \
    "$OUT/limit_cost-bare_proxy.callgrind" "$BARE_REQUESTS" \
    >"$OUT/limit_cost-bare-one-task-over-spawned.txt"
by_function 40 "$OUT/limit_cost-bare_proxy_auto.callgrind" "$BARE_AUTO_REQUESTS" \
    "$OUT/limit_cost-bare_proxy.callgrind" "$BARE_REQUESTS" \
    >"$OUT/limit_cost-bare-auto-over-http1.txt"
echo "--- what limiting adds to tollgate, by function (self instructions per request)"
head -22 "$OUT/limit_cost-tollgate-added.txt"
echo "--- what limit_req adds to nginx"
head -12 "$OUT/limit_cost-nginx-added.txt"
echo "--- what tollgate's exempt path adds to the bare proxy"
head -22 "$OUT/limit_cost-tollgate-over-bare.txt"
echo "breakdowns by function: $OUT/limit_cost-*.txt"
