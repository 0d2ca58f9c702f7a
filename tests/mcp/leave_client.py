#!/usr/bin/env python3
"""A client that leaves a remote MCP server's relay mid-conversation.

    leave_client.py MODE SECONDS -- SERVER_ARGV...

After the handshake it calls the fixture's `hold` tool (which answers after
SECONDS), sends 20 `echo` calls at once (queued behind it), then:

- `exit`: exits 1 s later, the call still running (its attempt ends);
- `close`: closes its side of the relay's input while the `hold` runs, and
  keeps reading what comes back for SECONDS + 3 s before it exits.

In mode `init` it only sends an `initialize` the fixture answers late
(client `slow-init`) and exits 1 s later.

It prints one JSON document: the ids answered.
"""

import json
import subprocess
import sys
import threading
import time

mode, seconds = sys.argv[1], float(sys.argv[2])
argv = sys.argv[sys.argv.index("--") + 1:]
proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
answered = []


def read():
    for line in proc.stdout:
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if v.get("id") is not None:
            answered.append(v["id"])


threading.Thread(target=read, daemon=True).start()


def send(message):
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


send({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "slow-init" if mode == "init" else "leave", "version": "1"}}})
if mode == "init":
    time.sleep(1)
    print(json.dumps({"answered": answered}))
    sys.exit(0)
end = time.time() + 30
while "init" not in answered and time.time() < end:
    time.sleep(0.02)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": "hold", "method": "tools/call",
      "params": {"name": "hold", "arguments": {"seconds": seconds}}})
# Written by a thread: the relay takes a few at a time (orch holds the
# rest back), and the client does not wait for that.
def echoes():
    try:
        for i in range(20):
            send({"jsonrpc": "2.0", "id": f"e{i}", "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"text": f"e{i}"}}})
        if mode == "close":
            proc.stdin.close()
    except OSError:
        pass


threading.Thread(target=echoes, daemon=True).start()
if mode == "exit":
    time.sleep(1)
else:
    time.sleep(seconds + 3)
print(json.dumps({"answered": answered}))
sys.stdout.flush()
