#!/usr/bin/env python3
"""What a tool call costs through the path every agent CLI takes: the CLI
starts `orch mcp relay SOCKET` (from the MCP configuration orch wrote for
the attempt), which hands its pipes over to the attempt's endpoint in
`orch run`, where orch checks the process that connected and serves the
tool.

    cargo build --release && python3 scripts/measure-mcp.py [N]

Runs `orch run` on a one-phase pipeline whose agent is a stand-in for
Claude Code (tests/mcp/stand_in_cli.py); the stand-in runs this script
again as its MCP client (`--client`), which speaks JSON-RPC lines directly
(no SDK: the figures are orch's, not a client library's). It prints:

- the round trip of `add_comment` (a write, committed before the answer),
  N calls one after the other: p50 and p99;
- the time from starting the relay to the first answer (initialize), over
  20 starts: median and max;
- the floor: the same lines written and read back through `cat`, so the
  machine's cost of two pipe hops is not taken for orch's (on a VM it can
  be most of the round trip).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def client(n, server):
    def start():
        t0 = time.perf_counter()
        proc = subprocess.Popen(server, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, bufsize=0)
        send(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "m", "version": "1"}}})
        line = proc.stdout.readline()
        assert b'"result"' in line, line
        return proc, (time.perf_counter() - t0) * 1000

    def send(proc, msg):
        proc.stdin.write((json.dumps(msg) + "\n").encode())

    starts = []
    for _ in range(20):
        proc, ms = start()
        starts.append(ms)
        proc.stdin.close()
        proc.wait()
    proc, _ = start()
    send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    times = []
    for i in range(1, n + 1):
        t0 = time.perf_counter()
        send(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "add_comment", "arguments": {"text": f"comment {i}"}}})
        line = proc.stdout.readline()
        times.append((time.perf_counter() - t0) * 1000)
        assert b'comment_id' in line, line
    proc.stdin.close()
    proc.wait()
    # The floor: the same lines, written and read back the same way,
    # through `cat` (two pipes and two wake-ups, no server at all).
    echo = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    floor = []
    for i in range(1, n + 1):
        t0 = time.perf_counter()
        send(echo, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "add_comment", "arguments": {"text": f"comment {i}"}}})
        echo.stdout.readline()
        floor.append((time.perf_counter() - t0) * 1000)
    echo.stdin.close()
    echo.wait()
    times.sort()
    floor.sort()
    q = lambda t, f: t[min(len(t) - 1, int(f * len(t)))]
    print(f"add_comment round trip through the relay, {n} calls: p50 {q(times, 0.5):.3f} ms, "
          f"p99 {q(times, 0.99):.3f} ms (targets 0.3 / 2)")
    print(f"floor, the same lines echoed by `cat`: p50 {q(floor, 0.5):.3f} ms, "
          f"p99 {q(floor, 0.99):.3f} ms; orch adds {q(times, 0.5) - q(floor, 0.5):.3f} ms at p50")
    print(f"first answer after starting the relay (initialize), 20 starts: median "
          f"{statistics.median(starts):.2f} ms, max {max(starts):.2f} ms (target 10)")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        sep = sys.argv.index("--")
        client(int(sys.argv[2]), sys.argv[sep + 1:])
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    orch = os.path.abspath(os.environ.get("ORCH", os.path.join(root, "target/release/orch")))
    tmp = tempfile.mkdtemp(prefix="orch-mcp-measure-")
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws)
    me = os.path.abspath(__file__)
    json.dump([sys.executable, me, "--client", str(n), "--", "{server}"],
              open(os.path.join(ws, "client.json"), "w"))
    stand_in = os.path.join(root, "tests/mcp/stand_in_cli.py")
    open(os.path.join(ws, "p.toml"), "w").write(f'''version = 1
name = "m"
[agents.claude]
kind = "claude"
binary = "{stand_in}"
[[phases]]
name = "p"
agents = ["claude"]
mode = "fix"
prompt = "measure"
[phases.tools]
internal = ["Read", "Write"]
mcp = ["mcp__orch__add_comment"]
permission = "workspace-write"
''')
    done = subprocess.run([orch, "--state-dir", os.path.join(tmp, "state"), "run", "p.toml"],
                          cwd=ws, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        sys.exit(f"orch run failed ({done.returncode}):\n{done.stderr}")
    out = open(os.path.join(ws, "client-out.json")).read()
    if not out.strip():
        sys.exit("the client printed nothing:\n" + open(os.path.join(ws, "client-out.json.err")).read())
    print(out, end="")


main()
