#!/usr/bin/env bash
# How fast `tollgate replay` reads, and how much memory it holds: a tollgate
# JSON access log of N lines (default 1,000,000; 10,000 keys on two routes,
# one request every 100 µs, so a million lines span 100 s), made by Python,
# replayed through a configuration of a fixed window and a token bucket
# tier; then a log twice as long, to show that memory follows the keys, not
# the lines. Prints the wall time, lines per second and the peak resident
# memory (GNU time's maximum RSS) of each run.
#
# Usage: bench/replay.sh [lines, default 1000000]
# (NO_BUILD=1 uses the release binary already built.)
set -euo pipefail
cd "$(dirname "$0")/.."

LINES="${1:-1000000}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

if ! [ -x /usr/bin/time ] || ! command -v python3 >/dev/null; then
    apt-get update -qq && apt-get install -y -qq time python3 >/dev/null
fi
if [ -z "${NO_BUILD:-}" ]; then
    echo "--- building tollgate (release)"
    cargo build --release -q -p tollgate
fi

cat > "$WORK/gateway.toml" <<CONF
[limits.default_policy]
algorithm = "fixed_window"
limit = 50
window_s = 60
[limits.tiers.pro]
algorithm = "token_bucket"
limit = 600
window_s = 60
burst = 50
[[routes]]
name = "orders"
prefix = "/orders"
upstream = "http://127.0.0.1:1"
[[routes]]
name = "search"
prefix = "/search"
upstream = "http://127.0.0.1:1"
rpm = 30
CONF

make_log() {
    python3 - "$1" "$2" <<'PY'
import sys, datetime
lines, path = int(sys.argv[1]), sys.argv[2]
start = datetime.datetime(2026, 12, 1, tzinfo=datetime.timezone.utc)
with open(path, "w") as out:
    for i in range(lines):
        micros = i * 100
        t = start + datetime.timedelta(microseconds=micros)
        key = f"{i % 10000:016x}"
        tier = "pro" if i % 10000 < 1000 else "default"
        route, path_ = ("search", "/search") if i % 3 == 0 else ("orders", "/orders/1")
        out.write(
            f'{{"time":"{t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}","method":"GET","path":"{path_}",'
            f'"status":200,"route":"{route}","tier":"{tier}","key":"{key}","client":"10.0.0.1",'
            f'"decision":"allowed","policy":"{tier}","remaining":1,"upstream_status":200,'
            f'"duration_us":100,"wait_us":0,"bytes":2}}\n'
        )
PY
}

run() {
    local lines="$1"
    make_log "$lines" "$WORK/access.log"
    local start end
    start=$(date +%s.%N)
    /usr/bin/time -f "%M" -o "$WORK/rss" ./target/release/tollgate replay \
        --config "$WORK/gateway.toml" --format json "$WORK/access.log" >"$WORK/report.json"
    end=$(date +%s.%N)
    python3 - "$lines" "$start" "$end" "$(cat "$WORK/rss")" "$WORK/report.json" <<'PY'
import sys, json
lines, start, end, rss, path = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
report = json.load(open(path))
config = report["configs"][0]
seconds = end - start
print(f"{lines:>9} lines: {seconds:6.2f} s, {lines / seconds:>10,.0f} lines/s, "
      f"peak RSS {rss / 1024:6.1f} MiB, {config['overall']['refused']} would be refused, "
      f"{report['bad_lines']} bad")
PY
}

echo "--- tollgate replay, a tollgate JSON log, 10,000 keys"
run "$LINES"
run $((LINES * 2))
