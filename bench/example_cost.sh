# Sourced by bench/layer_cost.sh and bench/decision_cost.sh: an example's
# cost per call, counted by callgrind.
#
# example_cost PACKAGE EXAMPLE COUNT MODE...: builds the release example
# EXAMPLE of PACKAGE (unless NO_BUILD is set), then runs it once per MODE
# as `EXAMPLE MODE COUNT` under `valgrind --tool=callgrind
# --toggle-collect=EXAMPLE::measured`, so only the COUNT measured calls
# count (not the set-up or the warm-up); keeps each run's output as
# bench/out/EXAMPLE-MODE.callgrind and sets PER_CALL[MODE] to the
# instructions collected divided by COUNT. A run that fails prints its log
# and exits. Installs valgrind and python3 from Debian's packages if
# missing (bench/by_function.py, which the callers run next, needs it).

declare -A PER_CALL

example_cost() {
    local package="$1" example="$2" count="$3"
    shift 3
    local out="bench/out" log collected
    mkdir -p "$out"
    if ! command -v valgrind >/dev/null || ! command -v python3 >/dev/null; then
        echo "--- installing valgrind and python3"
        apt-get update -qq && apt-get install -y -qq valgrind python3 >/dev/null
    fi
    if [ -z "${NO_BUILD:-}" ]; then
        echo "--- building the example (release)"
        cargo build --release -q -p "$package" --example "$example"
    fi
    local binary="${CARGO_TARGET_DIR:-target}/release/examples/$example"
    log="$(mktemp)"
    echo "--- callgrind, $count each"
    for mode in "$@"; do
        valgrind --tool=callgrind --toggle-collect="$example::measured" \
            --callgrind-out-file="$out/$example-$mode.callgrind" \
            "$binary" "$mode" "$count" >"$log" 2>&1 || {
            cat "$log" >&2
            rm -f "$log"
            exit 1
        }
        collected=$(awk '/^(summary|totals):/ {print $2; exit}' "$out/$example-$mode.callgrind")
        PER_CALL[$mode]=$((collected / count))
    done
    rm -f "$log"
}
