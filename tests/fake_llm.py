"""Fake LLM servers on loopback that speak the real HTTP protocols, so the real clients
(google-genai, openai) are what the tests drive.

One `ThreadingHTTPServer` answers both protocols:
- Gemini: `POST /{v1beta|v1}/models/{model}:generateContent`, key in `x-goog-api-key`;
- OpenAI-compatible: `POST /v1/chat/completions` (and `/chat/completions`), `Authorization: Bearer`.

A test scripts the replies with `fake.queue(Reply...)` (consumed in order, one per request,
whichever protocol asks) and otherwise gets `fake.default`; every request is recorded in
`fake.requests` so a test can assert what the client sent.

Fault injection: `fake.inject("server_error", rate=0.2)` makes about a fifth of the requests that
are not scripted fail that way (see FAULTS). Which requests fail is decided by a hash of the seed,
the request's body and how many times that same body came before, so a run fails the same
requests whatever order concurrent clients send them in, and a retry of a request draws anew.
Each recorded request says which fault, if any, it got (`Recorded.fault`). Two faults change
the answer the fake would give instead of replacing it: "rule_breaking" (valid JSON that breaks
the method's rules, see break_rules) and "ignores_ids" (ids the prompt never gave, ignore_ids).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests import fake_batch
from tests.fake_batch import BatchStore

GEMINI_KEY = "fake-gemini-key"
OPENAI_KEY = "fake-openai-key"
GEMINI_MODEL_VERSION = "gemini-fake-001"
OPENAI_MODEL_VERSION = "qwen-fake-vl-instruct"

_GEMINI_PATH = re.compile(r"^/(v1beta|v1)/models/([^/:]+):generateContent$")
_OPENAI_PATHS = {"/v1/chat/completions", "/chat/completions"}
_RPC = "type.googleapis.com/google.rpc."

# The ways `FakeLLM.inject` can make a request fail.
FAULTS = (
    "rate_limited",  # 429 with a RetryInfo delay (OpenAI: Retry-After)
    "server_error",  # 500 or 503
    "timeout",  # the answer comes after the injected delay, past a short client timeout
    "malformed_json",  # 200 whose model text is cut-off JSON
    "schema_invalid",  # 200 whose model text is JSON without the schema's fields
    "connection_reset",  # the request is read, then the connection is reset (TCP RST)
    # 200 with the answer the fake would give, still schema-valid JSON but breaking the task's
    # own rules (break_rules): an item id repeated, a citation of a snippet id never defined.
    "rule_breaking",
    # 200 with that answer's ids swapped for ids the prompt never gave (ignore_ids): integer
    # ids (the guard's candidates) shifted, snippet verdicts renamed.
    "ignores_ids",
    # A rebuild after a human round that loses one of its changes without a word
    # (drop_human_change): the change's answer left out and what carried it undone.
    "drops_human_change",
    # A rebuild that says it carried a human edit but compiles the check to its old text again
    # (revert_human_edit): the edited item put back as the input had it.
    "reverts_human_edit",
)
MALFORMED_JSON = '{"answer": "cut off'
SCHEMA_INVALID = '{"unexpected": true}'


@dataclass
class Reply:
    """What the fake answers to one request. `text` is the model's output text (any string: it
    need not be valid JSON); `status` other than 200 answers an error with `error_body`."""

    text: str = "{}"
    status: int = 200
    error_body: dict[str, Any] | None = None
    delay: float = 0.0  # seconds before answering (to test timeouts and throughput)
    prompt_tokens: int = 120
    output_tokens: int = 30
    thoughts_tokens: int = 0
    cached_tokens: int = 0
    grounding: dict[str, Any] | None = None  # Gemini groundingMetadata, as sent
    url_context: dict[str, Any] | None = None  # Gemini urlContextMetadata, as sent
    retry_after: str | None = None  # OpenAI-compatible 429: the Retry-After header
    reset: bool = False  # read the request, then reset the connection instead of answering

    @classmethod
    def rate_limited(cls, retry_delay: str = "0.2s", per: str = "PerMinute") -> Reply:
        """A Gemini-style 429 with QuotaFailure and RetryInfo (OpenAI also gets Retry-After)."""
        quota_id = f"GenerateRequestsPer{per.removeprefix('Per')}PerProjectPerModel-FreeTier"
        body = {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": _RPC + "QuotaFailure",
                        "violations": [
                            {
                                "quotaMetric": "generativelanguage.googleapis.com/"
                                "generate_content_free_tier_requests",
                                "quotaId": quota_id,
                            }
                        ],
                    },
                    {"@type": _RPC + "RetryInfo", "retryDelay": retry_delay},
                ],
            }
        }
        return cls(status=429, error_body=body, retry_after=retry_delay.removesuffix("s"))

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        body = {
            "error": {
                "code": status,
                "message": "Internal error encountered.",
                "status": "INTERNAL",
            }
        }
        return cls(status=status, error_body=body)

    @classmethod
    def connection_reset(cls) -> Reply:
        return cls(reset=True)


def break_rules(text: str) -> str:
    """A schema-valid answer made to break the method's rules, or `text` as it is when it is
    not JSON: the first item of every "items" list of objects comes twice (a duplicate id),
    and every "snippets" list of ids also cites "s999", which no prompt defines."""
    try:
        data = json.loads(text)
    except ValueError:
        return text

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {key: walk(value) for key, value in node.items()}
            items = out.get("items")
            if isinstance(items, list) and items and isinstance(items[0], dict):
                out["items"] = [items[0], *items]
            snippets = out.get("snippets")
            if isinstance(snippets, list) and all(isinstance(x, str) for x in snippets):
                out["snippets"] = [*snippets, "s999"]
            return out
        if isinstance(node, list):
            return [walk(value) for value in node]
        return node

    return json.dumps(walk(data))


def ignore_ids(text: str) -> str:
    """An answer whose ids are not the prompt's, or `text` as it is when it is not JSON:
    every integer "id" and "selected" plus 1000, every string "id" prefixed with "x"."""
    try:
        data = json.loads(text)
    except ValueError:
        return text

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for key, value in node.items():
                if (
                    key in ("id", "selected")
                    and isinstance(value, int)
                    and not isinstance(value, bool)
                ):
                    out[key] = value + 1000
                elif key == "id" and isinstance(value, str):
                    out[key] = "x" + value
                else:
                    out[key] = walk(value)
            return out
        if isinstance(node, list):
            return [walk(value) for value in node]
        return node

    return json.dumps(walk(data))


def prompt_of(body: dict[str, Any]) -> str:
    """A request's system text and first user turn (the repair turns after it left out), for
    either protocol."""
    if "messages" in body:  # OpenAI-compatible
        texts = []
        for message in body["messages"][:2]:
            content = message.get("content")
            if isinstance(content, str):
                texts.append(content)
            else:
                texts += [p.get("text", "") for p in content or [] if p.get("type") == "text"]
        return "\n".join(t for t in texts if t)
    system = " ".join(
        part.get("text", "") for part in (body.get("systemInstruction") or {}).get("parts", [])
    )
    contents = body.get("contents") or [{}]
    parts = [part.get("text", "") for part in contents[0].get("parts", []) if "text" in part]
    return "\n".join(text for text in (system, *parts) if text)


def _rebuild_parts(
    text: str, recorded: Recorded
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[dict[str, Any]]] | None:
    """A rebuild's answer after a human round, the input items of its prompt by id and the
    human changes its prompt lists; None for any other answer."""
    from llm import demo_provider

    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not data.get("human_changes"):
        return None
    prompt = prompt_of(recorded.body)
    inputs = {item["id"]: item for item in demo_provider._input_items(prompt)}
    return data, inputs, demo_provider._human_changes(prompt)


def _undo(data: dict[str, Any], inputs: dict[str, dict[str, Any]], item_id: str) -> None:
    """Put the input's item of this id back in the answer as it was (a new one: taken out)."""
    items = [i for i in data.get("items", []) if i.get("id") != item_id]
    if item_id in inputs:
        items.append(inputs[item_id])
    data["items"] = items


