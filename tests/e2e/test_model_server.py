#!/usr/bin/env python3
"""Self-test of model_server.py: every wire format, side calls, the log,
Codex's tool_search and namespaced (MCP) calls, and scripted rate limits (429).

    python3 tests/e2e/test_model_server.py

Standard library only; starts the server on a free 127.0.0.1 port and talks
to it with urllib. Takes about a second.
"""

import calendar
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_server  # noqa: E402  (for its helpers: go_duration, Script)

SCRIPT = {
    "turns": [
        {"tool_call": {"name": ["write_file", "Write", "create"],
                       "arguments": {"path": "/tmp/x", "content": "hi"}}},
        {"text": "second"},
    ],
    "final_text": "all done",
}


# Codex's MCP tools: found with tool_search, then called inside a namespace.
TOOL_SEARCH_SCRIPT = [
    {"tool_search": {"query": "echo"}},
    {"tool_call": {"name": ["mcp__fixture__danger", "mcp__fixture__echo"],
                   "arguments": {"text": "hi"}}},
    {"tool_call": {"name": "mcp__fixture.danger", "arguments": {"text": "no"}}},
]


class ServerCase(unittest.TestCase):
    """Starts one server with cls.SCRIPT for the test class; the helpers."""

    SCRIPT = SCRIPT

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.log = os.path.join(cls.tmp.name, "log.jsonl")
        script = os.path.join(cls.tmp.name, "script.json")
        with open(script, "w") as f:
            json.dump(cls.SCRIPT, f)
        cls.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "model_server.py"), "--port", "0",
             "--script", script, "--log", cls.log, "--max-seconds", "60"],
            stdout=subprocess.PIPE, text=True)
        line = cls.proc.stdout.readline()
        assert line.startswith("PORT="), line
        cls.base = "http://127.0.0.1:" + line.strip().split("=")[1]

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=10)
        cls.proc.stdout.close()
        cls.tmp.cleanup()

    # -- helpers -----------------------------------------------------------

    def post(self, path, body):
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read().decode()

    def post_status(self, path, body):
        """(status, headers, parsed JSON body), also for an HTTP error status."""
        req = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.headers, resp.read().decode()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.headers, json.loads(err.read().decode())

    def sse(self, path, body):
        """The data payloads of an SSE answer, parsed ([DONE] kept as str)."""
        out = []
        for line in self.post(path, body).splitlines():
            if line.startswith("data: "):
                data = line[6:]
                out.append(data if data == "[DONE]" else json.loads(data))
        return out

    def last_log(self):
        with open(self.log) as f:
            return json.loads(f.read().splitlines()[-1])


