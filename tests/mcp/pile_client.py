#!/usr/bin/env python3
"""Leaves remote exchanges running, then asks for one more connection.

    pile_client.py N -- SERVER_ARGV...

N times: a relay, its handshake, a call of the fixture's `hold` (60 s),
then the client leaves it (stops reading, sends a line orch answers
itself, closes its input). Then one more relay: it prints one JSON
document with that relay's exit status and standard error, and whether
its handshake was answered.
"""

import json
import subprocess
import sys
import time

n = int(sys.argv[1])
argv = sys.argv[sys.argv.index("--") + 1:]


def message(id_, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                       "params": params}).encode() + b"\n"


init = message(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "pile", "version": "1"}})
for _ in range(n):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(init)
    p.stdin.flush()
    p.stdout.readline()
    p.stdin.write(message(2, "tools/call", {"name": "hold", "arguments": {"seconds": 60}}))
    p.stdin.flush()
    time.sleep(0.2)
    p.stdout.close()
    try:
        p.stdin.write(b"not json\n")
        p.stdin.flush()
        p.stdin.close()
    except OSError:
        pass
    p.wait(timeout=20)
time.sleep(1)
last = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
try:
    out, err = last.communicate(init, timeout=20)
    rc = last.returncode
except subprocess.TimeoutExpired:
    last.kill()
    out, err = last.communicate()
    rc = None
print(json.dumps({"last_rc": rc, "answered": b'"id":1' in out.replace(b" ", b""),
                  "last_err": err.decode(errors="replace")}))
