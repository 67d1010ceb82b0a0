#!/usr/bin/env bash
# Shared-limit benchmark: a throwaway redis-server on a free loopback port,
# then in one run
#   - redis-benchmark running the same EVALSHA (toolgate's GCRA script) with
#     the same pipelining: Redis's own ceiling,
#   - store_bench exact at that depth: toolgate's admissions/s against it,
#   - store_bench lease vs local: leased admission against in-process speed.
# Usage: tests/bench/store_run.sh [BUILD_DIR]   (default build-release)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-release}
if [[ ! -x $build/bench/store_bench ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j2 --target store_bench >/dev/null
fi
for port in $(shuf -i 20000-60000 -n 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || break
done
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --loglevel warning &
rpid=$!
trap 'kill $rpid 2>/dev/null' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port/0"
echo "machine: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(uname -r)"
# The script toolgate loads, and its SHA, for redis-benchmark.
sha=$(redis-cli -p "$port" script load "$("$build/bench/store_bench" script)")
for depth in 1 64; do
    echo "--- depth $depth (one connection, $depth pipelined)"
    redis-benchmark -p "$port" -q -n 100000 -P "$depth" -c 1 \
        evalsha "$sha" 1 'tg:{bench}:rb' 1000000 1000 0 1 2>/dev/null | tr '\r' '\n' |
        grep -E 'requests per second' | tail -1 | sed 's/^/redis-benchmark EVALSHA: /'
    "$build/bench/store_bench" exact "$url" 100000 "$depth"
done
echo "--- lease vs local (depth 64)"
"$build/bench/store_bench" lease "$url" 1000000 64
"$build/bench/store_bench" local "$url" 1000000 64