class ModelServerTest(ServerCase):
    # -- Anthropic ---------------------------------------------------------

    def test_anthropic_stream_tool_call_then_text(self):
        tools = [{"name": "Write", "input_schema": {}}, {"name": "Read", "input_schema": {}}]
        first = {"model": "m", "stream": True, "tools": tools,
                 "messages": [{"role": "user", "content": "go"}]}
        events = self.sse("/v1/messages?beta=true", first)
        start = [e for e in events if e["type"] == "content_block_start"][0]
        self.assertEqual(start["content_block"]["name"], "Write")
        delta = [e for e in events if e["type"] == "content_block_delta"][0]
        self.assertEqual(json.loads(delta["delta"]["partial_json"])["content"], "hi")
        self.assertEqual(events[-2]["delta"]["stop_reason"], "tool_use")
        rec = self.last_log()
        self.assertEqual(rec["tools"], ["Read", "Write"])
        self.assertEqual(rec["turn"], 0)
        self.assertFalse(rec["has_tool_result"])

        tid = start["content_block"]["id"]
        second = dict(first, messages=[
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": tid,
                                               "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                          "is_error": True, "content": "denied"}]}])
        events = self.sse("/v1/messages", second)
        text = [e for e in events if e["type"] == "content_block_delta"][0]
        self.assertEqual(text["delta"]["text"], "second")
        rec = self.last_log()
        self.assertEqual(rec["turn"], 1)
        self.assertEqual(rec["tool_results"], [{"call_id": tid, "name": "Write",
                                                "is_error": True, "text": "denied"}])

    def test_anthropic_side_calls(self):
        body = {"model": "m", "tools": [], "messages": [{"role": "user", "content": "t"}],
                "output_config": {"format": {"type": "json_schema", "schema": {
                    "type": "object", "properties": {"title": {"type": "string"}},
                    "required": ["title"]}}}}
        msg = json.loads(self.post("/v1/messages", body))
        self.assertEqual(json.loads(msg["content"][0]["text"]), {"title": "ok"})
        self.assertTrue(self.last_log()["side"])
        count = json.loads(self.post("/v1/messages/count_tokens", body))
        self.assertIn("input_tokens", count)

    # -- OpenAI Responses --------------------------------------------------

    def test_responses_function_and_custom_calls(self):
        body = {"model": "m", "stream": True,
                "tools": [{"type": "function", "name": "Write"}, {"type": "web_search"}],
                "input": [{"type": "message", "role": "user", "content": "go"}]}
        events = self.sse("/v1/responses", body)
        self.assertEqual(events[0]["type"], "response.created")
        self.assertEqual(events[-1]["type"], "response.completed")
        item = events[-1]["response"]["output"][0]
        self.assertEqual((item["type"], item["name"]), ("function_call", "Write"))
        self.assertEqual(self.last_log()["tools"], ["Write", "web_search"])

        # A custom (freeform) tool gets a custom_tool_call with string input.
        custom = {"model": "m", "stream": True,
                  "tools": [{"type": "custom", "name": "create"}],
                  "input": [{"type": "message", "role": "user", "content": "go"}]}
        item = self.sse("/v1/responses", custom)[-1]["response"]["output"][0]
        self.assertEqual(item["type"], "custom_tool_call")
        self.assertEqual(json.loads(item["input"])["content"], "hi")

        # After the call and its output: turn 1, with the result recorded.
        body["input"] += [{"type": "reasoning", "summary": []},
                          {"type": "function_call", "call_id": "c1", "name": "Write",
                           "arguments": "{}"},
                          {"type": "function_call_output", "call_id": "c1",
                           "output": "written"}]
        events = self.sse("/v1/responses", body)
        self.assertEqual(events[-1]["response"]["output"][0]["content"][0]["text"], "second")
        rec = self.last_log()
        self.assertEqual(rec["turn"], 1)
        self.assertEqual(rec["tool_results"][0]["text"], "written")
        self.assertEqual(rec["tool_results"][0]["name"], "Write")

    # -- OpenAI Chat -------------------------------------------------------

    def test_chat_stream_and_plain(self):
        tools = [{"type": "function", "function": {"name": "create"}}]
        body = {"model": "m", "stream": True, "stream_options": {"include_usage": True},
                "tools": tools, "messages": [{"role": "user", "content": "go"}]}
        chunks = self.sse("/v1/chat/completions", body)
        self.assertEqual(chunks[-1], "[DONE]")
        calls = [c["choices"][0]["delta"]["tool_calls"] for c in chunks[:-1]
                 if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]
        self.assertEqual(calls[0][0]["function"]["name"], "create")
        self.assertIn("usage", chunks[-2])

        body = {"model": "m", "tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                  "function": {"name": "create"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "Permission denied"}]}
        resp = json.loads(self.post("/chat/completions", body))  # no /v1 prefix
        self.assertEqual(resp["choices"][0]["message"]["content"], "second")
        self.assertEqual(self.last_log()["tool_results"][0]["name"], "create")

        # No tools: a side call (e.g. OpenCode's title generation).
        side = {"model": "m", "messages": [{"role": "user", "content": "title"}]}
        resp = json.loads(self.post("/v1/chat/completions", side))
        self.assertEqual(resp["choices"][0]["message"]["content"], "ok")

    # -- Gemini ------------------------------------------------------------

    def test_gemini(self):
        body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
                "tools": [{"functionDeclarations": [{"name": "write_file"},
                                                    {"name": "read_file"}]}]}
        events = self.sse("/v1beta/models/g:streamGenerateContent?alt=sse", body)
        part = events[0]["candidates"][0]["content"]["parts"][0]
        self.assertEqual(part["functionCall"]["name"], "write_file")

        body["contents"] += [
            {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {
                "name": "write_file", "response": {"error": "Tool not found"}}}]}]
        resp = json.loads(self.post("/v1beta/models/g:generateContent", body))
        self.assertEqual(resp["candidates"][0]["content"]["parts"][0]["text"], "second")
        rec = self.last_log()
        self.assertEqual((rec["turn"], rec["tool_results"][0]["is_error"]), (1, True))

        # Router / next-speaker checks: JSON from the schema, no script used.
        side = {"contents": [{"role": "user", "parts": [{"text": "route"}]}],
                "generationConfig": {"responseJsonSchema": {
                    "type": "OBJECT", "required": ["score", "next"],
                    "properties": {"score": {"type": "INTEGER"},
                                   "next": {"type": "STRING", "enum": ["user", "model"]}}}}}
        resp = json.loads(self.post("/v1beta/models/g:generateContent", side))
        text = resp["candidates"][0]["content"]["parts"][0]["text"]
        self.assertEqual(json.loads(text), {"score": 1, "next": "user"})
        self.assertIn("totalTokens", json.loads(self.post("/v1beta/models/g:countTokens", side)))

    # -- listings and unknown routes ---------------------------------------

    def test_listings(self):
        with urllib.request.urlopen(self.base + "/v1/models", timeout=10) as r:
            self.assertEqual(json.load(r)["data"][0]["id"], "mock-model")
        with urllib.request.urlopen(self.base + "/v1beta/models", timeout=10) as r:
            self.assertIn("models", json.load(r))
        with urllib.request.urlopen(self.base + "/whatever", timeout=10) as r:
            self.assertEqual(json.load(r), {})
        self.assertEqual(self.last_log()["api"], "unknown")


