#!/usr/bin/env python3
"""Instructions per call inside toolgate, counted by callgrind.

Wall-clock figures on a shared 2-vCPU machine move by tens of percent from
run to run; instruction counts do not. This runs `toolgate wrap` (the same
arguments tg_bench uses) under callgrind twice, with FEW and MANY pipelined
small tools/calls (64 in flight, the frame of tg_bench's phase 1), and
reports (Ir(MANY) - Ir(FEW)) / (MANY - FEW): the marginal cost of one call,
start-up and shutdown cancelled out. The same difference per function,
grouped by source file, says where the instructions go.

The exec shim: toolgate starts its agents through its own binary as
/proc/self/exe, which under valgrind names valgrind's tool, not toolgate.
A tiny LD_PRELOAD library (built here with cc) makes execvp() of
"/proc/self/exe" run the real toolgate binary instead; the child runs
natively (--trace-children=no), so only toolgate's own instructions count.

With --dialect opensentience it runs `toolgate serve` with one
opensentience listener and the fixture agent (tests/agents/tg_os_agent)
instead, and drives it over the Unix socket with length-prefixed
core.tool.call frames (tool os/echo, unique call_ids), the same
difference giving the marginal cost of one OpenSentience call.

Usage: tests/bench/callgrind_calls.py [--build DIR] [--few N] [--many N] [--depth N]
                                      [--top K] [--no-build] [--toolgate PATH]
                                      [--dialect mcp|opensentience] [--agents N]
With --agents N it runs `toolgate wrap --config` with N echo agents behind
one hub (issue 22) and calls the first one's echo as a0__echo: the cost of
the hub's routing against the classic single-agent figure.

DIR defaults to build-perf (configured RelWithDebInfo when missing).

Left out of the per-call figure: the once-a-second usage sample of the
agents' process trees (tg_contain_sample: serve walks /proc). It is not
per call, and under valgrind, some fifty times slower than native, a
run of 20 000 calls lasts seconds instead of a fraction of one, so the
sample would add hundreds of instructions per "call" that vary with the
machine's load and process count. It is printed beside the figure.
"""
import argparse
import collections
import os
import json
import re
import shutil
import signal
import socket
import struct
import subprocess
import time
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPTH = 64  # calls in flight; --depth

HEAD = b'{"jsonrpc":"2.0","id":'
SMALL_TAIL = (b',"method":"tools/call","params":{"name":"echo",'
              b'"arguments":{"text":"hello, toolgate"}}}\n')
