#!/bin/sh
# Build the libFuzzer targets with clang (-DTG_FUZZ=ON) into build-fuzz and
# run fuzz_frames (codec + envelope scanner, differential against jansson)
# for SECONDS (default 30) on a scratch copy of the checked-in corpus, so new
# inputs found here never land in the tree, then fuzz_audit (the audit
# encoder) for a third of that.
# Usage: tests/fuzz/run.sh [SECONDS]
# Exit status: 0 when the run ends without a finding, non-zero otherwise
# (the crashing input is left in build-fuzz/fuzz/artifacts/).
set -eu

secs=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build-fuzz"
jobs=${JOBS:-2}

CC=${CC:-clang} cmake -S "$root" -B "$build" -DTG_FUZZ=ON -DTG_TESTS=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_frames fuzz_audit

work="$build/fuzz/corpus-run"
art="$build/fuzz/artifacts"
rm -rf "$work"
mkdir -p "$work" "$art"
cp "$here"/corpus/* "$work"/

# ASan/UBSan findings abort; leaks are findings too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

"$build/fuzz/fuzz_frames" -max_total_time="$secs" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$work"

mkdir -p "$build/fuzz/audit-run"
"$build/fuzz/fuzz_audit" -max_total_time="$(( (secs + 2) / 3 ))" -max_len=4096 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" "$build/fuzz/audit-run"