class ToolSearchTest(ServerCase):
    """Codex 0.169.0 (gpt-5.5) defers MCP tools behind a client tool_search."""

    SCRIPT = TOOL_SEARCH_SCRIPT

    def test_codex_tool_search(self):
        tools = [{"type": "function", "name": "exec_command"},
                 {"type": "tool_search", "execution": "client",
                  "parameters": {"type": "object"}}]
        body = {"model": "gpt-5.5", "stream": True, "tools": tools,
                "input": [{"type": "message", "role": "user", "content": "go"}]}

        # Turn 0: a client-executed tool_search_call, not a function_call.
        events = self.sse("/v1/responses", body)
        added = [e for e in events if e["type"] == "response.output_item.added"]
        self.assertEqual(added[0]["item"]["type"], "tool_search_call")
        call = events[-1]["response"]["output"][0]
        self.assertEqual((call["type"], call["execution"], call["arguments"]),
                         ("tool_search_call", "client", {"query": "echo"}))
        rec = self.last_log()
        self.assertEqual(rec["reply"]["tool_calls"][0]["kind"], "tool_search")
        self.assertEqual(rec["tool_kinds"]["tool_search"], "tool_search")

        # Codex runs the search and sends the tools it found as an input
        # item; they are callable from then on.
        found = {"type": "namespace", "name": "mcp__fixture",
                 "description": "Tools in the mcp__fixture namespace.",
                 "tools": [{"type": "function", "name": "echo",
                            "defer_loading": True, "parameters": {}}]}
        body["input"] += [dict(call, id="tsc_1"),
                          {"type": "tool_search_output", "id": "tso_1",
                           "call_id": call["call_id"], "status": "completed",
                           "execution": "client", "tools": [found]}]
        out = self.sse("/v1/responses", body)[-1]["response"]["output"][0]
        # The flat candidate mcp__fixture__echo matched the namespace tool.
        self.assertEqual((out["type"], out["namespace"], out["name"]),
                         ("function_call", "mcp__fixture", "echo"))
        self.assertEqual(json.loads(out["arguments"]), {"text": "hi"})
        rec = self.last_log()
        self.assertEqual(rec["turn"], 1)
        self.assertIn("mcp__fixture.echo", rec["tools"])
        self.assertEqual(rec["found_tools"], ["mcp__fixture.echo"])
        self.assertEqual(rec["tool_results"], [{
            "call_id": call["call_id"], "name": "tool_search", "is_error": None,
            "text": "mcp__fixture.echo", "tools": ["mcp__fixture.echo"]}])
        self.assertEqual(rec["reply"]["tool_calls"][0]["name"], "mcp__fixture.echo")

        # After the MCP call: turn 2. A namespaced name that was never
        # found is still sent in the namespace form.
        body["input"] += [out, {"type": "function_call_output", "call_id": out["call_id"],
                                "output": [{"type": "input_text", "text": "echo: hi"}]}]
        out = self.sse("/v1/responses", body)[-1]["response"]["output"][0]
        self.assertEqual((out["namespace"], out["name"]), ("mcp__fixture", "danger"))
        rec = self.last_log()
        self.assertEqual(rec["turn"], 2)
        self.assertEqual(rec["tool_results"][0]["name"], "mcp__fixture.echo")
        self.assertEqual(rec["tool_results"][0]["text"], "echo: hi")


