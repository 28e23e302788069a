"""Gemini's Batch API on the fake server (tests/fake_llm.py routes to it), as
../shared/spec/llm-wire.md describes it:

- `POST /{version}/models/{model}:batchGenerateContent` with inline requests answers
  `{name: "batches/ID", metadata: {state: "BATCH_STATE_PENDING"}}`;
- `GET /{version}/batches/ID` answers RUNNING for `polls_before_done` polls, then SUCCEEDED with
  `metadata.output.inlinedResponses.inlinedResponses[]`, each `{response | error, metadata}`;
- `POST /{version}/batches/ID:cancel` cancels it.

Each inner request is answered like a single call, through the fake's script, responder and
default (recorded with protocol "gemini-batch"), so a test scripts batch answers the same way;
a Reply with an error status becomes that request's `error`. `fail_next` makes the next batch
end FAILED as a whole.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CREATE_PATH = re.compile(r"^/(v1beta|v1)/models/([^/:]+):batchGenerateContent$")
GET_PATH = re.compile(r"^/(v1beta|v1)/(batches/[A-Za-z0-9_-]+)$")
CANCEL_PATH = re.compile(r"^/(v1beta|v1)/(batches/[A-Za-z0-9_-]+):cancel$")
_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"


@dataclass
class _Batch:
    name: str
    model: str
    display_name: str
    requests: list[dict[str, Any]]
    polls_left: int
    fail: bool = False
    state: str = "BATCH_STATE_PENDING"
    output: list[dict[str, Any]] | None = None


@dataclass
class BatchStore:
    """The fake's batches. `polls_before_done`: how many polls answer RUNNING first."""

    polls_before_done: int = 1
    fail_next: bool = False
    batches: dict[str, _Batch] = field(default_factory=dict)
    created: int = 0  # batches submitted
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def create(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        batch = body.get("batch") or {}
        requests = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
        if not requests:
            return 400, {
                "error": {
                    "code": 400,
                    "message": "no inline requests",
                    "status": "INVALID_ARGUMENT",
                }
            }
        with self._lock:
            name = f"batches/fake{next(self._ids)}"
            self.batches[name] = _Batch(
                name,
                model,
                str(batch.get("displayName", "")),
                list(requests),
                self.polls_before_done,
                fail=self.fail_next,
            )
            self.fail_next = False
            self.created += 1
        return 200, {"name": name, "metadata": self._metadata(self.batches[name])}

    def get(
        self, name: str, answer: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(name)
            if batch is None:
                return 404, {
                    "error": {"code": 404, "message": f"{name} not found", "status": "NOT_FOUND"}
                }
            if batch.state in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                if batch.polls_left > 0:
                    batch.polls_left -= 1
                    batch.state = "BATCH_STATE_RUNNING"
                    return 200, self._operation(batch)
                if batch.fail:
                    batch.state = "BATCH_STATE_FAILED"
                    return 200, self._operation(batch)
            todo = batch.state not in (
                "BATCH_STATE_SUCCEEDED",
                "BATCH_STATE_FAILED",
                "BATCH_STATE_CANCELLED",
            )
        if todo:  # answered outside the lock: answers go through the fake's own lock
            output = [
                {**answer(item.get("request") or {}), "metadata": item.get("metadata") or {}}
                for item in batch.requests
            ]
            with self._lock:
                batch.output, batch.state = output, "BATCH_STATE_SUCCEEDED"
        return 200, self._operation(batch)

    def cancel(self, name: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(name)
            if batch is None:
                return 404, {"error": {"code": 404, "message": f"{name} not found"}}
            if batch.state in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
                batch.state = "BATCH_STATE_CANCELLED"
        return 200, {}

    @staticmethod
    def _metadata(batch: _Batch) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "@type": _TYPE,
            "name": batch.name,
            "model": f"models/{batch.model}",
            "state": batch.state,
            "displayName": batch.display_name,
        }
        if batch.output is not None:
            meta["output"] = {"inlinedResponses": {"inlinedResponses": batch.output}}
        return meta

    def _operation(self, batch: _Batch) -> dict[str, Any]:
        over = batch.state not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING")
        return {"name": batch.name, "metadata": self._metadata(batch), "done": over}