def drop_human_change(text: str, recorded: Recorded) -> str:
    """A rebuild's answer that loses its first human change silently: its answer left out,
    and the item that carried it undone (an input item as it was, a new one gone); any other
    answer as it is."""
    parts = _rebuild_parts(text, recorded)
    if parts is None:
        return text
    data, inputs, changes = parts
    lost = data["human_changes"].pop(0)
    change = next((c for c in changes if c["id"] == lost["id"]), {})
    for item_id in {lost.get("item", ""), change.get("meta_item", "")} - {""}:
        _undo(data, inputs, item_id)
    return json.dumps(data, ensure_ascii=False)


def revert_human_edit(text: str, recorded: Recorded) -> str:
    """A rebuild's answer that still says it carried the first human edit, with the item the
    edited check came from put back as the input had it (so the check compiles to its text
    before the edit again); any other answer as it is."""
    parts = _rebuild_parts(text, recorded)
    if parts is None:
        return text
    data, inputs, changes = parts
    carried = {a["id"] for a in data["human_changes"] if a.get("outcome") == "carried"}
    edit = next((c for c in changes if c["change"] == "edit" and c["id"] in carried), None)
    if edit is not None and edit.get("meta_item") in inputs:
        items = [i for i in data.get("items", []) if i.get("id") != edit["meta_item"]]
        data["items"] = [inputs[edit["meta_item"]], *items]
    return json.dumps(data, ensure_ascii=False)


