#!/usr/bin/env bash
# Build Release into build-release and run the benchmark: the echo agent
# directly, through a bare libuv relay, through `toolgate wrap` and through
# `toolgate serve` over HTTP, in one run. Extra arguments go to tg_bench
# (e.g. --quick, --no-idle-poll, --no-http).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build=build-release
jobs=$(nproc)
((jobs > 2)) && jobs=2

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$jobs" --target toolgate tg_echo_agent tg_bench tg_uv_relay

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(uname -sr)"
if [[ -r /proc/loadavg ]]; then
    echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg) (a busy machine skews the figures)"
fi
exec "$build/bench/tg_bench" --toolgate "$build/toolgate" --agent "$build/agents/tg_echo_agent" \
    --relay "$build/bench/tg_uv_relay" "$@"
