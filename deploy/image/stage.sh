#!/usr/bin/env bash
# Stages the image's root filesystem into target/image-root: the release
# binary at /usr/local/bin/tollgate, every shared library `ldd` lists for it
# at its own path, the system's CA certificates, and /etc/passwd and
# /etc/group naming the unprivileged user 65532 (tollgate) the image runs as.
# Usage: deploy/image/stage.sh [BINARY, default target/release/tollgate]
set -euo pipefail
cd "$(dirname "$0")/../.."

BINARY="${1:-target/release/tollgate}"
ROOT=target/image-root
rm -rf "$ROOT"
mkdir -p "$ROOT/usr/local/bin" "$ROOT/etc/ssl/certs" "$ROOT/etc/tollgate" "$ROOT/tmp"
chmod 1777 "$ROOT/tmp"
install -m 0755 "$BINARY" "$ROOT/usr/local/bin/tollgate"
# The libraries the dynamic loader will look for, and the loader itself.
# (POSIX classes only: Debian's default awk, mawk, has no \s. A static
# binary has no libraries, and ldd says so with an exit status of 1.)
libraries="$(ldd "$BINARY" 2>/dev/null || true)"
echo "$libraries" | awk '/=> \// {print $3} /^[[:space:]]*\/[^ ]+ \(/ {print $1}' | while read -r library; do
    mkdir -p "$ROOT$(dirname "$library")"
    cp -L "$library" "$ROOT$library"
done
# A dynamic binary's loader must be in the image, or nothing starts.
interpreter="$(echo "$libraries" | awk '/^[[:space:]]*\/[^ ]+ \(/ {print $1}')"
if [ -n "$interpreter" ] && [ ! -f "$ROOT$interpreter" ]; then
    echo "the dynamic loader $interpreter was not staged" >&2
    exit 1
fi
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    cp /etc/ssl/certs/ca-certificates.crt "$ROOT/etc/ssl/certs/"
fi
echo "tollgate:x:65532:65532:tollgate:/nonexistent:/usr/local/bin/tollgate" >"$ROOT/etc/passwd"
echo "tollgate:x:65532:" >"$ROOT/etc/group"
# The gateway's annotated example, for a first run.
cp examples/gateway.toml "$ROOT/etc/tollgate/gateway.toml"
du -sh "$ROOT" | awk '{print "staged " $1 " into '"$ROOT"'"}'