# The faults that change a real answer rather than replace it, and how.
_MUTATIONS: dict[str, Callable[[str, Recorded], str]] = {
    "rule_breaking": lambda text, _: break_rules(text),
    "ignores_ids": lambda text, _: ignore_ids(text),
    "drops_human_change": lambda text, recorded: drop_human_change(text, recorded),
    "reverts_human_edit": lambda text, recorded: revert_human_edit(text, recorded),
}
MUTATING = tuple(_MUTATIONS)


def _grounding_from(text: str, found: dict[str, Any]) -> dict[str, Any]:
    """The demo provider's (uri, title) chunks and supported texts as Gemini's
    groundingMetadata, segment offsets in bytes of `text`."""
    data = text.encode()
    supports = []
    for said, indices in found["supports"]:
        start = data.find(said.encode())
        supports.append(
            {
                "segment": {
                    "startIndex": start,
                    "endIndex": start + len(said.encode()),
                    "text": said,
                },
                "groundingChunkIndices": indices,
            }
        )
    return {
        "groundingChunks": [
            {"web": {"uri": uri, "title": title}} for uri, title in found["chunks"]
        ],
        "groundingSupports": supports,
    }


def demo_reply(recorded: Recorded) -> Reply:
    """The answer the demo provider (llm/demo_provider.py: answers that keep the method's rules)
    would give to this request, sent as the real server would: a search with grounding
    metadata, an audit with URL context metadata, a structured answer by the schema's title."""
    from llm import demo_provider

    body = recorded.body
    prompt = prompt_of(body)
    tools = json.dumps(body.get("tools", []))
    if "googleSearch" in tools or "urlContext" in tools:
        names = ("url_context",) if "urlContext" in tools else ("google_search",)
        text, found = demo_provider.grounded_answer(prompt, names)
        if "urlContext" in tools:
            urls = [
                {"retrievedUrl": url, "urlRetrievalStatus": status}
                for url, status in found["url_statuses"]
            ]
            return Reply(text=text, url_context={"urlMetadata": urls})
        return Reply(text=text, grounding=_grounding_from(text, found))
    schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
    if not schema and "response_format" in body:
        schema = body["response_format"]["json_schema"]["schema"]
    if not schema:
        return Reply(text=demo_provider.free_text_answer(prompt))
    build = demo_provider.ANSWERS.get(schema.get("title", ""))
    answer = build(None, prompt) if build else demo_provider.from_json_schema(schema, prompt)  # type: ignore[arg-type]
    return Reply(text=json.dumps(answer, ensure_ascii=False))


