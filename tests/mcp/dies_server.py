#!/usr/bin/env python3
"""An MCP server (stdio) that answers `initialize` and lists one tool, then
ends without a word on the first other request: a server that crashed, or
was killed, with a request in flight. With `--fork` it first starts a
child that holds its standard output open for 30 s (its output does not
end when it does); with `--hold` one that holds its input and output, and
reads nothing, for 90 s (longer than the client waits)."""

import json
import subprocess
import sys

for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m.get("method") == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "dies", "version": "1"}}
    elif m.get("method") == "tools/list":
        result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
    else:
        if "--fork" in sys.argv:
            subprocess.Popen(["sleep", "30"], stdout=sys.stdout)
        if "--hold" in sys.argv:
            # Its input too, read by no one: a write to it blocks.
            subprocess.Popen(["sleep", "90"], stdin=sys.stdin, stdout=sys.stdout)
        sys.exit(0)
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": result}), flush=True)
