#!/usr/bin/env python3
"""A raw JSON-RPC client for orch's tools over a stdio server command
(no SDK: the lines are exactly what is sent).

    raw_client.py LINES_FILE -- SERVER_ARGV...

LINES_FILE holds one message per line, sent as bytes after the handshake
(initialize, initialized); a line `@big N` is a message of N bytes. It
prints one JSON document: {"answers": {id: answer}, "unanswered": [...],
"exited": whether the server ended by itself once its input closed,
"closed_first": whether its output ended before that,
"stderr": ...}, waiting at most 60 s for the answers to every line that
has an id, and for as many answers with a null id as `@null N` says (a
line `@end`: and until the server's output ends); it stops waiting when
the server's output ends.
"""

import json
import subprocess
import sys
import threading
import time

sep = sys.argv.index("--")
lines = open(sys.argv[1], "rb").read().split(b"\n")
argv = sys.argv[sep + 1:]
proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)

answers = {}
nulls = []
lock = threading.Lock()


ended = []  # set once the server's output ends


def read():
    for line in proc.stdout:
        try:
            v = json.loads(line)
        except ValueError:
            continue
        with lock:
            if v.get("id") is None:
                nulls.append(v)
            else:
                answers[str(v["id"])] = v
    ended.append(True)


threading.Thread(target=read, daemon=True).start()


def send(b):
    proc.stdin.write(b + b"\n")
    proc.stdin.flush()


send(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "1"}}}).encode())
send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
want = {"init"}
want_nulls = 0
want_end = False
for line in lines:
    if not line.strip():
        continue
    if line.startswith(b"@big "):
        n = int(line.split()[1])
        head = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"add_comment","arguments":{"text":"'
        send(head + b"a" * (n - len(head) - 4) + b'"}}}')
        want.add("big")
        continue
    if line.startswith(b"@null "):
        want_nulls = int(line.split()[1])
        continue
    if line.strip() == b"@end":
        want_end = True
        continue
    send(line)
    try:
        v = json.loads(line)
        if isinstance(v, dict) and "id" in v and v["id"] is not None:
            want.add(str(v["id"]))
    except ValueError:
        pass
end = time.time() + 60
while time.time() < end:
    with lock:
        done = want <= set(answers) and len(nulls) >= want_nulls
    if ended or (done and not want_end):
        break
    time.sleep(0.02)
# Whether the server's side ended before the client closed its own.
closed_first = bool(ended)
proc.stdin.close()
# The relay ends by itself once its input does (orch closes its side).
try:
    proc.wait(timeout=10)
    exited = True
except subprocess.TimeoutExpired:
    proc.kill()
    exited = False
with lock:
    print(json.dumps({"answers": answers, "nulls": nulls, "exited": exited,
                      "closed_first": closed_first,
                      "unanswered": sorted(want - set(answers)),
                      "stderr": proc.stderr.read().decode(errors="replace")}))
