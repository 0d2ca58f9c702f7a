#!/usr/bin/env python3
"""Scripted model endpoint for orch's end-to-end tests.

A tiny fake LLM server (Python 3 standard library only) that speaks just enough
of four wire formats for the real agent CLIs to run a conversation against it:

  * Anthropic Messages     POST /v1/messages (SSE or JSON), /v1/messages/count_tokens
  * OpenAI Responses       POST /v1/responses (SSE or JSON)
  * OpenAI Chat            POST /v1/chat/completions (SSE or JSON)
  * Gemini                 POST /v1beta/models/{model}:generateContent,
                           :streamGenerateContent (?alt=sse), :countTokens
  * model listings         GET /v1/models, GET /v1beta/models, ...

Every route is also accepted without the /v1 or /v1beta prefix, so a CLI whose
base URL does or does not end in /v1 still finds it.

It answers from a *script*, a JSON file given with --script:

    [ {"tool_call": {"name": "Write",
                     "arguments": {"file_path": "/tmp/x/out.txt", "content": "hi\\n"}}},
      {"text": "all done"} ]

or the same list under {"turns": [...], "final_text": "done"}. A turn is one of

    {"text": "..."}                              a plain assistant answer
    {"tool_call": {"name": N, "arguments": A}}   one tool call
    {"tool_calls": [{"name": N, "arguments": A}, ...]}   parallel calls
    {"tool_search": {"query": "echo"}}           Codex's tool_search (below)

and, not a turn of its own, {"rate_limit": {"seconds": 20, "variant": "default"
| "usage_limit", "times": 1}}: the first `times` requests for the turn after it
(or for the final text) get an HTTP 429 in the provider's own shape, with the
reset `seconds` away (see RateLimit and rate_limit_response below).

`name` may also be a list of candidate names: the first one the request offers
is used (the first one if none is offered), so one script can name e.g.
["write_file", "Write", "create"]. For a Responses API tool of type "custom"
(Codex's freeform apply_patch) the arguments may be a plain string, or
{"input": "..."}; they are sent as the custom call's input.

Namespaces and tool_search (Responses API, Codex). A tool inside a "namespace"
tool is named "ns.tool" (e.g. "mcp__fixture.echo"), and a call to such a name
is sent as {"type": "function_call", "namespace": "ns", "name": "tool"}; a
flat candidate "ns__tool" also matches an offered "ns.tool". Codex does not
list MCP tools in `tools`: it offers {"type": "tool_search", "execution":
"client"}. The turn {"tool_search": {"query": Q}} (or a tool_call named
"tool_search") is answered, when that tool is offered, with the output item
{"type": "tool_search_call", "execution": "client", "call_id",
"arguments": {"query": Q}}. Codex replies in its next request with an input
item {"type": "tool_search_output", "call_id", "tools": [{"type":
"namespace", "name": "mcp__fixture", "tools": [{"type": "function", "name":
"echo", ...}]}]}; the tools found there count as offered from then on.

Which turn answers a request is decided from the request itself, not from a
counter: the turn index is the number of assistant messages in the request's
history that contain a tool call. The first request of a conversation gets
turn 0; after the CLI has run (or refused) that call and sent the tool result
back, the next request gets turn 1; and so on. This is robust to retries,
parallel conversations and side calls. When the script is exhausted the answer
is the final text ("done" by default). A text turn ends the CLI's turn, so the
turns after a text turn are only reached if the CLI sends another prompt.

Side calls (title generation, summaries, routing, next-speaker checks,
count_tokens, quota probes) must not consume the script. A request is treated
as a side call when it offers no tools at all; it is answered with a short text
(--side-text), or, when the request asks for JSON output with a schema (Gemini
CLI's next-speaker / routing checks), with the smallest JSON object satisfying
that schema (first enum value of every required property).

Every request is appended to a JSONL log (--log): the path, which API it was,
the names of the tools offered (plus those found by tool_search, also listed
as found_tools), whether it is a side call, the turn index, the
tool results it carries (name, call id, error flag, text), what was answered,
and the raw body. A test reads the log to see what the model was offered and
whether a scripted call was executed or refused (from the text of its result).

Usage:
    model_server.py --script turns.json --log requests.jsonl [--port 0]

The first line on stdout is PORT=<n> (flushed), once the server is listening.
It binds 127.0.0.1 only and makes no outgoing connection. It stops on SIGTERM
or SIGINT, and by itself after --max-seconds (default 600) or --max-requests.
"""

import argparse
import json
import math
import re
import signal
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

MODEL_IDS = ["mock-model"]


# ---------------------------------------------------------------------------
# The script
# ---------------------------------------------------------------------------