# Bodies that offer one tool, i.e. main-conversation requests, per API.
def anthropic_body(messages=None):
    return {"model": "claude-x", "stream": True, "tools": [{"name": "Write", "input_schema": {}}],
            "messages": messages or [{"role": "user", "content": "go"}]}


def responses_body():
    return {"model": "gpt-x", "stream": True, "tools": [{"type": "function", "name": "Write"}],
            "input": [{"type": "message", "role": "user", "content": "go"}]}


def chat_body():
    return {"model": "gpt-x", "stream": True,
            "tools": [{"type": "function", "function": {"name": "Write"}}],
            "messages": [{"role": "user", "content": "go"}]}


def gemini_body():
    return {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "tools": [{"functionDeclarations": [{"name": "write_file"}]}]}


GEMINI_SSE = "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"


class RateLimitOnceTest(ServerCase):
    """429 twice, then the turn; a rate_limit entry guards the turn after it."""

    SCRIPT = [{"rate_limit": {"seconds": 20, "times": 2}},
              {"tool_call": {"name": "Write", "arguments": {"file_path": "/tmp/x"}}},
              {"rate_limit": {"seconds": 5}},
              {"text": "second"}]

    def test_429_until_times_then_the_turn(self):
        start = time.time()
        for n in (1, 2):
            status, headers, body = self.post_status("/v1/messages?beta=true", anthropic_body())
            self.assertEqual(status, 429)
            self.assertEqual(body["type"], "error")
            self.assertEqual(body["error"]["type"], "rate_limit_error")
            self.assertEqual(headers["retry-after"], "20")
            self.assertTrue(headers["request-id"].startswith("req_"))
            reset = calendar.timegm(time.strptime(headers["anthropic-ratelimit-requests-reset"],
                                                  "%Y-%m-%dT%H:%M:%SZ"))
            self.assertAlmostEqual(reset, start + 20, delta=2)
            rec = self.last_log()
            self.assertEqual(rec["status"], 429)
            self.assertEqual(rec["turn"], 0)
            self.assertEqual(rec["reply"], {"rate_limit": {"variant": "default", "seconds": 20.0,
                                                           "n": n, "times": 2}})
        # A side call (no tools) is never rate-limited and uses up nothing.
        side = {"model": "m", "messages": [{"role": "user", "content": "title"}]}
        self.assertEqual(json.loads(self.post("/v1/messages", side))["content"][0]["text"], "ok")
        # The third request gets turn 0: the tool call.
        events = self.sse("/v1/messages", anthropic_body())
        start_ev = [e for e in events if e["type"] == "content_block_start"][0]
        self.assertEqual(start_ev["content_block"]["name"], "Write")
        self.assertNotIn("status", self.last_log())

        # Turn 1 (after the tool result) is guarded by the second entry: once.
        tid = start_ev["content_block"]["id"]
        after = anthropic_body([
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": tid,
                                               "name": "Write", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid,
                                          "content": "written"}]}])
        status, headers, _ = self.post_status("/v1/messages", after)
        self.assertEqual((status, headers["retry-after"]), (429, "5"))
        self.assertEqual(self.last_log()["turn"], 1)
        events = self.sse("/v1/messages", after)
        text = [e for e in events if e["type"] == "content_block_delta"][0]
        self.assertEqual(text["delta"]["text"], "second")


