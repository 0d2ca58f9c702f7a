#!/usr/bin/env python3
"""Opens more relays to one endpoint than orch serves at once.

    many_relays.py N [--leave SECONDS] -- SERVER_ARGV...

Starts N relays one after the other, each kept open after orch answered
its `initialize` (with `--leave`: each calls the fixture's `hold` tool for
SECONDS, then the client leaves it: stops reading, sends a line orch
answers itself, closes its input), then one more, and prints one JSON
document: how many of the N were answered, and the last one's exit
status, standard error and whether its `initialize` was answered (it
should be refused at once, and say why). With `--leave`, once every
`hold` has ended, one more relay: whether it was answered (`after`).
"""

import json
import subprocess
import sys
import time

n = int(sys.argv[1])
head = sys.argv[:sys.argv.index("--")]
leave = float(head[head.index("--leave") + 1]) if "--leave" in head else None
argv = sys.argv[sys.argv.index("--") + 1:]


def message(id_, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                       "params": params}).encode() + b"\n"


init = message(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "many", "version": "1"}})
held, answered = [], 0
for _ in range(n):
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL if leave is not None else subprocess.PIPE)
    p.stdin.write(init)
    p.stdin.flush()
    if b'"id":1' in p.stdout.readline().replace(b" ", b""):
        answered += 1
    if leave is None:
        held.append(p)
        continue
    p.stdin.write(message(2, "tools/call", {"name": "hold", "arguments": {"seconds": leave}}))
    p.stdin.flush()
    last_hold = time.time()
    # Time for orch to post it before the client leaves.
    time.sleep(0.5)
    p.stdout.close()
    try:
        p.stdin.write(b"not json\n")
        p.stdin.flush()
        p.stdin.close()
    except OSError:
        pass
    p.wait(timeout=20)
if leave is not None:
    time.sleep(1)


def one_more():
    last = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        out, err = last.communicate(init, timeout=20)
        return last.returncode, out, err
    except subprocess.TimeoutExpired:
        last.kill()
        out, err = last.communicate()
        return None, out, err


rc, out, err = one_more()
after = None
if leave is not None:
    time.sleep(max(0.0, last_hold + leave + 2 - time.time()))
    _, later, _ = one_more()
    after = b'"id":1' in later.replace(b" ", b"")
for p in held:
    p.stdin.close()
for p in held:
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
print(json.dumps({"answered": answered, "last_rc": rc,
                  "last_answered": b'"id":1' in out.replace(b" ", b""),
                  "last_err": err.decode(errors="replace"), "after": after}))
