#!/usr/bin/env bash
# The Debian package, end to end, as .ci/run runs it (as root on Debian 12,
# no systemd running): build it from this tree (dpkg-buildpackage -us -uc
# -b --post-clean, README's recipe, which must leave the tree as it found
# it), lintian (no errors; warnings shown), dpkg -i, toolgate --version,
# README's next step (`toolgate check --config /etc/toolgate/toolgate.json`,
# before the unit ever made /run/toolgate), systemd-analyze verify of the
# installed units, the installed `toolgate serve` with the installed config
# as the toolgate user in the runtime directory the unit would make, then
# dpkg --purge and a check that what the install added is gone.
# Standalone: bash deploy/debian/ci-package.sh
#
# The installed config serves the bundled demo agent
# (/usr/libexec/toolgate/demo-agent): the initialize over the socket must
# get the agent's own answer, and the installed `toolgate demo` must run.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d /tmp/toolgate-deb.XXXXXX)
serve_pid=""
installed=""
cleanup() {
    [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null || true
    # A failed run leaves no package behind for the next one.
    [[ -n $installed ]] && dpkg --purge toolgate >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
say() { echo "ci-package: $*"; }
die() { echo "ci-package: FAILED: $*" >&2; exit 1; }

((EUID == 0)) || die "run as root (dpkg -i, setpriv)"
if dpkg -s toolgate >/dev/null 2>&1; then
    die "a toolgate package is already installed here; purge it first (dpkg --purge toolgate)"
fi

# ---- build: a copy of the tree with deploy/debian as debian/ ----
mkdir -p "$work/toolgate"
tar -C "$src" --exclude=./.git --exclude='./build*' --exclude=node_modules -cf - . | tar -C "$work/toolgate" -xf -
cp -r "$src/deploy/debian" "$work/toolgate/debian"
rm -f "$work/toolgate/debian/ci-package.sh" "$work/toolgate/debian/README.md"
# README's recipe (section "Running as a service") builds with the same
# options; --post-clean runs debian/rules clean after the build, which
# removes dh's build directory (obj-<triplet>/) from the tree.
grep -qF 'dpkg-buildpackage -us -uc -b --post-clean' "$src/README.md" ||
    die "README.md's package recipe is not dpkg-buildpackage -us -uc -b --post-clean"
(cd "$work/toolgate" && find . -path ./debian -prune -o -print | sort) >"$work/tree.before"
say "dpkg-buildpackage -us -uc -b --post-clean"
jobs=$(nproc 2>/dev/null || echo 2)
((jobs > 2)) && jobs=2 # as .ci/run: CI machines are shared
(cd "$work/toolgate" && DEB_BUILD_OPTIONS="parallel=$jobs" dpkg-buildpackage -us -uc -b --post-clean \
    >"$work/build.log" 2>&1) || { tail -50 "$work/build.log"; die "dpkg-buildpackage"; }
(cd "$work/toolgate" && find . -path ./debian -prune -o -print | sort) >"$work/tree.after"
diff "$work/tree.before" "$work/tree.after" >"$work/tree.diff" ||
    { cat "$work/tree.diff"; die "the package build left files in the tree (above)"; }
deb=$(ls "$work"/toolgate_*.deb)
changes=$(ls "$work"/toolgate_*.changes)
say "built $(basename "$deb"): Depends: $(dpkg-deb -f "$deb" Depends)"
for lib in libuv1 libhiredis0.14 libjansson4 libhttp-parser2.9 libssl3; do
    dpkg-deb -f "$deb" Depends | grep -q "\b$lib\b" || die "Depends lacks $lib"
done

# ---- lintian: errors fail; warnings are listed (justified in README.md) ----
say "lintian"
lintian --fail-on error --tag-display-limit 0 "$changes" || die "lintian reported errors"

# ---- install ----
say "dpkg -i"
installed=1
dpkg -i "$deb"
/usr/bin/toolgate --version
getent passwd toolgate >/dev/null || die "no toolgate user"
[[ -f /etc/toolgate/toolgate.json ]] || die "no /etc/toolgate/toolgate.json"
grep -qx /etc/toolgate/toolgate.json /var/lib/dpkg/info/toolgate.conffiles ||
    die "/etc/toolgate/toolgate.json is not a conffile"
for d in /var/lib/toolgate /var/log/toolgate; do
    [[ $(stat -c %U "$d") == toolgate ]] || die "$d is not the toolgate user's"
done

# ---- README's next step, before the unit ever ran ----
# /run/toolgate is the unit's RuntimeDirectory=: missing until the service
# starts, which check reports as a note, not a failure.
say "toolgate check --config /etc/toolgate/toolgate.json (README's step after dpkg -i)"
fresh_run_dir=1
[[ -e /run/toolgate ]] && fresh_run_dir="" # left by something else: no note to expect
/usr/bin/toolgate check --config /etc/toolgate/toolgate.json >"$work/check.out" 2>"$work/check.err" ||
    { cat "$work/check.out" "$work/check.err"; die "toolgate check of the installed config failed"; }
if [[ -n $fresh_run_dir ]]; then
    grep -q 'note: router.listen\[0\].unix: directory /run/toolgate does not exist yet' "$work/check.out" ||
        { cat "$work/check.out"; die "toolgate check: no note on /run/toolgate"; }
fi
say "toolgate check: $(grep -c . "$work/check.out") lines, exit 0"

if command -v systemd-analyze >/dev/null 2>&1; then
    say "systemd-analyze verify"
    # It exits 0 on what it ignores (an unknown key): any output fails.
    out=$(systemd-analyze verify --man=no /lib/systemd/system/toolgate.socket \
        /lib/systemd/system/toolgate.service 2>&1) || die "systemd-analyze verify: $out"
    [[ -z $out ]] || die "systemd-analyze verify: $out"
else
    say "systemd-analyze is not installed: units not verified"
fi

# ---- run: as the unit would (User=toolgate, RuntimeDirectory=toolgate) ----
install -d -o toolgate -g toolgate -m 0755 /run/toolgate
cfg=/etc/toolgate/toolgate.json
sock=$(sed -n 's/.*"unix": *"\([^"]*\)".*/\1/p' "$cfg" | head -1)
admin=$(sed -n 's/.*"admin": *"\([^"]*\)".*/\1/p' "$cfg" | head -1)
agent=$(sed -n 's/.*"command": *\["\([^"]*\)".*/\1/p' "$cfg" | head -1)
[[ $agent == /usr/libexec/toolgate/demo-agent ]] || die "$cfg serves '$agent', not the demo agent"
[[ -x $agent ]] || die "the demo agent $agent is not installed"
say "toolgate serve --config $cfg as toolgate (socket $sock, admin $admin)"
# setpriv execs toolgate itself (runuser would stay as its parent).
setpriv --reuid toolgate --regid toolgate --init-groups -- /usr/bin/toolgate serve --config "$cfg" 2>"$work/serve.log" &
serve_pid=$!
for _ in $(seq 100); do
    grep -q ' serve: serving ' "$work/serve.log" && break
    kill -0 "$serve_pid" 2>/dev/null || { cat "$work/serve.log"; die "serve exited"; }
    sleep 0.1
done
grep -q ' serve: serving ' "$work/serve.log" || { cat "$work/serve.log"; die "serve did not start"; }
[[ -S $sock ]] || die "no socket at $sock"
[[ $(stat -c '%U %a' "$sock") == "toolgate 660" ]] || die "$sock: $(stat -c '%U %a' "$sock")"
if [[ -n $admin ]]; then
    exec 3<>"/dev/tcp/${admin%:*}/${admin##*:}"
    printf 'GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$admin" >&3
    status=$(head -1 <&3)
    exec 3<&-
    [[ $status == *" 200 "* ]] || die "GET /healthz: $status"
    say "admin /healthz: $status"
fi
# An MCP initialize over the socket (node: a Unix socket client that CI
# has anyway, for tests/peer): any JSON-RPC answer with id 1 shows serve
# answers; its text is shown.
if command -v node >/dev/null 2>&1; then
    answer=$(timeout 20 node -e '
        const s = require("net").connect(process.argv[1]);
        let buf = "";
        s.on("connect", () => s.write(JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize",
            params: {protocolVersion: "2025-06-18", capabilities: {},
                     clientInfo: {name: "ci-package", version: "1"}}}) + "\n"));
        s.on("data", d => { buf += d; const i = buf.indexOf("\n");
            if (i >= 0) { console.log(buf.slice(0, i)); s.destroy(); } });
        s.on("error", e => { console.error(e.message); process.exit(1); });' "$sock") ||
        die "initialize over $sock: no answer"
    say "initialize over $sock: ${answer:0:200}"
    [[ $answer == *'"id":1'* ]] || die "initialize over $sock: not an answer to id 1"
    [[ $answer == *'"serverInfo"'* && $answer != *'"error"'* ]] ||
        die "initialize over $sock: not the demo agent's answer"
else
    say "node is not installed: the socket is not asked anything"
fi
kill -TERM "$serve_pid"
wait "$serve_pid" || die "serve exited with status $? on SIGTERM"
serve_pid=""
[[ ! -e $sock ]] || die "serve left $sock behind"

# ---- the installed `toolgate demo` finds the installed demo agent ----
say "toolgate demo"
(cd / && /usr/bin/toolgate demo >"$work/demo.out" 2>&1) || { cat "$work/demo.out"; die "toolgate demo failed"; }
grep -q 'DENIED -32060 rate_limit_exceeded' "$work/demo.out" || { cat "$work/demo.out"; die "toolgate demo: no rate denial"; }
rm -rf "$(sed -n 's|^5\. audit trail: \(/tmp/toolgate-demo-[^/]*\)/audit.jsonl$|\1|p' "$work/demo.out")"

# ---- purge: everything the install added goes (the user stays: README.md) ----
say "dpkg --purge"
dpkg --purge toolgate
installed=""
for p in /usr/bin/toolgate /usr/libexec/toolgate /etc/toolgate /var/lib/toolgate /var/log/toolgate /run/toolgate \
         /lib/systemd/system/toolgate.service /lib/systemd/system/toolgate.socket \
         /usr/share/doc/toolgate; do
    [[ ! -e $p ]] || die "$p is left after purge"
done
say "ok (the toolgate system user is kept on purge, as Debian policy advises)"
