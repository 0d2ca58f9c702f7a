#!/usr/bin/env python3
"""Opens more relays to one endpoint than orch serves at once.

    many_relays.py N -- SERVER_ARGV...

Starts N relays one after the other, each kept open after orch answered
its `initialize`, then one more, and prints one JSON document: how many
of the N were answered, and the last one's exit status and standard error
(it should be refused at once, and say why).
"""

import json
import subprocess
import sys

n = int(sys.argv[1])
argv = sys.argv[sys.argv.index("--") + 1:]
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "many", "version": "1"}}}).encode() + b"\n"
held, answered = [], 0
for _ in range(n):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(init)
    p.stdin.flush()
    if b'"id":1' in p.stdout.readline().replace(b" ", b""):
        answered += 1
    held.append(p)
last = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
try:
    out, err = last.communicate(init, timeout=20)
    rc = last.returncode
except subprocess.TimeoutExpired:
    last.kill()
    out, err = last.communicate()
    rc = None
for p in held:
    p.stdin.close()
for p in held:
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
print(json.dumps({"answered": answered, "last_rc": rc,
                  "last_out": out.decode(errors="replace"),
                  "last_err": err.decode(errors="replace")}))