def schema_answer(schema: dict[str, Any], values: dict[str, Any] | None = None) -> Any:
    """An answer made from a JSON response schema alone, never from the prompt: what a model
    that follows the schema but does not read ids out of prose would send.

    Every property is given; a list has its minimum length (none when it may be empty); an
    enum gives its first value, except in a list of fixed length n (minItems = maxItems = n)
    whose elements have an enum of n values as their first such field: element i takes its
    i-th value (the ids it must hold once each); a union its first branch that is not null;
    a string a word that fits an id pattern (`<name>-<k>`, distinct within the answer); an
    integer its minimum (or 1); a boolean true. `values` sets fields by name wherever they
    are: what a model decides on content, which no schema says (never an id)."""
    defs = schema.get("$defs", {})
    fixed = values or {}
    made = Counter[str]()

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node

    def build(node: dict[str, Any], name: str, index: int | None) -> Any:
        node = resolve(node)
        if name in fixed:
            return fixed[name]
        if "const" in node:
            return node["const"]
        if "enum" in node:
            return node["enum"][index % len(node["enum"])] if index is not None else node["enum"][0]
        for union in ("anyOf", "oneOf"):
            if union in node:
                options = [o for o in node[union] if resolve(o).get("type") != "null"]
                return build((options or node[union])[0], name, index)
        kind = node.get("type")
        if kind == "object":
            answer, spent = {}, index is None
            for key, sub in node.get("properties", {}).items():
                takes = not spent and len(resolve(sub).get("enum", ())) == index_of_length[-1]
                answer[key] = build(sub, key, index if takes else None)
                spent = spent or takes
            return answer
        if kind == "array":
            count = int(node.get("minItems", 0))
            exact = count and node.get("maxItems") == count
            index_of_length.append(count if exact else -1)
            try:
                return [
                    build(node.get("items", {}), name, k if exact else None) for k in range(count)
                ]
            finally:
                index_of_length.pop()
        if kind == "integer":
            return int(node.get("minimum", 1))
        if kind == "number":
            return float(node.get("minimum", 1))
        if kind == "boolean":
            return True
        made[name] += 1
        return re.sub(r"[^A-Za-z0-9_-]+", "-", f"{name}-{made[name]}")

    index_of_length: list[int] = [-1]
    return build(schema, "answer", None)


def schema_only_reply(values: dict[str, Any] | None = None) -> Callable[[Recorded], Reply]:
    """A responder that answers from the request's response schema alone (schema_answer); a
    search with one generic grounded sentence, an audit with no URL read, free text with a
    generic answer: no id, name or text is read out of the prompt."""

    def reply(recorded: Recorded) -> Reply:
        body = recorded.body
        tools = json.dumps(body.get("tools", []))
        if "googleSearch" in tools:
            said = "A source says something about it."
            return Reply(
                text=said,
                grounding=grounding_metadata([("A source", "source.example")], [(said, [0])]),
            )
        if "urlContext" in tools:
            return Reply(text="The sources say what they say.", url_context={"urlMetadata": []})
        schema = (body.get("generationConfig") or {}).get("responseJsonSchema")
        if not schema and "response_format" in body:
            schema = body["response_format"]["json_schema"]["schema"]
        if not schema:
            return Reply(text="An answer that says a little about it.")
        return Reply(text=json.dumps(schema_answer(schema, values)))

    return reply


