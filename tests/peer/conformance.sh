#!/usr/bin/env bash
# The MCP conformance suite (npm @modelcontextprotocol/conformance 0.1.9,
# its server scenarios) against `toolgate serve --http` fronting the
# suite's own reference server on stdio (conformance/server.mjs, below).
# Every scenario passes against that server directly, so every one must
# pass through toolgate. Default limits: the suite opens a session per
# scenario and never ends one, which also checks that sessions a client
# left are evicted at max_instances (README, "Remote callers over HTTP").
#
# The same suite, at the same time, against an aggregate (issue 22):
# `toolgate serve --config` with an HTTP listener whose "agents" list holds
# the reference server alone, with "tool_prefix": "". Each scenario must
# end as it does in the first run.
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
serve_pids=()
cleanup() {
    local pid
    for pid in "${serve_pids[@]}"; do
        kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# start LOG ARGS...: toolgate ARGS in the background, its log in LOG; sets
# url to the Streamable HTTP endpoint it serves.
start() {
    local log=$1
    shift
    "$toolgate" "$@" 2>"$log" &
    serve_pids+=("$!")
    url=""
    for _ in $(seq 100); do
        url=$(sed -n 's/.*MCP Streamable HTTP on \(http:[^ ]*\) (port [0-9]*).*/\1/p' "$log" | head -1)
        [[ -n $url ]] && break
        kill -0 "${serve_pids[-1]}" 2>/dev/null || break
        sleep 0.1
    done
    [[ -n $url ]] || { cat "$log" >&2; echo "conformance: toolgate $* did not start" >&2; exit 1; }
}

start "$work/serve.log" serve --http 127.0.0.1:0 -- node "$here/conformance/server.mjs"
direct_url=$url
cat >"$work/hub.json" <<EOF
{"router": {"listen": [{"http": "127.0.0.1:0", "agents": ["conformance"]}]},
 "audit": {"path": "$work/hub.audit.jsonl"},
 "agents": [{"id": "conformance", "command": ["$(command -v node)", "$here/conformance/server.mjs"],
             "tool_prefix": "", "env": {"pass": ["PATH", "HOME"]}}]}
EOF
start "$work/hub.log" serve --config "$work/hub.json"
hub_url=$url
echo "conformance: suite $(node -p "require('$here/conformance/node_modules/@modelcontextprotocol/conformance/package.json').version") against $direct_url (serve --http) and $hub_url (an aggregate of the one server)"

# Scenarios outside the default run that the reference server passes.
extras=(tools-call-elicitation elicitation-sep1034-defaults elicitation-sep1330-enums json-schema-2020-12)
# run_suite DIR URL: the default run and the extras against URL, in DIR
# (the suite writes results/ where it runs). DIR/results.txt gets one line
# per scenario: "NAME: N passed, M failed" or "NAME: Passed: N/M, ...".
run_suite() {
    local dir=$1 url=$2 s line
    mkdir -p "$dir"
    cd "$dir"
    node "$suite" server --url "$url" >all.txt 2>&1 || true
    sed -n '/=== SUMMARY ===/,$p' all.txt |
        sed -n 's/^[^ ]* \([a-z0-9-]*: [0-9]* passed, [0-9]* failed\)$/\1/p' >results.txt
    for s in "${extras[@]}"; do
        node "$suite" server --url "$url" --scenario "$s" >"extra-$s.txt" 2>&1 || true
        line=$(grep -E '^Passed: [0-9]+/[0-9]+, [0-9]+ failed' "extra-$s.txt" | tail -1 || true)
        echo "$s: ${line:-no result}" >>results.txt
    done
}
# Both runs at once: the suite mostly waits.
run_suite "$work/direct" "$direct_url" &
direct_run=$!
run_suite "$work/hub" "$hub_url" &
hub_run=$!
wait "$direct_run" || true
wait "$hub_run" || true

# Why scenario $2 failed in run $1, from the suite's checks.json.
why() {
    cat "$work/$1"/results/server-"$2"-*/checks.json 2>/dev/null | node -e '
        let t = ""; process.stdin.on("data", (c) => (t += c)).on("end", () => {
            try { console.log(JSON.parse(t).filter((c) => c.status !== "SUCCESS")
                .map((c) => `${c.id}: ${c.errorMessage ?? c.status}`).join(" | ")); }
            catch { console.log("(no checks.json)"); } });'
}

fail=0
sed -n '/=== SUMMARY ===/,$p' "$work/direct/all.txt"
grep -Eq '^Total: [0-9]+ passed, 0 failed' "$work/direct/all.txt" || fail=1
for s in "${extras[@]}"; do
    line=$(grep "^$s: " "$work/direct/results.txt")
    echo "$line"
    [[ $line =~ ^$s:\ Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] ||
        { fail=1; tail -20 "$work/direct/extra-$s.txt"; }
done
total=$(wc -l <"$work/direct/results.txt")
((total >= 26 + ${#extras[@]})) ||
    { fail=1; echo "conformance: the first run ended fewer scenarios than expected:"; cat "$work/direct/results.txt"; }

# The aggregate: each scenario as in the first run, but for the toolgate
# bugs listed here, each one printed; a listed scenario that ends as in the
# first run fails the test too, so that the list is emptied with the fix.
#
# Empty: a URI no agent listed in the session goes to the one agent that
# offers resources (hub.c resources_leg), as the suite's reads need.
known_hub_bugs=" "
same=0
while IFS= read -r want; do
    name=${want%%:*}
    got=$(grep "^$name: " "$work/hub/results.txt" || echo "$name: no result")
    if [[ $got == "$want" ]]; then
        same=$((same + 1))
        if [[ $known_hub_bugs == *" $name "* ]]; then
            fail=1
            echo "conformance: aggregate: $name now ends as in the first run: remove it from known_hub_bugs"
        fi
    elif [[ $known_hub_bugs == *" $name "* ]]; then
        echo "conformance: aggregate: KNOWN TOOLGATE BUG (hub resource routing): $name: first run '${want#*: }', aggregate '${got#*: }': $(why hub "$name")"
    else
        fail=1
        echo "conformance: aggregate: $name differs: first run '${want#*: }', aggregate '${got#*: }': $(why hub "$name")"
    fi
done <"$work/direct/results.txt"
echo "conformance: aggregate: $same of $total scenarios end as in the first run"
if ((fail)); then
    echo "conformance: FAILED (toolgate's logs follow)" >&2
    tail -30 "$work/serve.log" >&2
    echo "--- the aggregate (serve --config) ---" >&2
    tail -30 "$work/hub.log" >&2
    exit 1
fi
echo "conformance: every scenario passed through toolgate, and through the aggregate as well but for the known bugs above"
