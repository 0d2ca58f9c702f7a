#!/usr/bin/env python3
"""Round trip of a small write tool over stdio to a running `orch mcp serve`,
and the time from process start to the first response (initialize).

    cargo build --release && python3 scripts/measure-mcp.py [N]

Speaks JSON-RPC lines directly (no SDK) so the figures are orch's, not a
client library's. Makes a scratch state directory with one run first.
"""
import json, os, statistics, subprocess, sys, tempfile, time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
ORCH = os.path.abspath(os.environ.get("ORCH", "target/release/orch"))
tmp = tempfile.mkdtemp(prefix="orch-mcp-measure-")
ws = os.path.join(tmp, "ws"); os.mkdir(ws)
state = os.path.join(tmp, "state")
p = os.path.join(tmp, "p.toml")
open(p, "w").write('version = 1\nname = "m"\n[agents.sh]\nkind = "command"\ncommand = ["true"]\n[[phases]]\nname = "p"\nagents = ["sh"]\n')
subprocess.run([ORCH, "--state-dir", state, "run", p], check=True, cwd=ws, capture_output=True)
argv = [ORCH, "mcp", "serve", "--run", "r", "--phase", "p", "--agent", "a", "--state-dir", state, "--workspace", ws]

def first_response():
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, bufsize=0)
    send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "m", "version": "1"}}})
    proc.stdout.readline()
    return proc, (time.perf_counter() - t0) * 1000

def send(proc, msg):
    proc.stdin.write((json.dumps(msg) + "\n").encode())

starts = []
for _ in range(20):
    proc, ms = first_response()
    starts.append(ms)
    proc.stdin.close(); proc.wait()
proc, _ = first_response()
send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
times = []
for i in range(1, N + 1):
    t0 = time.perf_counter()
    send(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "add_comment", "arguments": {"text": f"comment {i}"}}})
    line = proc.stdout.readline()
    times.append((time.perf_counter() - t0) * 1000)
    assert b'"isError":false' in line or b'comment_id' in line, line
proc.stdin.close(); proc.wait()
times.sort()
q = lambda f: times[min(len(times) - 1, int(f * len(times)))]
print(f"add_comment round trip over stdio, {N} calls: p50 {q(0.5):.3f} ms, p99 {q(0.99):.3f} ms (targets 0.3 / 2)")
print(f"first response after process start (initialize), 20 starts: median {statistics.median(starts):.2f} ms, max {max(starts):.2f} ms (target 10)")