class Script:
    """The scripted turns, loaded once from the --script file.

    `turns` holds the conversation turns (text, tool calls, tool_search).
    A {"rate_limit": {...}} entry is not a turn of its own: it applies to the
    requests for the turn that follows it (or, at the end of the script, to
    the final text). Its first `times` such requests are answered with an
    HTTP 429, after which the turn is answered as usual. The count is kept
    here (the only state the server keeps between requests).
    """

    def __init__(self, turns, final_text):
        self.turns, self.limits = [], {}
        pending = []
        for turn in turns:
            if "rate_limit" in turn:
                pending.append(RateLimit.from_turn(turn["rate_limit"]))
            else:
                self.limits[len(self.turns)] = pending
                self.turns.append(turn)
                pending = []
        self.limits[len(self.turns)] = pending
        self.final_text = final_text
        self.lock = threading.Lock()

    @classmethod
    def load(cls, path, final_text):
        if not path:
            return cls([], final_text)
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict):
            final_text = data.get("final_text", final_text)
            data = data.get("turns", [])
        if not isinstance(data, list):
            raise ValueError("script must be a list of turns or {\"turns\": [...]}")
        for i, turn in enumerate(data):
            if not isinstance(turn, dict) or not (
                "text" in turn or "tool_call" in turn or "tool_calls" in turn
                or "tool_search" in turn or "rate_limit" in turn
            ):
                raise ValueError(f"script turn {i}: need text, tool_call, tool_calls, "
                                 "tool_search or rate_limit")
        return cls(data, final_text)

    def rate_limit(self, index):
        """(RateLimit, n) if this request for turn `index` gets a 429, else None.

        n counts the 429s that rate_limit entry has sent, this one included.
        """
        with self.lock:
            for limit in self.limits.get(min(index, len(self.turns)), []):
                if limit.sent < limit.times:
                    limit.sent += 1
                    return limit, limit.sent
        return None

    def answer(self, index, offered):
        """The reply for turn `index`: ("text", str) or ("tools", [calls]).

        `offered` maps offered tool name -> tool kind ("function", "custom",
        "tool_search", ...; "ns.tool" for a tool inside a namespace).
        """
        if index >= len(self.turns):
            return ("text", self.final_text)
        turn = self.turns[index]
        if "text" in turn:
            return ("text", str(turn["text"]))
        if "tool_search" in turn:  # {"tool_search": {"query": Q}} or {"tool_search": Q}
            query = turn["tool_search"]
            calls = [{"name": "tool_search",
                      "arguments": {"query": query} if isinstance(query, str) else query}]
        else:
            calls = turn.get("tool_calls") or [turn["tool_call"]]
        out = []
        for call in calls:
            name = pick_name(call["name"], offered)
            out.append({"name": name, "arguments": call.get("arguments", {}),
                        "kind": offered.get(name, "function")})
        return ("tools", out)


# ---------------------------------------------------------------------------
# Rate limits: HTTP 429 in each provider's own shape
# ---------------------------------------------------------------------------


class RateLimit:
    """One {"rate_limit": {...}} script entry.

    seconds  time until the limit resets (default 20); every header and body
             field that carries a reset time or delay is derived from it
    variant  "default": the provider's ordinary rate limit (Anthropic
             rate_limit_error, OpenAI rate_limit_exceeded, Gemini
             RESOURCE_EXHAUSTED per minute); "usage_limit": the plan/quota
             kind (Claude subscription "unified" headers, ChatGPT/Codex
             usage_limit_reached, Gemini per-day quota)
    times    how many requests get the 429 before the turn is answered
             normally (default 1)
    message  replaces the error message text
    """

    VARIANTS = ("default", "usage_limit")

    def __init__(self, seconds=20, variant="default", times=1, message=None):
        if variant not in self.VARIANTS:
            raise ValueError(f"rate_limit variant must be one of {self.VARIANTS}")
        if float(seconds) < 0 or int(times) < 0:
            raise ValueError("rate_limit seconds and times must not be negative")
        self.seconds, self.variant = float(seconds), variant
        self.times, self.message, self.sent = int(times), message, 0

    @classmethod
    def from_turn(cls, spec):
        spec = spec if isinstance(spec, dict) else {}
        unknown = set(spec) - {"seconds", "variant", "times", "message"}
        if unknown:
            raise ValueError(f"rate_limit: unknown keys {sorted(unknown)}")
        return cls(**spec)

    def response(self, api, model, now=None):
        """(status, headers, body) of the 429 for this API."""
        now = time.time() if now is None else now
        return rate_limit_response(api, model, self.seconds, self.variant,
                                   self.message, now)


def go_duration(seconds):
    """A duration as OpenAI's x-ratelimit-reset-* headers write it: 20s, 1m30s, 6m0s, 250ms."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{secs:.3f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{text}"
    if minutes:
        return f"{int(minutes)}m{text}"
    return text


def short_number(x):
    """20.0 -> "20", 20.5 -> "20.5"."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


