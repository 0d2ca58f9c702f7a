#!/usr/bin/env python3
"""Stands in for Claude Code in `orch run`, to drive orch's tools with an MCP
client orch did not write, through the very path a CLI takes: the MCP
configuration orch wrote for the attempt (`--mcp-config FILE`) names orch's
server as a command (the relay to the attempt's endpoint); this runs the
client command in `client.json` (a JSON argv, in the working directory) with
the argument "{server}" replaced by that command and its arguments, writes
what the client printed to `client-out.json` and `client-err.txt`, and ends
its session as Claude Code does (a stream-json result event).

`client.json` may instead hold {"argv": [...], "out": NAME} to write the
output to NAME; "{attempt}" there writes it to `out-<phase>-<agent>.json`
(several stand-ins in one workspace); with "server": NAME the client talks
to the pipeline's MCP server NAME instead of orch's.
"""

import json
import subprocess
import sys

import os

argv = sys.argv[1:]
config_path = argv[argv.index("--mcp-config") + 1]
config = json.load(open(config_path))
# The attempt's own folder, `<phase>-<agent>-<16 hex>`, holds orch's files.
attempt = os.path.basename(os.path.dirname(os.path.dirname(config_path))).rsplit("-", 1)[0]
spec = json.load(open("client.json"))
name = None
server_name = "orch"
if isinstance(spec, dict):
    name = spec["out"].replace("{attempt}", f"out-{attempt}.json")
    server_name = spec.get("server", "orch")
    spec = spec["argv"]
server = config["mcpServers"][server_name]
command = [server["command"], *server.get("args", [])]
client = []
for a in spec:
    if a == "{server}":
        client.extend(command)
    else:
        client.append(a)
done = subprocess.run(client, capture_output=True, timeout=240)
out = name or "client-out.json"
open(out, "wb").write(done.stdout)
open(out + ".err", "wb").write(done.stderr)
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "num_turns": 1, "result": "done", "session_id": "stand-in"}), flush=True)
