#!/bin/sh
# Build the libFuzzer targets with clang (-DTG_FUZZ=ON) into build-fuzz and
# run them for SECONDS in all (default 30), split between them:
#   fuzz_frames  three eighths less a sixteenth  ndjson codec + MCP envelope scanner,
#                       differential against jansson, on a copy of corpus/;
#   fuzz_caller  an eighth  the caller-frame path of both dialects in a
#                       window of fixed size: asserts the memory bound;
#   fuzz_lenpfx  a quarter  lenpfx codec + OpenSentience envelope scanner
#                       and encoders, differential against jansson, on a
#                       copy of corpus_os/;
#   fuzz_h1req   a sixteenth (from fuzz_frames' share)  the HTTP/1.1
#                       request reader: bounds, consumed <= fed, split
#                       independence, on a copy of corpus_http/;
#   fuzz_expose  a sixteenth (from fuzz_audit's share)  exposed names,
#                       cursors and the name and URI tables of issue 22:
#                       bounds, a reference for names and template
#                       matches, decode(encode(x)) == x, on a copy of
#                       corpus_expose/;
#   fuzz_bridge  a sixteenth (from fuzz_audit's share)  the sealed
#                       requestState and the bridge's translations
#                       (router/codec/seal, bridge26), on a copy of
#                       corpus_bridge/;
#   fuzz_mcp26   a sixteenth (from fuzz_audit's share)  the MCP 2026-07-28
#                       request metadata: decode(encode(x)) == x for the
#                       Base64 sentinel, headers against arbitrary bodies,
#                       x-mcp-header maps of arbitrary tools, on a copy of
#                       corpus_mcp26/;
#   fuzz_audit   the rest   the audit encoder.
# Each target gets at least one second. Runs use scratch copies of the
# checked-in corpora, so new inputs found here never land in the tree.
# Usage: tests/fuzz/run.sh [SECONDS]
# Exit status: 0 when the run ends without a finding, non-zero otherwise
# (the crashing input is left in build-fuzz/fuzz/artifacts/).
set -eu

secs=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-fuzz"
jobs=${JOBS:-2}

at_least_1() { if [ "$1" -lt 1 ]; then echo 1; else echo "$1"; fi; }
t_h1req=$(at_least_1 $((secs / 16)))
t_frames=$(at_least_1 $((secs / 2 - secs / 8 - secs / 16)))
t_caller=$(at_least_1 $((secs / 8)))
t_lenpfx=$(at_least_1 $((secs / 4)))
t_expose=$(at_least_1 $((secs / 16)))
t_mcp26=$(at_least_1 $((secs / 16)))
t_bridge=$(at_least_1 $((secs / 16)))
t_audit=$(at_least_1 $((secs - secs / 2 - secs / 4 - secs / 16 - secs / 16 - secs / 16)))

CC=${CC:-clang} cmake -S "$root" -B "$build" -DTG_FUZZ=ON -DTG_TESTS=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_frames fuzz_caller fuzz_lenpfx fuzz_audit fuzz_h1req \
    fuzz_expose fuzz_mcp26 fuzz_bridge

art="$build/fuzz/artifacts"
mkdir -p "$art"

# ASan/UBSan findings abort; leaks are findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# run TARGET SECONDS [CORPUS]: fuzz on a scratch copy of CORPUS (or from nothing)
run() {
    work="$build/fuzz/$1-run"
    rm -rf "$work"
    mkdir -p "$work"
    if [ -n "${3:-}" ]; then
        cp "$3"/* "$work"/
    fi
    "$build/fuzz/$1" -max_total_time="$2" -max_len=4096 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$work"
}

run fuzz_frames "$t_frames" "$here/corpus"
run fuzz_caller "$t_caller" "$here/corpus"
run fuzz_lenpfx "$t_lenpfx" "$here/corpus_os"
run fuzz_audit "$t_audit"
run fuzz_h1req "$t_h1req" "$here/corpus_http"
run fuzz_expose "$t_expose" "$here/corpus_expose"
run fuzz_mcp26 "$t_mcp26" "$here/corpus_mcp26"
run fuzz_bridge "$t_bridge" "$here/corpus_bridge"
