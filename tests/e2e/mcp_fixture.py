#!/usr/bin/env python3
"""A tiny MCP server over stdio for orch's end-to-end tests.

It offers three tools: `echo` (the tests allow it), `danger` (the tests
leave it out of the ToolSet) and `write` (it writes a file: under a
read-only phase the OS must refuse it). Every call it really receives, and
what came of it, is reported to MCP_FIXTURE_LOG, so a test can prove that a
tool outside the phase's `mcp` list was never called, whatever the CLI
printed. MCP_FIXTURE_LOG is a file, or the scripted model server's
`http://127.0.0.1:PORT/fixture/log` (the server confined with the agent may
write no file, but it can reach loopback).

Newline-delimited JSON-RPC 2.0 on stdin/stdout (the MCP stdio transport).
Standard library only; it reads until stdin closes.
"""
import json
import os
import sys
import urllib.request

LOG = os.environ.get("MCP_FIXTURE_LOG")

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the given text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
    {
        "name": "danger",
        "description": "A tool no phase in the tests may call.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
        },
    },
    {
        "name": "write",
        "description": "Write text to a file.",
        "inputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path"],
        },
    },
]


def log(entry):
    if not LOG:
        return
    if LOG.startswith("http://127.0.0.1:"):
        request = urllib.request.Request(
            LOG, data=json.dumps(entry).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()
    else:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def reply(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def handle(msg):
    method = msg.get("method")
    msg_id = msg.get("id")
    if msg_id is None:
        return  # a notification (initialized, cancelled, ...)
    if method == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
        reply(msg_id, {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "fixture", "version": "1.0.0"},
        })
    elif method == "tools/list":
        reply(msg_id, {"tools": TOOLS})
    elif method == "tools/call":
        params = msg.get("params", {})
        name = params.get("name")
        args = params.get("arguments") or {}
        log({"tool": name, "arguments": args})
        if name in ("echo", "danger"):
            text = "%s: %s" % (name, args.get("text", ""))
            reply(msg_id, {"content": [{"type": "text", "text": text}], "isError": False})
        elif name == "write":
            try:
                with open(args["path"], "w", encoding="utf-8") as f:
                    f.write(args.get("text", "written by the MCP fixture"))
                text, failed = "wrote %s" % args["path"], False
            except OSError as e:
                text, failed = "write failed: %s" % e, True
            log({"tool": name, "result": text})
            reply(msg_id, {"content": [{"type": "text", "text": text}], "isError": failed})
        else:
            reply(msg_id, error={"code": -32602, "message": "unknown tool %s" % name})
    elif method == "ping":
        reply(msg_id, {})
    elif method in ("resources/list", "prompts/list"):
        key = method.split("/")[0]
        reply(msg_id, {key: []})
    else:
        reply(msg_id, error={"code": -32601, "message": "method not found: %s" % method})


def main():
    log({"event": "start"})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, list):
            for m in msg:
                handle(m)
        else:
            handle(msg)


if __name__ == "__main__":
    main()