def grounding_metadata(
    sources: list[tuple[str, str]],
    supports: list[tuple[str, list[int]]],
    queries: list[str] | None = None,
) -> dict[str, Any]:
    """groundingMetadata as Gemini sends it: redirect links for chunks, the supported text in
    the supports' segments, segment offsets in bytes of the answer text."""
    chunks = [
        {
            "web": {
                "uri": f"https://vertexaisearch.cloud.google.com/grounding-api-redirect/{i}",
                "title": title,
                "domain": domain,
            }
        }
        for i, (title, domain) in enumerate(sources)
    ]
    offset = 0
    segments = []
    for text, indices in supports:
        size = len(text.encode())
        segments.append(
            {
                "segment": {"startIndex": offset, "endIndex": offset + size, "text": text},
                "groundingChunkIndices": indices,
                "confidenceScores": [0.9] * len(indices),
            }
        )
        offset += size + 1
    return {
        "webSearchQueries": queries or [],
        "groundingChunks": chunks,
        "groundingSupports": segments,
    }


@dataclass
class Recorded:
    protocol: str  # "gemini" | "openai"
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    fault: str = ""  # the injected fault this request got (FAULTS), "" if none


@dataclass
class FakeLLM:
    """The control object of a running fake server."""

    base_url: str
    default: Reply = field(default_factory=Reply)
    requests: list[Recorded] = field(default_factory=list)
    # Answers by content when nothing is queued (before `default`): e.g. a judge verdict that
    # depends on the check in the prompt. Returns None to fall through to `default`.
    responder: Callable[[Recorded], Reply | None] | None = None
    # Injected faults: mode -> share of the requests (see inject), and how many were sent.
    faults: dict[str, float] = field(default_factory=dict)
    injected: Counter[str] = field(default_factory=Counter)
    fault_seed: int = 0
    fault_delay: float = 1.0  # how late a "timeout" fault answers
    retry_delay: str = "0.05s"  # the retry delay a "rate_limited" fault asks for
    # Gemini's Batch API (tests/fake_batch.py): its inner requests are answered like calls.
    batches: BatchStore = field(default_factory=BatchStore)
    # Requests being answered now, and the most there were at once since the last reset.
    in_flight: int = 0
    most_in_flight: int = 0
    _seen: Counter[str] = field(default_factory=Counter)
    _script: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.default = Reply()
            self.responder = None
            self.faults.clear()
            self.injected.clear()
            self._seen.clear()
            self.batches = BatchStore()
            self.most_in_flight = self.in_flight

    def _arrived(self, change: int) -> None:
        with self._lock:
            self.in_flight += change
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def inject(
        self,
        mode: str,
        rate: float = 0.2,
        *,
        seed: int = 0,
        delay: float = 1.0,
        retry_delay: str = "0.05s",
    ) -> None:
        """Fail about `rate` of the unscripted requests in `mode` (one of FAULTS), on top of the
        faults injected before (their rates add up, in the order injected). `delay` is how late a
        timeout's answer comes; `retry_delay` what a 429 asks the client to wait."""
        if mode not in FAULTS:
            raise ValueError(f"unknown fault {mode!r}: expected one of {FAULTS}")
        if not 0 <= rate <= 1 or sum(self.faults.values()) - self.faults.get(mode, 0) + rate > 1:
            raise ValueError("fault rates must add up to at most 1")
        with self._lock:
            self.faults[mode] = rate
            self.fault_seed, self.fault_delay, self.retry_delay = seed, delay, retry_delay

    def _next(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
            fault = self._draw(recorded) if self.faults else ""
            if fault:
                recorded.fault = fault
                self.injected[fault] += 1
                if fault not in _MUTATIONS:
                    return self._fault_reply(fault)
            responder = self.responder
        answer = responder(recorded) if responder is not None else None
        answer = answer if answer is not None else self.default
        if fault in _MUTATIONS:
            answer = dataclasses.replace(answer, text=_MUTATIONS[fault](answer.text, recorded))
        return answer

    def _draw(self, recorded: Recorded) -> str:
        """The fault for this request, or "": a uniform draw from the hash of the seed, the body
        and the body's occurrence count, against the modes' cumulative rates."""
        body = json.dumps(recorded.body, sort_keys=True, separators=(",", ":"))
        digest = hashlib.sha256(f"{recorded.path}\n{body}".encode()).hexdigest()
        self._seen[digest] += 1
        blob = f"{self.fault_seed}\n{digest}\n{self._seen[digest]}".encode()
        draw = int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") / 2**64
        bound = 0.0
        for mode, rate in self.faults.items():
            bound += rate
            if draw < bound:
                return mode
        return ""

    def _fault_reply(self, fault: str) -> Reply:
        if fault == "rate_limited":
            return Reply.rate_limited(retry_delay=self.retry_delay)
        if fault == "server_error":
            return Reply.server_error(503 if self.injected[fault] % 2 else 500)
        if fault == "connection_reset":
            return Reply.connection_reset()
        text = {
            "timeout": self.default.text,
            "malformed_json": MALFORMED_JSON,
            "schema_invalid": SCHEMA_INVALID,
        }[fault]
        return Reply(
            text=text,
            delay=self.fault_delay if fault == "timeout" else 0.0,
            prompt_tokens=self.default.prompt_tokens,
            output_tokens=self.default.output_tokens,
        )


def _gemini_body(reply: Reply) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": reply.text}]},
        "finishReason": "STOP",
        "index": 0,
    }
    if reply.grounding is not None:
        candidate["groundingMetadata"] = reply.grounding
    if reply.url_context is not None:
        candidate["urlContextMetadata"] = reply.url_context
    usage = {
        "promptTokenCount": reply.prompt_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "totalTokenCount": reply.prompt_tokens + reply.output_tokens + reply.thoughts_tokens,
    }
    if reply.thoughts_tokens:
        usage["thoughtsTokenCount"] = reply.thoughts_tokens
    if reply.cached_tokens:
        usage["cachedContentTokenCount"] = reply.cached_tokens
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": GEMINI_MODEL_VERSION,
        "responseId": f"fake-{time.monotonic_ns()}",
    }


