#!/usr/bin/env bash
# Install what toolgate needs to build, test and demo on Debian 12 (run as
# root). Idempotent: packages already installed are left alone, and the apt
# lists are refreshed only when something is missing.
set -euo pipefail

pkgs=(build-essential cmake pkg-config clang
      libuv1-dev libhiredis-dev libjansson-dev libcriterion-dev libhttp-parser-dev
      libssl-dev openssl
      redis-server iproute2
      rsyslog prometheus chromium
      mandoc socat
      debhelper dpkg-dev fakeroot lintian systemd)
# libssl-dev: TLS and token/JWT checks (OpenSSL 3); the openssl CLI makes test
# certificates and keys in tests/test_tls.c and tests/test_auth.c.
# debhelper, dpkg-dev, fakeroot and lintian build and check the Debian package
# (deploy/debian/ci-package.sh); systemd only for `systemd-analyze verify` of
# the units (tests/test_systemd.c, the package step): no systemd need run.
# mandoc lints the man pages (tests/test_help.c); socat bridges a stdio MCP
# client to a serve socket (tests/test_examples.c).
# rsyslog and prometheus only validate the ingestion examples in deploy/ingest
# (rsyslogd -N1, promtool); neither service needs to run. chromium renders
# the admin page in tests/test_page.c (headless, no sandbox, as root).
# mandoc lints the man pages (tests/test_help.c); socat is the MCP client's
# bridge to a serve socket that tests/test_examples.c runs as the README shows.
# Node is only for the real-peer test (tests/peer). A node from elsewhere
# (NodeSource, nvm) is kept: Debian's npm package conflicts with NodeSource's
# nodejs, which bundles its own npm.
command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || pkgs+=(npm)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    echo "install-deps: all ${#pkgs[@]} packages present"
    exit 0
fi

if ((EUID != 0)); then
    echo "install-deps: missing ${missing[*]}; run as root to install them" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
