#!/usr/bin/env bash
# The MCP conformance suite (npm @modelcontextprotocol/conformance 0.1.9,
# its server scenarios) against `toolgate serve --http` fronting the
# suite's own reference server on stdio (conformance/server.mjs, below).
# Every scenario passes against that server directly, so every one must
# pass through toolgate. Default limits: the suite opens a session per
# scenario and never ends one, which also checks that sessions a client
# left are evicted at max_instances (README, "Remote callers over HTTP").
#
# conformance/server.mjs is examples/servers/typescript/everything-server.ts
# of github.com/modelcontextprotocol/conformance at tag v0.1.9 (MIT,
# Anthropic PBC) with its Express/HTTP part replaced by the SDK's
# StdioServerTransport, types stripped with esbuild. It has its own
# package.json (conformance/): the server needs zod 3, the SDK client tests
# here zod 4. Usage: tests/peer/conformance.sh TOOLGATE
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
toolgate=${1:?usage: tests/peer/conformance.sh TOOLGATE}
(cd "$here/conformance" && npm ci --no-audit --no-fund --loglevel=error)
suite="$here/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
work=$(mktemp -d /tmp/toolgate-conformance.XXXXXX)
serve_pid=""
cleanup() {
    [[ -n $serve_pid ]] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$toolgate" serve --http 127.0.0.1:0 -- node "$here/conformance/server.mjs" 2>"$work/serve.log" &
serve_pid=$!
port=""
for _ in $(seq 100); do
    port=$(sed -n 's/.*MCP Streamable HTTP on .*(port \([0-9]*\)).*/\1/p' "$work/serve.log")
    [[ -n $port ]] && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
done
[[ -n $port ]] || { cat "$work/serve.log" >&2; echo "conformance: serve did not start" >&2; exit 1; }
url="http://127.0.0.1:$port/mcp"
echo "conformance: suite $(node -p "require('$here/conformance/node_modules/@modelcontextprotocol/conformance/package.json').version") against $url"

fail=0
cd "$work" # the suite writes results/ where it runs
if ! node "$suite" server --url "$url" >"$work/all.txt" 2>&1; then fail=1; fi
sed -n '/=== SUMMARY ===/,$p' "$work/all.txt"
grep -Eq '^Total: [0-9]+ passed, 0 failed' "$work/all.txt" || fail=1
# Scenarios outside the default run that the reference server passes.
for s in tools-call-elicitation elicitation-sep1034-defaults elicitation-sep1330-enums \
         json-schema-2020-12; do
    out=$(node "$suite" server --url "$url" --scenario "$s" 2>&1) || true
    line=$(grep -E '^Passed: [0-9]+/[0-9]+, [0-9]+ failed' <<<"$out" | tail -1)
    echo "$s: ${line:-no result}"
    [[ $line =~ ^Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] ||
        { fail=1; echo "$out" | tail -20; }
done
if ((fail)); then
    echo "conformance: FAILED (toolgate's log follows)" >&2
    tail -30 "$work/serve.log" >&2
    exit 1
fi
echo "conformance: every scenario passed through toolgate"