def _openai_body(reply: Reply, model: str) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.prompt_tokens + reply.output_tokens,
    }
    if reply.cached_tokens:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    return {
        "id": f"chatcmpl-fake-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": OPENAI_MODEL_VERSION,  # what vLLM reports: the served model
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": reply.text},
            }
        ],
        "usage": usage,
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real servers do
    # The headers and the body go out in two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers (40 ms on Linux), which real servers do not add.
    disable_nagle_algorithm = True
    fake: FakeLLM  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base's name)
        pass  # quiet tests

    def do_POST(self) -> None:  # noqa: N802 (the base class's name)
        self.fake._arrived(1)
        try:
            self._post()
        finally:
            self.fake._arrived(-1)

    def _post(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"code": 400, "message": "body is not JSON"}})
            return
        headers = {key.lower(): value for key, value in self.headers.items()}
        path = self.path.split("?", 1)[0]
        if _GEMINI_PATH.match(path):
            self._gemini(path, headers, body)
        elif batch := fake_batch.CREATE_PATH.match(path):
            if self._gemini_key(headers):
                self._send(*self.fake.batches.create(batch.group(2), body))
        elif batch := fake_batch.CANCEL_PATH.match(path):
            if self._gemini_key(headers):
                self._send(*self.fake.batches.cancel(batch.group(2)))
        elif path in _OPENAI_PATHS:
            self._openai(path, headers, body)
        else:
            self._send(404, {"error": {"code": 404, "message": f"no route {path}"}})

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        headers = {key.lower(): value for key, value in self.headers.items()}
        path = self.path.split("?", 1)[0]
        batch = fake_batch.GET_PATH.match(path)
        if batch is None:
            self._send(404, {"error": {"code": 404, "message": f"no route {path}"}})
        elif self._gemini_key(headers):
            self._send(*self.fake.batches.get(batch.group(2), self._batch_answer))

    def _batch_answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """One inner request of a batch, answered like a call: `{response}` or `{error}`."""
        reply = self.fake._next(Recorded("gemini-batch", self.path, {}, request))
        if reply.status != 200 or reply.reset:
            error = (reply.error_body or {}).get("error") or {}
            return {
                "error": {
                    "code": reply.status if not reply.reset else 500,
                    "message": error.get("message", "request failed"),
                }
            }
        return {"response": _gemini_body(reply)}

    def _gemini_key(self, headers: dict[str, str]) -> bool:
        if headers.get("x-goog-api-key") == GEMINI_KEY:
            return True
        self._send(
            403,
            {
                "error": {
                    "code": 403,
                    "message": "API key not valid.",
                    "status": "PERMISSION_DENIED",
                }
            },
        )
        return False

    def _gemini(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        if not self._gemini_key(headers):
            return
        reply = self.fake._next(Recorded("gemini", path, headers, body))
        time.sleep(reply.delay)
        if reply.reset:
            self._reset()
        elif reply.status != 200:
            self._send(reply.status, reply.error_body or {})
        else:
            self._send(200, _gemini_body(reply))

    def _openai(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        if headers.get("authorization") != f"Bearer {OPENAI_KEY}":
            self._send(
                401,
                {
                    "error": {
                        "message": "Incorrect API key provided.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                },
            )
            return
        reply = self.fake._next(Recorded("openai", path, headers, body))
        time.sleep(reply.delay)
        if reply.reset:
            self._reset()
            return
        if reply.status == 200:
            self._send(200, _openai_body(reply, body.get("model", "")))
            return
        extra = {"Retry-After": reply.retry_after} if reply.retry_after else {}
        error = (reply.error_body or {}).get("error", {})
        code: Any = error.get("code")
        if reply.status == 429:
            # OpenAI's codes: a spent quota is "insufficient_quota", a busy minute is not.
            per_day = "PerDay" in json.dumps(reply.error_body)
            code = "insufficient_quota" if per_day else "rate_limit_exceeded"
            extra = {} if per_day else extra
        self._send(
            reply.status,
            {
                "error": {
                    "message": error.get("message", "error"),
                    "type": error.get("status", "server_error"),
                    "code": code,
                }
            },
            extra,
        )

    def _reset(self) -> None:
        """Drop the connection with a TCP reset (SO_LINGER 0), as a crashing proxy would."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Close the descriptor itself now: the request's file wrappers would keep the socket
        # open, and the server's own shutdown would then send a FIN first.
        os.close(self.connection.detach())

    def _send(
        self, status: int, payload: dict[str, Any], extra_headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (extra_headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


def start_fake_llm(port: int = 0) -> tuple[FakeLLM, ThreadingHTTPServer]:
    handler = type("FakeHandler", (_Handler,), {})
    # The default listen backlog (5) drops connections when a chunk opens many at once.
    server_class = type(
        "FakeServer",
        (ThreadingHTTPServer,),
        {"request_queue_size": max(ThreadingHTTPServer.request_queue_size, 128)},
    )
    server = server_class(("127.0.0.1", port), handler)
    server.daemon_threads = True
    fake = FakeLLM(base_url=f"http://127.0.0.1:{server.server_address[1]}")
    handler.fake = fake
    # A short poll interval: shutdown() waits for one, and every test stops a server.
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-llm", daemon=True
    ).start()
    return fake, server


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    """A fake Gemini + OpenAI-compatible server on a free loopback port."""
    fake, server = start_fake_llm()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    """`python -m tests.fake_llm --port N --text TEXT`: the fake on its own, for a deployment
    driven from outside the tests (.ci/deploy_check.sh): every request gets TEXT as the model's
    answer, until SIGTERM or Ctrl-C. Keys: GEMINI_KEY and OPENAI_KEY above."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True, help="loopback port to listen on")
    parser.add_argument("--text", default="{}", help="the model's answer to every request")
    args = parser.parse_args()
    fake, server = start_fake_llm(args.port)
    fake.default = Reply(text=args.text)
    print(f"fake LLM server at {fake.base_url}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    server.shutdown()
    server.server_close()
    print(f"fake LLM server answered {len(fake.requests)} request(s)", flush=True)


if __name__ == "__main__":
    main()