class RateLimitShapesTest(ServerCase):
    """The default variant on every API (times large: always 429)."""

    SCRIPT = [{"rate_limit": {"seconds": 90, "times": 1000}}, {"text": "never"}]

    def test_openai_responses_and_chat(self):
        for path, body, api in (("/v1/responses", responses_body(), "responses"),
                                ("/v1/chat/completions", chat_body(), "chat")):
            status, headers, err = self.post_status(path, body)
            self.assertEqual(status, 429)
            self.assertEqual(err["error"]["code"], "rate_limit_exceeded")
            self.assertEqual(err["error"]["type"], "requests")
            self.assertIsNone(err["error"]["param"])
            self.assertIn("Please try again in 1m30s.", err["error"]["message"])
            self.assertEqual(headers["retry-after"], "90")
            self.assertEqual(headers["retry-after-ms"], "90000")
            self.assertEqual(headers["x-ratelimit-reset-requests"], "1m30s")
            self.assertEqual(headers["x-ratelimit-remaining-requests"], "0")
            self.assertIn("x-ratelimit-reset-tokens", headers)
            self.assertEqual(self.last_log()["api"], api)

    def test_gemini(self):
        status, headers, err = self.post_status(GEMINI_SSE, gemini_body())
        self.assertEqual(status, 429)
        error = err["error"]
        self.assertEqual((error["code"], error["status"]), (429, "RESOURCE_EXHAUSTED"))
        self.assertTrue(error["message"].endswith("Please retry in 90s."))
        kinds = {d["@type"].rsplit(".", 1)[-1]: d for d in error["details"]}
        self.assertEqual(kinds["RetryInfo"]["retryDelay"], "90s")
        quota_id = kinds["QuotaFailure"]["violations"][0]["quotaId"]
        self.assertIn("PerMinute", quota_id)
        self.assertEqual(kinds["QuotaFailure"]["violations"][0]["quotaDimensions"]["model"],
                         "gemini-x")
        # streamGenerateContent without alt=sse answers with an array.
        _, _, arr = self.post_status("/v1beta/models/g:streamGenerateContent", gemini_body())
        self.assertEqual(arr[0]["error"]["code"], 429)


class UsageLimitTest(ServerCase):
    """variant usage_limit: Claude subscription, ChatGPT/Codex, Gemini per-day."""

    SCRIPT = [{"rate_limit": {"seconds": 3600, "times": 1000, "variant": "usage_limit"}}]

    def test_codex_usage_limit_reached(self):
        start = time.time()
        for path, body in (("/v1/responses", responses_body()),
                           ("/v1/chat/completions", chat_body())):
            status, headers, err = self.post_status(path, body)
            self.assertEqual(status, 429)
            error = err["error"]
            self.assertEqual((error["type"], error["plan_type"]), ("usage_limit_reached", "plus"))
            self.assertAlmostEqual(error["resets_at"], start + 3600, delta=2)
            self.assertEqual(error["resets_in_seconds"], 3600)
            self.assertEqual(headers["x-codex-primary-used-percent"], "100")
            self.assertEqual(headers["x-codex-primary-reset-at"], str(error["resets_at"]))
            self.assertNotIn("retry-after", headers)

    def test_claude_unified_headers(self):
        start = time.time()
        status, headers, err = self.post_status("/v1/messages", anthropic_body())
        self.assertEqual((status, err["error"]["type"]), (429, "rate_limit_error"))
        self.assertEqual(headers["anthropic-ratelimit-unified-status"], "rejected")
        self.assertAlmostEqual(int(headers["anthropic-ratelimit-unified-reset"]),
                               start + 3600, delta=2)
        self.assertEqual(headers["anthropic-ratelimit-unified-representative-claim"], "five_hour")
        self.assertEqual(headers["retry-after"], "3600")

    def test_gemini_per_day(self):
        _, _, err = self.post_status(GEMINI_SSE, gemini_body())
        violation = err["error"]["details"][0]["violations"][0]
        self.assertIn("PerDay", violation["quotaId"])


class RateLimitHelpersTest(unittest.TestCase):
    def test_go_duration(self):
        for seconds, text in ((20, "20s"), (20.5, "20.5s"), (90, "1m30s"), (360, "6m0s"),
                              (3725, "1h2m5s"), (0.25, "250ms")):
            self.assertEqual(model_server.go_duration(seconds), text)

    def test_bad_entries_are_refused(self):
        for spec in ({"variant": "weekly"}, {"seconds": -1}, {"retry": 3}):
            with self.assertRaises(ValueError):
                model_server.Script([{"rate_limit": spec}], "done")


if __name__ == "__main__":
    unittest.main()
