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

With `--http` it is a remote server instead (streamable HTTP, JSON
answers): it listens on 127.0.0.1 only, prints `PORT=<n>` first, serves
`POST /mcp`, and logs with each call the `X-Fixture-Token` header it got
(so a test sees what the CLI sent). It stops after `--max-seconds`
(default 300) or on SIGTERM. Over HTTP it also has a tool `hold` (not
listed) that answers after `seconds` (a slow tool, or one holding its
exchange open), and it logs each `DELETE` (the end of a session) with the
time, as it logs each call. It answers an `initialize` from a client named
`slow-init` after 3 s.
"""
import json
import os
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


def answer(msg_id, result=None, error=None):
    out = {"jsonrpc": "2.0", "id": msg_id}
    if error is not None:
        out["error"] = error
    else:
        out["result"] = result
    return out


def handle(msg, extra=None):
    """The answer to one JSON-RPC message (None for a notification);
    `extra` is logged with each tool call."""
    answers = []

    def reply(msg_id, result=None, error=None):
        answers.append(answer(msg_id, result, error))

    method = msg.get("method")
    msg_id = msg.get("id")
    if msg_id is None:
        return None  # a notification (initialized, cancelled, ...)
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
        # What MCP_FIXTURE_TOKEN the server was given (a credential meant
        # for it alone), so a test sees it reached the server.
        seen = {"token_seen": os.environ["MCP_FIXTURE_TOKEN"]} if "MCP_FIXTURE_TOKEN" in os.environ else {}
        if os.environ.get("MCP_FIXTURE_GIT") and os.environ.get("ORCH_WORKSPACE"):
            # Like a git server: git in the workspace, whose `.git` an
            # agent may have written.
            import subprocess
            done = subprocess.run(["git", "status", "--porcelain"], cwd=os.environ["ORCH_WORKSPACE"],
                                  capture_output=True, text=True, timeout=30)
            seen["git_status"] = done.returncode
        log(dict({"tool": name, "arguments": args}, **seen, **(extra or {})))
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


    return answers[0] if answers else None


def write(out):
    if out is not None:
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


class Http(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send(self, code, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        if self.path.split("?")[0] != "/mcp":
            return self.send(404, {"error": "not found"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            msg = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            return self.send(400, {"error": "not JSON"})
        extra = {"token": self.headers.get("X-Fixture-Token")}
        if isinstance(msg, dict) and msg.get("method") == "initialize" and \
                ((msg.get("params") or {}).get("clientInfo") or {}).get("name") == "slow-init":
            time.sleep(3)
        if isinstance(msg, dict) and msg.get("method") == "tools/call" \
                and (msg.get("params") or {}).get("name") == "hold":
            args = msg["params"].get("arguments") or {}
            log({"tool": "hold", "arguments": args, "t": time.time()})
            time.sleep(float(args.get("seconds", 1)))
            text = "held %s s" % args.get("seconds", 1)
            return self.send(200, answer(msg.get("id"), {"content": [{"type": "text", "text": text}]}),
                             [("Mcp-Session-Id", "fixture-session")])
        if isinstance(msg, list):
            out = [a for a in (handle(m, extra) for m in msg) if a is not None]
            out = out or None
        else:
            out = handle(msg, extra)
        session = [("Mcp-Session-Id", "fixture-session")]
        if out is None:
            return self.send(202, None, session)
        self.send(200, out, session)

    def do_GET(self):
        # No server-to-client stream.
        self.send(405, None, [("Allow", "POST")])

    def do_DELETE(self):
        log({"event": "delete", "session": self.headers.get("Mcp-Session-Id"), "t": time.time()})
        self.send(200, None)


def serve_http(max_seconds):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Http)
    print("PORT=%d" % server.server_address[1], flush=True)
    threading.Timer(max_seconds, server.shutdown).start()
    server.serve_forever()


def main():
    if "--http" in sys.argv:
        seconds = 300.0
        if "--max-seconds" in sys.argv:
            seconds = float(sys.argv[sys.argv.index("--max-seconds") + 1])
        serve_http(seconds)
        os._exit(0)
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
            out = [a for a in (handle(m) for m in msg) if a is not None]
            write(out or None)
        else:
            write(handle(msg))


if __name__ == "__main__":
    main()
