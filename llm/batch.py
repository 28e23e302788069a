"""Gemini's Batch API through the gateway: submit many structured requests as one inline batch
at half the price, poll it, and take its answers one by one through the same validation and
ledger as a single call.

    name = await batch_submit(gateway, model, requests, display_name=..., stage=...)
    status = await batch_status(gateway, model, name)       # poll until status.over
    for answer in status.answers:
        call = await batch_answer(gateway, model, request, answer, stage=...)

The batch itself is a ledger row (its submission: outcome ok, raw output the batch's name); each
answer taken becomes a ledger row of its own, priced at BATCH_PRICE_FACTOR of the model's
prices. Answers that fail validation are not repaired here (a repair would be a full-price call):
the caller submits them again or gives up. Inline batches are limited to about 20 MB of requests
(see ../shared/spec/llm-wire.md); `split_by_size` cuts a list of requests to fit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from pydantic import BaseModel

from .gateway import (
    _TIMEOUTS,
    _TRANSPORT_ERRORS,
    CallResult,
    Gateway,
    GatewayError,
    ImagePart,
    ModelConfig,
    PromptPart,
    QuotaExhausted,
    _active,
    _Failure,
    _Gemini,
    _Request,
    _validation_errors,
    _write_ledger,
    ledger_item,
    prompt_text,
    request_hash,
)
from .models import LedgerEntry, LLMModel, Outcome, Provider

BATCH_PRICE_FACTOR = Decimal("0.5")
# Under the inline limit of 20 MB, with room for the JSON around the requests.
MAX_INLINE_BYTES = 18_000_000
_STATES = {
    "JOB_STATE_PENDING": "pending",
    "JOB_STATE_QUEUED": "pending",
    "JOB_STATE_RUNNING": "running",
    "JOB_STATE_SUCCEEDED": "succeeded",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_CANCELLING": "running",
    "JOB_STATE_EXPIRED": "expired",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "succeeded",
}
OVER = ("succeeded", "failed", "cancelled", "expired")


@dataclass(frozen=True)
class BatchRequest:
    key: str  # the caller's id of the request, given back with its answer
    prompt: tuple[PromptPart, ...]
    schema: type[BaseModel]
    system: str = ""

    def size(self) -> int:
        """About how many bytes the request takes in the batch body (images in base64)."""
        return (
            600
            + len(self.system.encode())
            + sum(
                len(p.data) * 4 // 3 if isinstance(p, ImagePart) else len(p.encode())
                for p in self.prompt
            )
        )


@dataclass(frozen=True)
class BatchAnswer:
    key: str
    text: str | None  # None: the request failed inside the batch (`error` says why)
    error: str = ""
    model_version: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0


@dataclass(frozen=True)
class BatchStatus:
    name: str
    state: str  # pending | running | succeeded | failed | cancelled | expired
    answers: list[BatchAnswer]
    error: str = ""

    @property
    def over(self) -> bool:
        return self.state in OVER


def split_by_size(
    requests: Sequence[BatchRequest], limit: int = MAX_INLINE_BYTES
) -> list[list[BatchRequest]]:
    """Consecutive groups of requests, each under `limit` bytes. A request larger than the
    limit alone raises GatewayError: it cannot go inline."""
    groups: list[list[BatchRequest]] = []
    size = 0
    for request in requests:
        if request.size() > limit:
            raise GatewayError(
                f"request {request.key} is about {request.size():,} bytes, over "
                f"the inline batch limit of {limit:,}"
            )
        if not groups or size + request.size() > limit:
            groups.append([])
            size = 0
        groups[-1].append(request)
        size += request.size()
    return groups


def _gemini(gateway: Gateway, model: ModelConfig) -> _Gemini:
    if model.provider != Provider.GEMINI:
        raise GatewayError(f"the Batch API is Gemini's; {model.name} is {model.provider!r}")
    provider = gateway._provider(model.provider)
    assert isinstance(provider, _Gemini)
    return provider


async def _retrying(gateway: Gateway, model: ModelConfig, what: str, send: Any) -> Any:
    """One Batch API request with the gateway's retries: 5xx, timeouts and per-minute 429s are
    retried with backoff a bounded number of times; a daily quota raises QuotaExhausted."""
    failures = 0
    while True:
        try:
            return await send()
        except genai_errors.APIError as exc:
            failure = _Gemini._failure(exc)
        except _TIMEOUTS as exc:
            failure = _Failure(Outcome.TIMEOUT, f"timed out: {exc!r}")
        except _TRANSPORT_ERRORS as exc:
            failure = _Failure(Outcome.SERVER_ERROR, f"connection failed: {exc!r}")
        if failure.outcome == Outcome.QUOTA_EXHAUSTED:
            raise QuotaExhausted(model.model, failure.quota_id, failure.retry_delay)
        failures += 1
        if (
            failure.outcome not in (Outcome.SERVER_ERROR, Outcome.TIMEOUT, Outcome.RATE_LIMITED)
            or failures >= gateway.conf.max_attempts
        ):
            raise GatewayError(f"{what} failed ({failure.outcome}): {failure}")
        pause = (
            failure.retry_delay if failure.retry_delay is not None else gateway._backoff(failures)
        )
        await asyncio.sleep(min(pause, gateway.conf.retry_delay_cap_s))


async def batch_submit(
    gateway: Gateway,
    model: LLMModel | ModelConfig,
    requests: Sequence[BatchRequest],
    *,
    display_name: str,
    stage: str,
    job_id: int | None = None,
) -> str:
    """Submit `requests` as one inline batch; returns the batch's name ("batches/..."), which
    the caller keeps to poll it. The submission is a ledger row."""
    config = _active(model)
    if not requests:
        raise GatewayError("a batch needs at least one request")
    gemini = _gemini(gateway, config)
    inlined = []
    for request in requests:
        built = _Request(system=request.system, prompt=request.prompt, schema=request.schema)
        generation = _Gemini._generation(config, built).model_dump(exclude_none=True)
        generation.pop("automatic_function_calling", None)  # the SDK's own, not sent
        inlined.append(
            genai_types.InlinedRequest(
                contents=_Gemini._contents(built),
                metadata={"key": request.key},
                config=genai_types.GenerateContentConfig(**generation),
            )
        )
    job = await _retrying(
        gateway,
        config,
        "batch submission",
        lambda: gemini._client.aio.batches.create(
            model=config.model,
            src=inlined,
            config=genai_types.CreateBatchJobConfig(display_name=display_name),
        ),
    )
    name = job.name or ""
    if not name:
        raise GatewayError("the batch submission was answered without a batch name")
    await sync_to_async(_write_ledger)(
        LedgerEntry(
            job_id=job_id,
            stage=stage,
            provider=config.provider,
            model=config.model,
            request_hash=request_hash(config, system="", prompt=[name], schema=None),
            outcome=Outcome.OK,
            raw_output=name,
            item_key=ledger_item.get(),
            prompt=f"[batch of {len(requests)} requests: {display_name}]",
        )
    )
    return name


def _state(job: genai_types.BatchJob) -> str:
    raw = getattr(job.state, "value", job.state) or ""
    return _STATES.get(str(raw), "running")


async def batch_status(gateway: Gateway, model: LLMModel | ModelConfig, name: str) -> BatchStatus:
    """The batch's state, and its answers once it succeeded."""
    config = ModelConfig.of(model)
    gemini = _gemini(gateway, config)
    job = await _retrying(
        gateway, config, "batch poll", lambda: gemini._client.aio.batches.get(name=name)
    )
    state = _state(job)
    answers: list[BatchAnswer] = []
    if state == "succeeded" and job.dest is not None:
        for inlined in job.dest.inlined_responses or []:
            key = str((inlined.metadata or {}).get("key", ""))
            response = inlined.response
            if inlined.error is not None or response is None:
                error = inlined.error
                answers.append(
                    BatchAnswer(
                        key,
                        None,
                        f"{getattr(error, 'code', '')} {getattr(error, 'message', '')}".strip()
                        or "no answer",
                    )
                )
                continue
            usage = response.usage_metadata
            answers.append(
                BatchAnswer(
                    key,
                    response.text or "",
                    model_version=response.model_version or "",
                    tokens_in=(usage.prompt_token_count or 0) if usage else 0,
                    tokens_out=(
                        (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)
                    )
                    if usage
                    else 0,
                    tokens_cached=(usage.cached_content_token_count or 0) if usage else 0,
                )
            )
    error = str(job.error.message or "") if getattr(job, "error", None) else ""
    return BatchStatus(name, state, answers, error)