def rfc3339(epoch):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def rate_limit_response(api, model, seconds, variant, message, now):
    """The 429 a real provider sends, per API: (429, headers, body).

    Anthropic: body {"type": "error", "error": {"type": "rate_limit_error", ...}},
      headers retry-after (whole seconds), anthropic-ratelimit-{requests,tokens,
      input-tokens,output-tokens}-reset (RFC 3339), request-id. usage_limit adds
      the Claude subscription headers anthropic-ratelimit-unified-status:
      rejected and anthropic-ratelimit-unified-reset (epoch seconds).
    OpenAI (responses, chat): body {"error": {"message": "... Please try again in
      20s. ...", "type": "requests", "code": "rate_limit_exceeded"}}, headers
      retry-after, retry-after-ms, x-ratelimit-reset-requests (Go duration).
      usage_limit is ChatGPT's (Codex) body {"error": {"type":
      "usage_limit_reached", "plan_type", "resets_at" (epoch s),
      "resets_in_seconds"}} with x-codex-primary-* headers and no retry-after.
    Gemini: body {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
      "... Please retry in 20s.", "details": [QuotaFailure, Help, RetryInfo
      {"retryDelay": "20s"}]}}. usage_limit names a per-day quota
      (quotaId ...PerDay...), which Gemini CLI treats as terminal.
    """
    reset = now + seconds
    whole = max(0, math.ceil(seconds))
    req_id = new_id("req")
    if api == "anthropic":
        headers = {"retry-after": str(whole), "request-id": req_id}
        for kind, limit in (("requests", 50), ("tokens", 100000),
                            ("input-tokens", 80000), ("output-tokens", 20000)):
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = "0" if kind == "requests" else str(limit)
            headers[f"anthropic-ratelimit-{kind}-reset"] = rfc3339(reset if kind == "requests" else now + 1)
        if variant == "usage_limit":
            epoch = str(math.ceil(reset))
            headers.update({
                "anthropic-ratelimit-unified-status": "rejected",
                "anthropic-ratelimit-unified-reset": epoch,
                "anthropic-ratelimit-unified-representative-claim": "five_hour",
                "anthropic-ratelimit-unified-5h-status": "rejected",
                "anthropic-ratelimit-unified-5h-reset": epoch,
                "anthropic-ratelimit-unified-5h-utilization": "1.0",
                "anthropic-ratelimit-unified-overage-status": "rejected",
            })
            text = message or "This request would exceed your account's rate limit. Please try again later."
        else:
            text = message or (
                "This request would exceed the rate limit for your organization "
                "(00000000-0000-0000-0000-000000000000) of 50 requests per minute. For "
                "details, refer to: https://docs.claude.com/en/api/rate-limits. You can see "
                "the response headers for current usage. Please reduce the prompt length or "
                "the maximum tokens requested, or try again later. You may also contact sales "
                "at https://www.anthropic.com/contact-sales to discuss your options for a rate "
                "limit increase.")
        body = {"type": "error", "error": {"type": "rate_limit_error", "message": text},
                "request_id": req_id}
        return 429, headers, body
    if api in ("responses", "chat"):
        headers = {"x-request-id": req_id}
        if variant == "usage_limit":
            epoch = math.ceil(reset)
            headers.update({
                "x-codex-primary-used-percent": "100",
                "x-codex-primary-window-minutes": "300",
                "x-codex-primary-reset-at": str(epoch),
                "x-codex-primary-reset-after-seconds": str(whole),
                "x-codex-secondary-used-percent": "40",
                "x-codex-secondary-window-minutes": "10080",
                "x-codex-secondary-reset-at": str(math.ceil(now + 7 * 86400)),
            })
            body = {"error": {"type": "usage_limit_reached",
                              "message": message or "The usage limit has been reached",
                              "plan_type": "plus", "resets_at": epoch,
                              "resets_in_seconds": whole}}
            return 429, headers, body
        delay = go_duration(seconds)
        headers.update({
            "retry-after": str(whole), "retry-after-ms": str(round(seconds * 1000)),
            "x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": delay,
            "x-ratelimit-limit-tokens": "30000", "x-ratelimit-remaining-tokens": "29000",
            "x-ratelimit-reset-tokens": "2s",
        })
        text = message or (
            f"Rate limit reached for requests in organization org-local on requests per "
            f"min (RPM): Limit 500, Used 500, Requested 1. Please try again in {delay}. "
            f"Visit https://platform.openai.com/account/rate-limits to learn more.")
        body = {"error": {"message": text, "type": "requests", "param": None,
                          "code": "rate_limit_exceeded"}}
        return 429, headers, body
    # Gemini
    per = "Day" if variant == "usage_limit" else "Minute"
    limit = 250 if per == "Day" else 10
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    text = message or (
        "You exceeded your current quota, please check your plan and billing details. "
        "For more information on this error, head to: "
        "https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current "
        "usage, head to: https://ai.dev/rate-limit. \n* Quota exceeded for metric: "
        f"{metric}, limit: {limit}, model: {model}\n"
        f"Please retry in {short_number(seconds)}s.")
    body = {"error": {"code": 429, "message": text, "status": "RESOURCE_EXHAUSTED",
                      "details": [
                          {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
                           "violations": [{"quotaMetric": metric,
                                           "quotaId": f"GenerateRequestsPer{per}PerProjectPerModel-FreeTier",
                                           "quotaDimensions": {"location": "global", "model": model},
                                           "quotaValue": str(limit)}]},
                          {"@type": "type.googleapis.com/google.rpc.Help",
                           "links": [{"description": "Learn more about Gemini API quotas",
                                      "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
                          {"@type": "type.googleapis.com/google.rpc.RetryInfo",
                           "retryDelay": f"{int(seconds)}s"}]}}
    return 429, {}, body


def pick_name(name, offered):
    """The tool name to call: the first candidate the request offers.

    A candidate matches an offered name exactly, or, written flat as
    "ns__tool" (how Claude and others name MCP tools), it matches a tool
    "tool" inside an offered namespace "ns" (Codex's MCP tools, offered
    as "mcp__fixture.echo"); it is then called under the namespace form.
    When no candidate is offered, the first one is used as written.
    """
    names = name if isinstance(name, list) else [name]
    flat = {}
    for offered_name in offered:
        if "." in offered_name:
            ns, inner = offered_name.rsplit(".", 1)
            flat.setdefault(f"{ns}__{inner}", offered_name)
            if ns.endswith("_"):
                flat.setdefault(ns + inner, offered_name)
    for n in names:
        if n in offered:
            return n
        if n in flat:
            return flat[n]
    return names[0]


def args_json(arguments):
    """Arguments as the JSON string the OpenAI formats carry."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def custom_input(arguments):
    """Arguments as the plain string input of a Responses `custom` tool call."""
    if isinstance(arguments, str):
        return arguments
    if isinstance(arguments, dict) and isinstance(arguments.get("input"), str):
        return arguments["input"]
    return json.dumps(arguments)


def new_id(prefix):
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def text_of(value):
    """Flatten a tool-result payload (string, content blocks, dict) to text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content", "error", "result"):
            if key in value:
                return text_of(value[key])
        return json.dumps(value)
    return str(value)


def schema_example(schema):
    """Smallest value matching a JSON schema (enough for Gemini CLI checks)."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        props = schema.get("properties") or {}
        required = schema.get("required") or list(props)
        return {k: schema_example(props.get(k, {})) for k in required}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)  # 1: Gemini's router wants a score of 1-100
    if kind == "boolean":
        return False
    return "ok"


# ---------------------------------------------------------------------------
# Parsing requests of each API: offered tools, tool results, turn index
# ---------------------------------------------------------------------------


# Each parse_<api>(body) returns (offered, new_results, all_results, turn):
#   offered      {tool name: kind}; kind is "function", or the tool's own type
#                for built-ins and freeform tools ("custom", "web_search", ...)
#   new_results  the tool results after the last model message, each
#                {call_id, name, is_error (None if the format has no flag), text}
#   all_results  every tool result in the history
#   turn         the number of model messages in the history that hold a call


def parse_anthropic(body):
    offered = {}
    for tool in body.get("tools") or []:
        # Client tools have a name; server tools (web_search_2025...) too.
        if tool.get("name"):
            offered[tool["name"]] = tool.get("type") or "function"
    messages = body.get("messages") or []
    names, results, turns = {}, [], 0
    for msg in messages:
        content = msg.get("content")
        blocks = content if isinstance(content, list) else []
        if msg.get("role") == "assistant":
            uses = [b for b in blocks if b.get("type") in ("tool_use", "server_tool_use")]
            for b in uses:
                names[b.get("id")] = b.get("name")
            turns += 1 if uses else 0
        for b in blocks:
            if b.get("type") == "tool_result":
                results.append({"call_id": b.get("tool_use_id"),
                                "name": names.get(b.get("tool_use_id")),
                                "is_error": bool(b.get("is_error")),
                                "text": text_of(b.get("content"))})
    trailing = trailing_results(messages, results,
                                lambda m: m.get("role") == "assistant")
    return offered, trailing, results, turns


RESPONSES_CALLS = ("function_call", "custom_tool_call", "local_shell_call",
                   "tool_search_call")
RESPONSES_OUTPUTS = ("function_call_output", "custom_tool_call_output",
                     "local_shell_call_output", "tool_search_output")


def responses_item_is_model(item):
    """True for Responses input items the model produced (calls, reasoning...)."""
    kind = item.get("type", "message")
    return (kind in RESPONSES_CALLS + ("reasoning", "web_search_call")
            or (kind == "message" and item.get("role") == "assistant"))


def responses_tool_names(tools, offered):
    """Add Responses tool specs to `offered` {name: kind}.

    function and custom tools have names; built-ins (web_search, tool_search,
    local_shell, ...) are recorded by their type; a "namespace" groups tools
    (Codex's multi_agent_v1, and the MCP servers that Codex's tool_search
    returns, e.g. namespace "mcp__fixture" holding "echo") and is recorded as
    the namespace plus one "namespace.tool" entry per inner tool.
    Returns the "namespace.tool" / plain names added, in order.
    """
    added = []
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type", "function")
        offered[tool.get("name") or kind] = kind
        inner_tools = tool.get("tools") or []
        if not inner_tools:
            added.append(tool.get("name") or kind)
        for inner in inner_tools:
            name = f"{tool.get('name')}.{inner.get('name')}"
            offered[name] = inner.get("type", "function")
            added.append(name)
    return added


def responses_call_name(item):
    """The name a Responses call item is logged under."""
    kind = item.get("type")
    if kind == "tool_search_call":
        return "tool_search"
    name = item.get("name") or kind
    return f"{item['namespace']}.{name}" if item.get("namespace") else name


def parse_responses(body):
    offered = {}
    responses_tool_names(body.get("tools"), offered)
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    items = items or []
    # A model turn is a run of consecutive model items; it counts when it
    # holds a call.
    names, results, turns, in_model, had_call = {}, [], 0, False, False
    for item in items:
        kind = item.get("type", "message")
        if responses_item_is_model(item):
            had_call = (had_call and in_model) or kind in RESPONSES_CALLS
            in_model = True
            if kind in RESPONSES_CALLS:
                names[item.get("call_id")] = responses_call_name(item)
            continue
        turns += 1 if in_model and had_call else 0
        in_model = had_call = False
        if kind == "tool_search_output":
            # Codex's client-side tool_search: the tools it found are
            # callable from now on (Codex does not add them to `tools`).
            found = responses_tool_names(item.get("tools"), offered)
            results.append({"call_id": item.get("call_id"),
                            "name": names.get(item.get("call_id")) or "tool_search",
                            "is_error": None,
                            "text": "\n".join(found), "tools": found})
        elif kind in RESPONSES_OUTPUTS:
            results.append({"call_id": item.get("call_id"),
                            "name": names.get(item.get("call_id")),
                            "is_error": None,  # this format has no error flag
                            "text": text_of(item.get("output"))})
    turns += 1 if in_model and had_call else 0
    # The new results are those after the last model item.
    last = max((i for i, it in enumerate(items) if responses_item_is_model(it)), default=-1)
    new_ids = {it.get("call_id") for it in items[last + 1:]
               if it.get("type") in RESPONSES_OUTPUTS}
    trailing = [r for r in results if r["call_id"] in new_ids]
    return offered, trailing, results, turns


def parse_chat(body):
    offered = {}
    for tool in body.get("tools") or []:
        # {"type": "function", "function": {"name"...}} or, for freeform
        # tools, {"type": "custom", "custom": {"name"...}}.
        kind = tool.get("type", "function")
        spec = tool.get(kind) or tool.get("function") or {}
        offered[spec.get("name") or kind] = kind
    messages = body.get("messages") or []
    names, results, turns = {}, [], 0
    for msg in messages:
        if msg.get("role") == "assistant" and msg.get("tool_calls"):
            turns += 1
            for call in msg["tool_calls"]:
                spec = call.get(call.get("type", "function")) or call.get("function") or {}
                names[call.get("id")] = spec.get("name")
        if msg.get("role") == "tool":
            results.append({"call_id": msg.get("tool_call_id"),
                            "name": names.get(msg.get("tool_call_id")) or msg.get("name"),
                            "is_error": None,
                            "text": text_of(msg.get("content"))})
    trailing = trailing_results(messages, results,
                                lambda m: m.get("role") == "assistant")
    return offered, trailing, results, turns


def parse_gemini(body):
    offered = {}
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            offered[decl.get("name")] = "function"
        for key in tool:
            if key not in ("functionDeclarations", "function_declarations"):
                offered[key] = key  # googleSearch, codeExecution, ...
    contents = body.get("contents") or []
    results, turns = [], 0
    for msg in contents:
        parts = msg.get("parts") or []
        if msg.get("role") == "model" and any("functionCall" in p for p in parts):
            turns += 1
        for p in parts:
            fr = p.get("functionResponse")
            if fr:
                resp = fr.get("response")
                results.append({"call_id": fr.get("id"), "name": fr.get("name"),
                                "is_error": isinstance(resp, dict) and "error" in resp,
                                "text": text_of(resp)})
    trailing = trailing_results(contents, results, lambda m: m.get("role") == "model")
    return offered, trailing, results, turns


def trailing_results(messages, results, is_model):
    """The tool results that come after the last model message."""
    last = max((i for i, m in enumerate(messages) if is_model(m)), default=-1)
    count = 0
    for m in messages[last + 1:]:
        content = m.get("content") if "content" in m else m.get("parts")
        if m.get("role") == "tool":
            count += 1
        elif isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict)
                         and (b.get("type") == "tool_result" or "functionResponse" in b))
    return results[len(results) - count:] if count else []


# ---------------------------------------------------------------------------
# HTTP handler
# ---------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "orch-model-server/1"

    # -- plumbing ----------------------------------------------------------

    def log_message(self, fmt, *args):  # keep stderr quiet unless --verbose
        if self.server.opts.verbose:
            sys.stderr.write("model_server: " + (fmt % args) + "\n")

    def read_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def send_json(self, obj, status=200, headers=None):
        self.flush_log()
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.flush_log()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, data, event=None):
        chunk = (f"event: {event}\n" if event else "") + "data: " + (
            data if isinstance(data, str) else json.dumps(data)) + "\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    # -- routing -----------------------------------------------------------

    def do_HEAD(self):  # not logged: a reachability probe at most
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        self.handle_request("GET", b"")

    def do_POST(self):
        self.handle_request("POST", self.read_body())

    def do_OPTIONS(self):
        self.handle_request("OPTIONS", b"")

    def handle_request(self, method, raw):
        url = urlsplit(self.path)
        path = url.path.rstrip("/")
        query = parse_qs(url.query)
        server = self.server
        with server.lock:
            server.count += 1
            seq = server.count
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        record = {"seq": seq, "time": round(time.time(), 3), "method": method,
                  "path": self.path, "api": "other"}
        # The record is written just before the answer's first byte (see
        # flush_log), so a client that has its answer also finds it logged.
        self.record, self.logged = record, False
        self.raw_body = body if body is not None else raw.decode("utf-8", "replace")
        try:
            self.route(method, path, query, body, record)
        except (BrokenPipeError, ConnectionResetError):
            self.log_problem(client_disconnected=True)
        except Exception as exc:  # answer, never crash the server thread
            answered = self.logged  # the answer had started: cannot send a 500
            self.log_problem(server_error=repr(exc))
            if not answered:
                try:
                    self.send_json({"error": {"type": "server_error",
                                              "message": repr(exc)}}, 500)
                except OSError:
                    pass
        self.flush_log()
        if server.opts.max_requests and seq >= server.opts.max_requests:
            server.stop_soon("max requests reached")

    def flush_log(self):
        if not self.logged:
            self.logged = True
            self.record["body"] = self.raw_body
            self.server.write_log(self.record)

    def log_problem(self, **fields):
        """Note a failure: in the record, or in a follow-up line if it is out."""
        if self.logged:
            self.server.write_log(dict({"seq": self.record["seq"]}, **fields))
        else:
            self.record.update(fields)

    def route(self, method, path, query, body, record):
        # Accept every route with or without its version prefix.
        bare = re.sub(r"^/(v1beta|v1alpha|v1)(?=/|$)", "", path)
        if method == "POST" and bare == "/messages/count_tokens":
            record["api"], record["side"] = "anthropic", True
            record["reply"] = {"count_tokens": True}
            return self.send_json({"input_tokens": approx_tokens(body)})
        if method == "POST" and bare == "/messages":
            return self.conversation("anthropic", body, record)
        if method == "POST" and bare == "/responses":
            return self.conversation("responses", body, record)
        if method == "POST" and bare == "/chat/completions":
            return self.conversation("chat", body, record)
        m = re.match(r"^/models/([^/:]+):(\w+)$", bare)
        if method == "POST" and m:
            record["model"] = m.group(1)
            action = m.group(2)
            if action == "countTokens":
                record["api"], record["side"] = "gemini", True
                record["reply"] = {"count_tokens": True}
                return self.send_json({"totalTokens": approx_tokens(body)})
            if action in ("generateContent", "streamGenerateContent"):
                body = dict(body or {})
                body["_stream"] = action == "streamGenerateContent"
                body["_sse"] = query.get("alt", [""])[0] == "sse"
                return self.conversation("gemini", body, record)
            if action in ("embedContent", "batchEmbedContents"):
                record["api"], record["side"] = "gemini", True
                n = len((body or {}).get("requests") or [1])
                return self.send_json({"embeddings": [{"values": [0.0] * 8}] * n}
                                      if action == "batchEmbedContents"
                                      else {"embedding": {"values": [0.0] * 8}})
        if method == "POST" and bare == "/fixture/log":
            # tests/e2e/mcp_fixture.py reports what it was asked here: it
            # runs inside the agent's confinement, where it may write no
            # file, but loopback is open.
            record["api"] = "fixture"
            record["fixture"] = body
            return self.send_json({})
        if method == "GET" and re.match(r"^/models(/[^/]+)?$", bare):
            record["api"] = "models"
            return self.send_json(model_listing(path, bare))
        # Anything else: log it and answer with an empty JSON object, which
        # is harmless for the start-up probes seen so far.
        record["api"] = "unknown"
        if method == "POST":
            return self.send_json({"error": {"type": "not_found",
                                             "message": f"no route {path}"}}, 404)
        return self.send_json({})

    # -- the conversation endpoints ----------------------------------------

    def conversation(self, api, body, record):
        body = body or {}
        parse = {"anthropic": parse_anthropic, "responses": parse_responses,
                 "chat": parse_chat, "gemini": parse_gemini}[api]
        offered, trailing, all_results, turn = parse(body)
        side = not offered
        model = record.get("model") or body.get("model") or MODEL_IDS[0]
        record.update({"api": api, "model": model,
                       "stream": bool(body.get("stream") or body.get("_stream")),
                       "tools": sorted(offered),
                       "tool_kinds": {k: v for k, v in offered.items() if v != "function"},
                       "side": side, "turn": None if side else turn,
                       "has_tool_result": bool(trailing),
                       "tool_results": trailing,
                       "all_tool_results": len(all_results),
                       "found_tools": sorted({t for r in all_results
                                              for t in r.get("tools") or []})})
        limited = None if side else self.server.script.rate_limit(turn)
        if limited:
            limit, n = limited
            status, headers, error = limit.response(api, model)
            if api == "gemini" and body.get("_stream") and not body.get("_sse"):
                error = [error]  # streamGenerateContent without alt=sse: an array
            record["status"] = status
            record["reply"] = {"rate_limit": {"variant": limit.variant,
                                              "seconds": limit.seconds,
                                              "n": n, "times": limit.times}}
            return self.send_json(error, status, headers)
        if side:
            reply = ("text", side_text(api, body, self.server.opts.side_text))
        else:
            reply = self.server.script.answer(turn, offered)
        record["reply"] = ({"text": reply[1]} if reply[0] == "text" else
                           {"tool_calls": [{"name": c["name"], "kind": c["kind"],
                                            "arguments": c["arguments"]} for c in reply[1]]})
        getattr(self, "reply_" + api)(body, model, reply)

    def reply_anthropic(self, body, model, reply):
        blocks = []
        if reply[0] == "text":
            blocks.append({"type": "text", "text": reply[1]})
        else:
            for c in reply[1]:
                blocks.append({"type": "tool_use", "id": new_id("toolu"), "name": c["name"],
                               "input": c["arguments"] if isinstance(c["arguments"], dict)
                               else {"input": c["arguments"]}})
        stop = "tool_use" if reply[0] == "tools" else "end_turn"
        usage = {"input_tokens": approx_tokens(body), "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message = {"id": new_id("msg"), "type": "message", "role": "assistant",
                   "model": model, "content": blocks, "stop_reason": stop,
                   "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return self.send_json(message)
        self.start_sse()
        start = dict(message, content=[], stop_reason=None)
        self.sse({"type": "message_start", "message": start}, "message_start")
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                self.sse({"type": "content_block_start", "index": i,
                          "content_block": {"type": "text", "text": ""}}, "content_block_start")
                self.sse({"type": "content_block_delta", "index": i,
                          "delta": {"type": "text_delta", "text": b["text"]}},
                         "content_block_delta")
            else:
                self.sse({"type": "content_block_start", "index": i,
                          "content_block": dict(b, input={})}, "content_block_start")
                self.sse({"type": "content_block_delta", "index": i,
                          "delta": {"type": "input_json_delta",
                                    "partial_json": json.dumps(b["input"])}},
                         "content_block_delta")
            self.sse({"type": "content_block_stop", "index": i}, "content_block_stop")
        self.sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                  "usage": {"output_tokens": 5}}, "message_delta")
        self.sse({"type": "message_stop"}, "message_stop")

    def reply_responses(self, body, model, reply):
        items = []
        if reply[0] == "text":
            items.append({"type": "message", "id": new_id("msg"), "status": "completed",
                          "role": "assistant",
                          "content": [{"type": "output_text", "text": reply[1],
                                       "annotations": []}]})
        else:
            for c in reply[1]:
                if c["kind"] == "tool_search":  # Codex: client-executed search
                    items.append({"type": "tool_search_call", "id": new_id("tsc"),
                                  "status": "completed", "call_id": new_id("call"),
                                  "execution": "client", "arguments": c["arguments"]})
                elif c["kind"] == "custom":
                    items.append({"type": "custom_tool_call", "id": new_id("ctc"),
                                  "status": "completed", "call_id": new_id("call"),
                                  "name": c["name"], "input": custom_input(c["arguments"])})
                else:
                    item = {"type": "function_call", "id": new_id("fc"),
                            "status": "completed", "call_id": new_id("call"),
                            "name": c["name"], "arguments": args_json(c["arguments"])}
                    if "." in c["name"]:  # a tool inside a namespace
                        item["namespace"], item["name"] = c["name"].rsplit(".", 1)
                    items.append(item)
        n_in = approx_tokens(body)
        response = {"id": new_id("resp"), "object": "response", "created_at": int(time.time()),
                    "status": "completed", "model": model, "output": items,
                    "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                    "usage": {"input_tokens": n_in, "output_tokens": 5,
                              "total_tokens": n_in + 5,
                              "input_tokens_details": {"cached_tokens": 0},
                              "output_tokens_details": {"reasoning_tokens": 0}}}
        if not body.get("stream"):
            return self.send_json(response)
        self.start_sse()
        seq = iter(range(10_000))

        def ev(kind, **fields):
            self.sse(dict({"type": kind, "sequence_number": next(seq)}, **fields), kind)

        pending = dict(response, status="in_progress", output=[], usage=None)
        ev("response.created", response=pending)
        ev("response.in_progress", response=pending)
        for i, item in enumerate(items):
            if item["type"] == "message":
                text = item["content"][0]["text"]
                ev("response.output_item.added", output_index=i,
                   item=dict(item, status="in_progress", content=[]))
                part = {"type": "output_text", "text": "", "annotations": []}
                ev("response.content_part.added", item_id=item["id"], output_index=i,
                   content_index=0, part=part)
                ev("response.output_text.delta", item_id=item["id"], output_index=i,
                   content_index=0, delta=text)
                ev("response.output_text.done", item_id=item["id"], output_index=i,
                   content_index=0, text=text)
                ev("response.content_part.done", item_id=item["id"], output_index=i,
                   content_index=0, part=dict(part, text=text))
            elif item["type"] == "function_call":
                ev("response.output_item.added", output_index=i,
                   item=dict(item, status="in_progress", arguments=""))
                ev("response.function_call_arguments.delta", item_id=item["id"],
                   output_index=i, delta=item["arguments"])
                ev("response.function_call_arguments.done", item_id=item["id"],
                   output_index=i, arguments=item["arguments"])
            elif item["type"] == "tool_search_call":
                ev("response.output_item.added", output_index=i,
                   item=dict(item, status="in_progress"))
            else:  # custom_tool_call
                ev("response.output_item.added", output_index=i,
                   item=dict(item, status="in_progress", input=""))
                ev("response.custom_tool_call_input.delta", item_id=item["id"],
                   output_index=i, delta=item["input"])
                ev("response.custom_tool_call_input.done", item_id=item["id"],
                   output_index=i, input=item["input"])
            ev("response.output_item.done", output_index=i, item=item)
        ev("response.completed", response=response)

    def reply_chat(self, body, model, reply):
        cid, created = new_id("chatcmpl"), int(time.time())
        n_in = approx_tokens(body)
        usage = {"prompt_tokens": n_in, "completion_tokens": 5, "total_tokens": n_in + 5}
        if reply[0] == "text":
            message = {"role": "assistant", "content": reply[1]}
            finish = "stop"
        else:
            calls = [{"id": new_id("call"), "type": "custom",
                      "custom": {"name": c["name"], "input": custom_input(c["arguments"])}}
                     if c["kind"] == "custom" else
                     {"id": new_id("call"), "type": "function",
                      "function": {"name": c["name"], "arguments": args_json(c["arguments"])}}
                     for c in reply[1]]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            finish = "tool_calls"
        base = {"id": cid, "created": created, "model": model}
        if not body.get("stream"):
            return self.send_json(dict(base, object="chat.completion", usage=usage,
                                       choices=[{"index": 0, "message": message,
                                                 "finish_reason": finish}]))
        self.start_sse()

        def chunk(delta, finish_reason=None):
            self.sse(dict(base, object="chat.completion.chunk",
                          choices=[{"index": 0, "delta": delta,
                                    "finish_reason": finish_reason}]))

        chunk({"role": "assistant", "content": ""})
        if reply[0] == "text":
            chunk({"content": reply[1]})
        else:
            for i, call in enumerate(message["tool_calls"]):
                if call["type"] == "custom":  # one delta with the whole input
                    chunk({"tool_calls": [dict(call, index=i)]})
                    continue
                chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                       "function": {"name": call["function"]["name"],
                                                    "arguments": ""}}]})
                chunk({"tool_calls": [{"index": i, "function": {
                    "arguments": call["function"]["arguments"]}}]})
        chunk({}, finish)
        if (body.get("stream_options") or {}).get("include_usage"):
            self.sse(dict(base, object="chat.completion.chunk", choices=[], usage=usage))
        self.sse("[DONE]")

    def reply_gemini(self, body, model, reply):
        if reply[0] == "text":
            parts = [{"text": reply[1]}]
        else:
            parts = [{"functionCall": {"name": c["name"], "args": c["arguments"]
                                       if isinstance(c["arguments"], dict)
                                       else {"input": c["arguments"]}}}
                     for c in reply[1]]
        n_in = approx_tokens(body)
        response = {"candidates": [{"content": {"role": "model", "parts": parts},
                                    "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": n_in, "candidatesTokenCount": 5,
                                      "totalTokenCount": n_in + 5},
                    "modelVersion": model, "responseId": new_id("resp")}
        if not body.get("_stream"):
            return self.send_json(response)
        if not body.get("_sse"):  # streaming without alt=sse is one JSON array
            return self.send_json([response])
        self.start_sse()
        self.sse(response)


def side_text(api, body, default):
    """The answer to a side call: JSON from the schema if one is asked for."""
    if api == "gemini":
        cfg = body.get("generationConfig") or {}
        schema = cfg.get("responseJsonSchema") or cfg.get("responseSchema")
        if schema:
            return json.dumps(schema_example(schema))
        if cfg.get("responseMimeType") == "application/json":
            return "{}"
    if api == "anthropic":  # Claude Code's title call asks for {"title": ...}
        fmt = ((body.get("output_config") or {}).get("format") or {})
        if fmt.get("type") == "json_schema":
            return json.dumps(schema_example(fmt.get("schema")))
    if api == "responses":
        fmt = ((body.get("text") or {}).get("format") or {})
        if fmt.get("type") == "json_schema":
            return json.dumps(schema_example(fmt.get("schema")))
    if api == "chat":
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return json.dumps(schema_example((fmt.get("json_schema") or {}).get("schema")))
    return default


def approx_tokens(body):
    return max(1, len(json.dumps(body or {})) // 4)


def model_listing(path, bare):
    """One listing that satisfies the OpenAI, Anthropic and Gemini clients."""
    if path.startswith("/v1beta") or path.startswith("/v1alpha"):
        models = [{"name": f"models/{m}", "displayName": m,
                   "supportedGenerationMethods": ["generateContent", "countTokens"]}
                  for m in MODEL_IDS]
        return models[0] if bare != "/models" else {"models": models}
    data = [{"id": m, "object": "model", "type": "model", "created": 0,
             "created_at": "2025-01-01T00:00:00Z", "owned_by": "local", "display_name": m}
            for m in MODEL_IDS]
    if bare != "/models":
        return data[0]
    return {"object": "list", "data": data, "has_more": False,
            "first_id": MODEL_IDS[0], "last_id": MODEL_IDS[-1]}


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, opts, script):
        super().__init__(("127.0.0.1", opts.port), Handler)
        self.opts, self.script = opts, script
        self.lock = threading.Lock()
        self.count = 0
        self.log_file = open(opts.log, "a", encoding="utf-8") if opts.log else None

    def write_log(self, record):
        if self.opts.no_body:
            record.pop("body", None)
        line = json.dumps(record, ensure_ascii=False)
        with self.lock:
            if self.log_file:
                self.log_file.write(line + "\n")
                self.log_file.flush()

    def stop_soon(self, why):
        if self.opts.verbose:
            sys.stderr.write(f"model_server: stopping: {why}\n")
        threading.Thread(target=self.shutdown, daemon=True).start()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = any free)")
    ap.add_argument("--script", help="JSON file with the scripted turns")
    ap.add_argument("--log", help="append one JSON line per request to this file")
    ap.add_argument("--final-text", default="done", help="answer once the script is used up")
    ap.add_argument("--side-text", default="ok", help="answer to side calls (no tools offered)")
    ap.add_argument("--no-body", action="store_true", help="leave raw bodies out of the log")
    ap.add_argument("--max-seconds", type=float, default=600,
                    help="stop by itself after this long (0 = never)")
    ap.add_argument("--max-requests", type=int, default=1000,
                    help="stop by itself after this many requests (0 = never)")
    ap.add_argument("--verbose", action="store_true", help="log each request to stderr")
    opts = ap.parse_args(argv)

    script = Script.load(opts.script, opts.final_text)
    server = Server(opts, script)
    print(f"PORT={server.server_address[1]}", flush=True)

    def on_signal(signum, frame):
        server.stop_soon(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if opts.max_seconds:
        timer = threading.Timer(opts.max_seconds, server.stop_soon, ["max seconds reached"])
        timer.daemon = True
        timer.start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
        if server.log_file:
            server.log_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
