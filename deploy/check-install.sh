#!/usr/bin/env bash
# Install the build in BUILD_DIR into a scratch DESTDIR with prefix /usr
# and check the tree is exactly what `cmake --install` promises (README,
# "Running as a service"): the binary, man pages, bash completion, systemd
# units naming /usr/bin/toolgate, examples, the README and the demo agent
# (/usr/libexec/toolgate/demo-agent); no other fixture agent, benchmark
# or test. The installed `toolgate demo` must find the installed agent. Run by ctest (install_tree).
set -euo pipefail
build=${1:?usage: check-install.sh BUILD_DIR}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$(mktemp -d /tmp/toolgate-install.XXXXXX)
trap 'rm -rf "$dest"' EXIT

# As right after deploy/demo.sh, which builds toolgate and the demo agent
# only: no toolgate.json(5) built. The install makes it (issue 20, item 15).
man5=$build/deploy/man/toolgate.json.5
rm -f "$man5"
DESTDIR=$dest cmake --install "$build" --prefix /usr >/dev/null
[[ -s $man5 ]] || { echo "check-install: the install did not generate $man5"; exit 1; }

expected=(usr/bin/toolgate
          usr/libexec/toolgate/demo-agent
          usr/lib/systemd/system/toolgate.service
          usr/lib/systemd/system/toolgate.socket
          usr/share/doc/toolgate/README.md)
for f in "$src"/deploy/examples/*; do
    [[ -f $f ]] || continue
    expected+=("usr/share/doc/toolgate/examples/$(basename "$f")")
done
for f in "$src"/deploy/man/*.1 "$src"/deploy/man/*.5; do
    [[ -e $f ]] || continue
    expected+=("usr/share/man/man${f##*.}/$(basename "$f")")
done
# toolgate.json(5) is generated from the key table at build time (deploy/man/toolgate.json.5.in)
[[ -e $src/deploy/man/toolgate.json.5.in ]] && expected+=(usr/share/man/man5/toolgate.json.5)
for f in "$src"/deploy/completion/*.bash; do
    [[ -e $f ]] || continue
    expected+=("usr/share/bash-completion/completions/$(basename "$f" .bash)")
done

fail=0
got=$(cd "$dest" && find . -type f -o -type l | sed 's|^\./||' | sort)
want=$(printf '%s\n' "${expected[@]}" | sort)
if [[ $got != "$want" ]]; then
    echo "check-install: the installed tree differs from the expected one (< expected, > installed):"
    diff <(echo "$want") <(echo "$got") || true
    fail=1
fi
[[ -x $dest/usr/bin/toolgate ]] || { echo "check-install: usr/bin/toolgate is not executable"; fail=1; }
"$dest/usr/bin/toolgate" --version >/dev/null || { echo "check-install: toolgate --version failed"; fail=1; }
[[ -x $dest/usr/libexec/toolgate/demo-agent ]] || { echo "check-install: no executable demo agent"; fail=1; }
demo_out=$(cd / && "$dest/usr/bin/toolgate" demo 2>&1) || {
    echo "check-install: the installed toolgate demo failed:"; echo "$demo_out"; fail=1; }
if [[ $demo_out != *"$dest/usr/libexec/toolgate/demo-agent"* ]]; then
    echo "check-install: the installed toolgate demo did not run the installed demo agent:"
    echo "$demo_out" | head -5
    fail=1
fi
demo_dir=$(sed -n 's|^5\. audit trail: \(/tmp/toolgate-demo-[^/]*\)/audit.jsonl$|\1|p' <<<"$demo_out")
[[ -n $demo_dir ]] && rm -rf "$demo_dir"
for u in toolgate.service toolgate.socket; do
    if grep -E '^Exec' "$dest/usr/lib/systemd/system/$u" | grep -v -E '=(/usr/bin/toolgate|/bin/kill) '; then
        echo "check-install: $u runs something other than /usr/bin/toolgate"
        fail=1
    fi
done
if grep -q '^ExecStart=/usr/bin/toolgate serve' "$dest/usr/lib/systemd/system/toolgate.service"; then :; else
    echo "check-install: toolgate.service does not start /usr/bin/toolgate serve"
    fail=1
fi
((fail == 0)) && echo "check-install: $(echo "$got" | wc -l) files, as expected"
exit $fail