async def batch_cancel(gateway: Gateway, model: LLMModel | ModelConfig, name: str) -> None:
    config = ModelConfig.of(model)
    gemini = _gemini(gateway, config)
    await _retrying(
        gateway, config, "batch cancel", lambda: gemini._client.aio.batches.cancel(name=name)
    )


async def batch_answer(
    gateway: Gateway,
    model: LLMModel | ModelConfig,
    request: BatchRequest,
    answer: BatchAnswer,
    *,
    stage: str,
    template_name: str = "",
    template_version: str = "",
    job_id: int | None = None,
) -> CallResult:
    """One answer of a batch as a call: validated against the request's schema and written to
    the ledger at the batch price. `ok` exactly when the text validates."""
    config = ModelConfig.of(model)
    digest = request_hash(
        config, system=request.system, prompt=request.prompt, schema=request.schema
    )
    result = CallResult(
        outcome=Outcome.ERROR, request_hash=digest, requests=0, model_version=answer.model_version
    )
    if answer.text is None:
        result.outcome, result.error = Outcome.SERVER_ERROR, answer.error or "no answer"
        output, errors = None, result.error
    else:
        output, errors = _validation_errors(request.schema, answer.text)
        result.outcome = Outcome.OK if output is not None else Outcome.INVALID_OUTPUT
        result.output, result.raw_text, result.error = output, answer.text, errors
    cost = config.cost(answer.tokens_in, answer.tokens_out) * BATCH_PRICE_FACTOR
    built = _Request(system=request.system, prompt=request.prompt, schema=request.schema)
    row = LedgerEntry(
        job_id=job_id,
        stage=stage,
        provider=config.provider,
        model=config.model,
        model_version=answer.model_version,
        template_name=template_name,
        template_version=template_version,
        request_hash=digest,
        tokens_in=answer.tokens_in,
        tokens_out=answer.tokens_out,
        tokens_cached=answer.tokens_cached,
        cost=cost,
        outcome=result.outcome,
        raw_output=answer.text or "",
        error=errors,
        prompt=prompt_text(built),
        item_key=ledger_item.get(),
    )
    result.ledger_ids.append(await sync_to_async(_write_ledger)(row))
    result.tokens_in, result.tokens_out = answer.tokens_in, answer.tokens_out
    result.tokens_cached, result.cost = answer.tokens_cached, cost
    return result