INIT = (b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":'
        b'{"protocolVersion":"2025-06-18","capabilities":{},'
        b'"clientInfo":{"name":"tg_bench","version":"1"}}}\n'
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

# Names and positions written out in full: callgrind_annotate 3.19 loses
# the file of some functions in a compressed two-thread profile, so the
# per-function figures did not add up to the total.
CG_OPTS = ['--compress-strings=no', '--compress-pos=no']

# The once-a-second usage sample (see the top of this file).
SAMPLER = 'tg_contain_sample'

PRELOAD_SRC = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* execvp("/proc/self/exe") under valgrind would run valgrind's tool. */
int execvp(const char *file, char *const argv[])
{
    int (*real)(const char *, char *const[]) =
        (int (*)(const char *, char *const[]))dlsym(RTLD_NEXT, "execvp");
    const char *self = getenv("TG_CALLGRIND_SELF");
    if (self != NULL && strcmp(file, "/proc/self/exe") == 0)
        file = self;
    return real(file, argv);
}
'''


def build(build_dir):
    if not os.path.exists(os.path.join(build_dir, 'CMakeCache.txt')):
        subprocess.run(['cmake', '-S', ROOT, '-B', build_dir,
                        '-DCMAKE_BUILD_TYPE=RelWithDebInfo'], check=True,
                       stdout=subprocess.DEVNULL)
    subprocess.run(['cmake', '--build', build_dir, '-j2', '--target', 'toolgate',
                    'tg_echo_agent', 'tg_os_agent'], check=True, stdout=subprocess.DEVNULL)


def read_lines(f, n, buf):
    """Read until <n> complete lines are in hand; return them and the rest."""
    lines = []
    while True:
        while len(lines) < n:
            i = buf.find(b'\n')
            if i < 0:
                break
            lines.append(buf[:i])
            buf = buf[i + 1:]
        if len(lines) == n:
            return lines, buf
        chunk = os.read(f, 1 << 20)
        if not chunk:
            sys.exit('callgrind_calls: toolgate closed its stdout early')
        buf += chunk


def hub_config(build_dir, tmp, agents):
    """A config of <agents> echo agents a0, a1, ... with tg_bench's limits:
    `wrap --config` serves them all through one hub (issue 22), so a call
    names a0__echo and is routed back to a0's own `echo`."""
    lim = {'rate_limit': '1000000/second', 'max_concurrent_calls': 1024,
           'max_queued_calls': 1024}
    cfg = {'router': {'max_frame_bytes': '8Mi'},
           'agents': [{'id': 'a%d' % i,
                       'command': [os.path.join(build_dir, 'agents', 'tg_echo_agent')],
                       'execution_limits': lim} for i in range(agents)]}
    path = os.path.join(tmp, 'hub.json')
    with open(path, 'w') as f:
        json.dump(cfg, f)
    return path


def run(build_dir, toolgate, tmp, preload, calls, depth, agents=0):
    out = os.path.join(tmp, 'cg.%d.out' % calls)
    audit = os.path.join(tmp, 'audit.%d.jsonl' % calls)
    env = dict(os.environ, LD_PRELOAD=preload, TG_CALLGRIND_SELF=toolgate)
    argv = ['valgrind', '--tool=callgrind', '--trace-children=no'] + CG_OPTS + [
            '--callgrind-out-file=' + out, toolgate, 'wrap', '--audit', audit]
    tail = SMALL_TAIL
    if agents > 0:
        argv += ['--config', hub_config(build_dir, tmp, agents)]
        tail = SMALL_TAIL.replace(b'"name":"echo"', b'"name":"a0__echo"')
    else:
        argv += ['--limit', 'rate_limit=1000000/second',
                 '--limit', 'max_concurrent_calls=1024',
                 '--limit', 'max_queued_calls=1024',
                 '--limit', 'max_frame_bytes=8Mi',
                 '--', os.path.join(build_dir, 'agents', 'tg_echo_agent')]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    wfd, rfd = p.stdin.fileno(), p.stdout.fileno()
    os.write(wfd, INIT)
    rest = b''
    lines, rest = read_lines(rfd, 1, rest)
    if b'"result"' not in lines[0]:
        sys.exit('callgrind_calls: bad initialize answer: %r' % lines[0][:200])
    next_id = 1000000000
    done = 0
    while done < calls:
        n = min(depth, calls - done)
        batch = b''.join(HEAD + b'%d' % (next_id + k) + tail for k in range(n))
        os.write(wfd, batch)
        lines, rest = read_lines(rfd, n, rest)
        for k, l in enumerate(lines):
            if b'"result"' not in l or (b'"id":%d,' % (next_id + k)) not in l:
                sys.exit('callgrind_calls: bad answer: %r' % l[:200])
        next_id += n
        done += n
    p.stdin.close()
    p.stdout.read()
    if p.wait() != 0:
        sys.exit('callgrind_calls: toolgate exited with %d' % p.returncode)
    return out


def os_frame(obj):
    body = json.dumps(obj, separators=(',', ':')).encode()
    return struct.pack('>I', len(body)) + body


def os_read_frames(sock, n, buf):
    """Read until <n> agent.tool.result frames are in hand (streams are
    skipped); return their payloads and the rest."""
    out = []
    while len(out) < n:
        while len(buf) >= 4:
            ln = struct.unpack('>I', buf[:4])[0]
            if len(buf) < 4 + ln:
                break
            m = json.loads(buf[4:4 + ln])
            buf = buf[4 + ln:]
            if m.get('type') == 'agent.tool.result':
                out.append(m)
        if len(out) == n:
            break
        chunk = sock.recv(1 << 20)
        if not chunk:
            sys.exit('callgrind_calls: toolgate closed the connection early')
        buf += chunk
    return out, buf


def run_os(build_dir, toolgate, tmp, preload, calls, depth):
    out = os.path.join(tmp, 'cg.os.%d.out' % calls)
    sock_path = os.path.join(tmp, 'os.%d.sock' % calls)
    cfg = os.path.join(tmp, 'serve.%d.json' % calls)
    with open(cfg, 'w') as f:
        json.dump({'router': {'listen': [{'unix': sock_path, 'dialect': 'opensentience'}]},
                   'audit': {'path': os.path.join(tmp, 'audit.os.%d.jsonl' % calls)},
                   'containment': {'mode': 'off'},
                   'agents': [{'id': 'os', 'dialect': 'opensentience',
                               'command': [os.path.join(build_dir, 'agents', 'tg_os_agent'),
                                           '--id', 'os'],
                               # serve passes agents only env.pass: the exec
                               # shim's preload needs this one
                               'env': {'pass': ['TG_CALLGRIND_SELF']},
                               'execution_limits': {'rate_limit': '1000000/second',
                                                    'max_concurrent_calls': 1024,
                                                    'max_queued_calls': 1024}}]}, f)
    env = dict(os.environ, LD_PRELOAD=preload, TG_CALLGRIND_SELF=toolgate)
    argv = ['valgrind', '--tool=callgrind', '--trace-children=no'] + CG_OPTS + [
            '--callgrind-out-file=' + out, toolgate, 'serve', '--config', cfg]
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env)
    deadline = time.time() + 60
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            s.connect(sock_path)
            break
        except OSError:
            if time.time() > deadline or p.poll() is not None:
                sys.exit('callgrind_calls: toolgate serve did not listen on ' + sock_path)
            time.sleep(0.1)
    done, seq, rest = 0, 0, b''
    while done < calls:
        n = min(depth, calls - done)
        batch = b''.join(os_frame({'v': 1, 'type': 'core.tool.call', 'id': 'm%d' % (seq + k),
                                   'ts': '2026-01-16T12:00:00Z',
                                   'payload': {'call_id': 'c%d' % (seq + k), 'tool_id': 'os/echo',
                                               'input': {'text': 'hello, toolgate'}}})
                         for k in range(n))
        s.sendall(batch)
        res, rest = os_read_frames(s, n, rest)
        for m in res:
            if m['payload'].get('status') != 'succeeded':
                sys.exit('callgrind_calls: bad answer: %r' % m)
        seq += n
        done += n
    s.close()
    p.send_signal(signal.SIGTERM)
    if p.wait() != 0:
        sys.exit('callgrind_calls: toolgate serve exited with %d' % p.returncode)
    return out


def total_and_functions(out):
    """Total Ir and self Ir per 'file:function' from callgrind_annotate."""
    text = subprocess.run(['callgrind_annotate', '--inclusive=no', '--auto=no', '--threshold=100',
                           '--show-percs=no', out],
                          check=True, capture_output=True, text=True).stdout
    total = None
    per = collections.Counter()
    for line in text.splitlines():
        m = re.match(r'^\s*([\d,]+)(?: \([^)]*\))?\s+\S*\s*PROGRAM TOTALS', line)
        if m:
            total = int(m.group(1).replace(',', ''))
            continue
        m = re.match(r'^\s*([\d,]+)\s+(\S.*?:\S.*?)(?: \(\d[\d,]*x\))?(?: \[.*\])?$', line)
        if m and total is not None:
            name = m.group(2)
            if name.startswith(ROOT + '/'):
                name = name[len(ROOT) + 1:]
            per[name] += int(m.group(1).replace(',', ''))
    if total is None:
        sys.exit('callgrind_calls: no totals in ' + out)
    return total, per


def sampler_ir(out):
    """Inclusive Ir of the usage sampler in <out> (0 when it never ran)."""
    text = subprocess.run(['callgrind_annotate', '--inclusive=yes', '--auto=no', '--threshold=100',
                           '--show-percs=no', out],
                          check=True, capture_output=True, text=True).stdout
    best = 0
    for line in text.splitlines():
        m = re.match(r'^\s*([\d,]+)\s+\S*:' + SAMPLER + r'(?:\.\S*)?(?: \[.*\])?$', line)
        if m:
            best = max(best, int(m.group(1).replace(',', '')))
    return best


def group(name):
    """Coarse owner of a function, from its source path; code inlined from
    a shared header (SSE intrinsics, config/jsonw.h) goes with the function
    it was inlined into."""
    path, _, fn = name.partition(':')
    if any(h in path for h in ('emmintrin', 'avx2intrin', 'config/jsonw.h')):
        if 'audit' in fn:
            return 'audit'
        if fn.startswith(('scan_bytes', 'skip_container')):
            return 'envelope scan (jscan)'
    for key, label in (('config/jscan', 'envelope scan (jscan)'),
                       ('router/codec/envelope', 'envelope scan (envelope, osenv)'),
                       ('router/codec/osenv', 'envelope scan (envelope, osenv)'),
                       ('audit/', 'audit'),
                       ('router/', 'router (session, io, ndjson, ...)'),
                       ('limits/', 'limits (gcra, conc, registry)')):
        if key in path:
            return label
    return 'libc, libuv and other'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', default=os.path.join(ROOT, 'build-perf'))
    ap.add_argument('--few', type=int, default=2000)
    ap.add_argument('--many', type=int, default=22000)
    ap.add_argument('--top', type=int, default=25)
    ap.add_argument('--depth', type=int, default=DEPTH,
                    help='calls in flight (1: the per-call cost with nothing shared by a batch)')
    ap.add_argument('--no-build', action='store_true', help='measure DIR as it is')
    ap.add_argument('--toolgate', help='this toolgate binary instead of DIR/toolgate')
    ap.add_argument('--dialect', choices=('mcp', 'opensentience'), default='mcp')
    ap.add_argument('--keep', help='copy the two callgrind outputs into this directory '
                    '(for callgrind_annotate --inclusive=yes)')
    ap.add_argument('--agents', type=int, default=0,
                    help='MCP through one hub of N agents (wrap --config), calls to the first')
    a = ap.parse_args()
    if not a.no_build:
        build(a.build)
    with tempfile.TemporaryDirectory(prefix='tg_cg.') as tmp:
        tg = os.path.abspath(a.toolgate or os.path.join(a.build, 'toolgate'))
        so = os.path.join(tmp, 'selfexe.so')
        src = os.path.join(tmp, 'selfexe.c')
        with open(src, 'w') as f:
            f.write(PRELOAD_SRC)
        subprocess.run(['cc', '-shared', '-fPIC', '-O2', '-o', so, src, '-ldl'], check=True)
        if a.dialect == 'opensentience':
            runner = run_os
        else:
            def runner(b, t, d, p, c, k):
                return run(b, t, d, p, c, k, a.agents)
        out1 = runner(a.build, tg, tmp, so, a.few, a.depth)
        t1, f1 = total_and_functions(out1)
        s1 = sampler_ir(out1)
        out2 = runner(a.build, tg, tmp, so, a.many, a.depth)
        t2, f2 = total_and_functions(out2)
        s2 = sampler_ir(out2)
        if a.keep:
            os.makedirs(a.keep, exist_ok=True)
            for o in (out1, out2):
                shutil.copy(o, a.keep)
    n = a.many - a.few
    what = ('OpenSentience' if a.dialect == 'opensentience'
            else 'MCP through a hub of %d agents' % a.agents if a.agents else 'MCP')
    print('toolgate instructions per small %s call (%d in flight, %d - %d calls): %.0f'
          % (what, a.depth, a.many, a.few,
             ((t2 - s2) - (t1 - s1)) / n))
    print('  left out: the once-a-second usage sample, %.0f per call at this run\'s pace'
          ' (%.0f with it)' % (max(0.0, (s2 - s1) / n), (t2 - t1) / n))
    diff = {k: (f2.get(k, 0) - f1.get(k, 0)) / n for k in set(f1) | set(f2)}
    groups = collections.Counter()
    for k, v in diff.items():
        groups[group(k)] += v
    print('\nby module:')
    for k, v in groups.most_common():
        if abs(v) >= 1:
            print('  %7.0f  %s' % (v, k))
    print('\ntop functions (self instructions per call):')
    for k, v in sorted(diff.items(), key=lambda kv: -kv[1])[:a.top]:
        print('  %7.0f  %s' % (v, k))


if __name__ == '__main__':
    main()
