#!/usr/bin/env bash
# Install what is missing (Debian 12, as root), build toolgate, and run its
# main job on the embedded default: `toolgate demo` wraps the bundled demo
# agent with local rate buckets and an audit file, drives it with a scripted
# caller, and prints what was allowed, what was refused and why.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target toolgate tg_fixture_agent
exec ./build/toolgate demo
