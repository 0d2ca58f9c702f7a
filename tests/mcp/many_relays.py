#!/usr/bin/env python3
"""Opens more relays to one endpoint than orch serves at once.

    many_relays.py N [--leave] -- SERVER_ARGV...

Starts N relays one after the other, each kept open after orch answered
its `initialize` (with `--leave`: each calls the fixture's `hold` tool for
60 s, then the client leaves it: stops reading, sends a line orch answers
itself, closes its input), then one more, and prints one JSON document:
how many of the N were answered, and the last one's exit status, standard
error and whether its `initialize` was answered (it should be refused at
once, and say why).
"""

import json
import subprocess
import sys
import time

n = int(sys.argv[1])
leave = "--leave" in sys.argv[:sys.argv.index("--")]
argv = sys.argv[sys.argv.index("--") + 1:]


def message(id_, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                       "params": params}).encode() + b"\n"


init = message(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "many", "version": "1"}})
held, answered = [], 0
for _ in range(n):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL if leave else subprocess.PIPE)
    p.stdin.write(init)
    p.stdin.flush()
    if b'"id":1' in p.stdout.readline().replace(b" ", b""):
        answered += 1
    if not leave:
        held.append(p)
        continue
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
if leave:
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
for p in held:
    p.stdin.close()
for p in held:
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
print(json.dumps({"answered": answered, "last_rc": rc,
                  "last_answered": b'"id":1' in out.replace(b" ", b""),
                  "last_err": err.decode(errors="replace")}))
