# Shared by the bench scripts that start servers on loopback (sourced, not
# run): free ports, waiting for a listener, a throwaway redis-server, and
# `tollgate rls` on bench/rls-config.

# A port on 127.0.0.1 nobody listens on (and not handed out before).
TAKEN=" "
free_port() {
    local port
    while :; do
        port=$(shuf -i 20000-29999 -n 1)
        case "$TAKEN" in *" $port "*) continue ;; esac
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            TAKEN="$TAKEN$port "
            echo "$port"
            return
        fi
    done
}

# wait_port PORT: until something listens on 127.0.0.1:PORT (10 s at most).
wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "nothing listens on 127.0.0.1:$1" >&2
    exit 1
}

# start_redis PORT DIR: a redis-server on 127.0.0.1:PORT keeping nothing on
# disk (its pid file and log in DIR), once it answers PING.
start_redis() {
    local port="$1" dir="$2"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
        --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    echo "redis-server did not start on 127.0.0.1:$port" >&2
    exit 1
}

# start_rls BINARY LOG [REDIS_URL]: BINARY's `tollgate rls` on bench/rls-config,
# on free ports of 127.0.0.1, in memory or on REDIS_URL, statsd off, warnings
# only, its stderr to LOG; sets RLS_PORT (its gRPC port) and RLS_PID.
start_rls() {
    local binary="$1" log="$2" redis="${3:-}" grpc http debug
    grpc=$(free_port)
    http=$(free_port)
    debug=$(free_port)
    env -u REDIS_URL USE_STATSD=false LOG_LEVEL=warn \
        HOST=127.0.0.1 PORT="$http" GRPC_HOST=127.0.0.1 GRPC_PORT="$grpc" \
        DEBUG_HOST=127.0.0.1 DEBUG_PORT="$debug" ${redis:+REDIS_URL="$redis"} \
        "$binary" rls --config bench/rls-config 2>"$log" &
    RLS_PID=$!
    RLS_PORT=$grpc
}
