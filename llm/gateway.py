"""One small gateway over the providers (llm/providers.py): structured output, validation with
repair turns, retries owned here (the SDKs' own are off), a shared rate limit, the ledger and
its cache.

Every kind of call (structured, grounded, free text) goes one way: the cache, then the request
through the retry loop, then the ledger row; what differs is only how an answer is accepted.
An answer that is not accepted (its schema, or the caller's own `check`) is recorded as
`invalid_output`, never `ok`, so the cache never serves it; a structured call sends the
problems back as a repair turn, up to `LLM_MAX_REPAIRS` times.

Use one `Gateway` per event loop (a Celery task's chunk builds one, runs its calls with
`run_bounded`, then closes it): the HTTP and Redis clients it holds belong to that loop.

    async with gateway_from_settings() as gateway:
        result = await gateway.call_structured(model, prompt=[text, ImagePart(...)], ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from pydantic import BaseModel, ValidationError

from .models import LedgerEntry, LLMModel, Outcome
from .outages import DATABASE_PATIENCE_S, OUTAGE_ERRORS, forget_broken_connection, is_outage
from .outages import pause as outage_pause
from .providers import (
    GROUNDING_TOOLS,
    TIMEOUTS,
    TRANSPORT_ERRORS,
    Failure,
    GatewayError,
    GatewaySettings,
    Gemini,
    ImagePart,
    ModelConfig,
    PromptPart,
    ProviderClient,
    Reply,
    Request,
    provider_class,
)
from .ratelimit import LimiterUnavailable, RateLimiter, RedisTokenBucket
from .schemas import IdSets, id_sets, json_schema, response_schema

# Names the Batch API module (llm/batch.py) reads from here since before the providers had a
# module of their own.
_TIMEOUTS, _TRANSPORT_ERRORS, _Failure, _Gemini, _Request = (
    TIMEOUTS,
    TRANSPORT_ERRORS,
    Failure,
    Gemini,
    Request,
)
_json_schema = json_schema

__all__ = [
    "GROUNDING_TOOLS",
    "CallResult",
    "Gateway",
    "GatewayError",
    "GatewaySettings",
    "GroundedResult",
    "ImagePart",
    "ModelConfig",
    "PromptPart",
    "QuotaExhausted",
    "gateway_from_settings",
    "ledger_item",
    "prompt_text",
    "request_hash",
    "run_bounded",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

REPAIR_PROMPT = (
    "Your previous reply did not validate: against the required JSON schema, or against the "
    "task's rules.\nProblems, each with its JSON path:\n{errors}\n"
    "Reply again with the corrected JSON only: the same content, fixed so that none of these "
    "problems remains."
)
# The repair of a grounded (free-text) answer: no JSON, the tools again.
GROUNDED_REPAIR_PROMPT = (
    "Your previous answer could not be used:\n{errors}\n"
    "Answer the same task again, using the tools you were given (search the web, or read the "
    "URLs), so that every claim is grounded in the sources they return."
)
# An image costs about this many input tokens on Gemini; only the token bucket's estimate.
_IMAGE_TOKENS = 258

# A structured call's own rules beyond its schema: the problems of a schema-valid answer, each
# naming its JSON path (e.g. "items[2].baseline: 5 is above the 4 options"); empty when it is
# acceptable. It must depend only on what the request holds, as the cache answers by request.
Check = Callable[[BaseModel], Sequence[str]]
# The same for a grounded call's answer (its text and sources); a refused one is not cached.
GroundedCheck = Callable[["GroundedResult"], Sequence[str]]
# How a call accepts a stored answer text: (what the caller gets, "") or (None, the problems).
_Accept = Callable[[str], tuple[Any, str]]


class QuotaExhausted(GatewayError):  # noqa: N818 (the name says what the job system waits for)
    """The provider's per-day quota is spent: retrying now would only burn requests.
    The job system parks the job until the quota resets."""

    def __init__(self, model: str, quota_id: str, retry_delay: float | None) -> None:
        self.model = model
        self.quota_id = quota_id
        self.retry_delay = retry_delay
        super().__init__(f"daily quota exhausted for {model} ({quota_id})")


@dataclass
class CallResult:
    """The outcome of one logical call: `output` is set exactly when `ok` (structured calls)."""

    outcome: str
    output: BaseModel | None = None
    raw_text: str = ""
    error: str = ""
    cached: bool = False
    request_hash: str = ""
    model_version: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cached: int = 0
    cost: Decimal = Decimal("0")
    requests: int = 0  # HTTP requests sent (retries and the repairs included)
    ledger_ids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == Outcome.OK


@dataclass(frozen=True)
class GroundedResult:
    """A free-text answer with what grounded it (`call_grounded`).

    `chunks` are the sources as (uri, title), `supports` the supported text with the indices
    of its chunks, `url_statuses` the URL context tool's (retrieved url, retrieval status)."""

    text: str
    chunks: list[tuple[str, str]]
    supports: list[tuple[str, list[int]]]
    url_statuses: list[tuple[str, str]]
    call: CallResult

    @property
    def ok(self) -> bool:
        return self.call.ok


# ---------------------------------------------------------------------------------------------
# The request hash: what makes two requests the same for the cache.


def request_hash(
    config: ModelConfig,
    *,
    system: str,
    prompt: Sequence[PromptPart],
    schema: type[BaseModel] | None,
    tools: Sequence[str] = (),
    ids: IdSets = (),
) -> str:
    """sha256 of a canonical JSON of everything the answer depends on; images by their hash.
    The schema is the one sent, with the call's ids (llm/schemas.py): the same prompt asked
    with other ids is another request."""
    sent = response_schema(schema, ids) if schema is not None else None
    return _digest(config, system=system, prompt=prompt, schema=sent, tools=tools)


def _digest(
    config: ModelConfig,
    *,
    system: str,
    prompt: Sequence[PromptPart],
    schema: dict[str, Any] | None,
    tools: Sequence[str],
) -> str:
    contents: list[dict[str, str]] = []
    for part in prompt:
        if isinstance(part, ImagePart):
            contents.append(
                {"image_sha256": hashlib.sha256(part.data).hexdigest(), "mime_type": part.mime_type}
            )
        else:
            contents.append({"text": part})
    canonical = {
        "provider": config.provider,
        "model": config.model,
        "params": config.parameters,
        "system": system,
        "contents": contents,
        "schema": schema,
    }
    if tools:  # only here, so that the hashes of structured calls (the cache keys) stay put
        canonical["tools"] = list(tools)
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _active(model: LLMModel | ModelConfig) -> ModelConfig:
    config = ModelConfig.of(model)
    if not config.active:
        raise GatewayError(f"model {config.name!r} is switched off (LLMModel.active)")
    return config


def _estimated_tokens(prompt: Sequence[PromptPart], system: str) -> int:
    """A rough count for the token bucket (about 4 characters a token); the ledger has the
    real one."""
    chars = len(system) + sum(len(p) for p in prompt if isinstance(p, str))
    images = sum(1 for p in prompt if isinstance(p, ImagePart))
    return chars // 4 + images * _IMAGE_TOKENS


def _validation_errors(schema: type[BaseModel], text: str) -> tuple[BaseModel | None, str]:
    try:
        return schema.model_validate_json(text), ""
    except ValidationError as exc:
        return None, str(exc)


def _structured_accept(schema: type[BaseModel], check: Check | None) -> _Accept:
    def accept(text: str) -> tuple[Any, str]:
        output, errors = _validation_errors(schema, text)
        if output is None:
            return None, errors
        problems = list(check(output)) if check is not None else []
        if problems:
            return None, "\n".join(f"- {problem}" for problem in problems)
        return output, ""

    return accept


def _grounded_accept(check: GroundedCheck | None) -> _Accept:
    def accept(text: str) -> tuple[Any, str]:
        try:
            parts = _grounded_parts(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"unreadable grounded answer: {exc!r}"
        if check is not None:
            problems = list(check(GroundedResult(**parts, call=CallResult(outcome=Outcome.OK))))
            if problems:
                return None, "\n".join(f"- {problem}" for problem in problems)
        return parts, ""

    return accept


def _text_accept(text: str) -> tuple[Any, str]:
    return (text, "") if text.strip() else (None, "the model answered with no text")


# ---------------------------------------------------------------------------------------------
# The ledger (the database is touched only here, from the loop through sync_to_async).


def _cached_answers(digests: Sequence[str]) -> list[LedgerEntry | None]:
    """The latest `ok` row of each request hash (None where there is none), in one query."""
    latest: dict[str, LedgerEntry] = {}
    rows = (
        LedgerEntry.objects.filter(request_hash__in=set(digests), outcome=Outcome.OK)
        .only("pk", "request_hash", "raw_output", "model_version")
        .order_by("request_hash", "-created_at", "-pk")
    )
    for row in rows:
        latest.setdefault(row.request_hash, row)
    return [latest.get(digest) for digest in digests]


def _write_ledger(row: LedgerEntry) -> int:
    row.save(force_insert=True)
    return row.pk


def _write_ledger_rows(rows: Sequence[LedgerEntry]) -> list[int]:
    """Rows in one INSERT and one commit; their pks in order (SQLite 3.35+ and PostgreSQL
    return them)."""
    return [row.pk for row in LedgerEntry.objects.bulk_create(rows)]


# How long the ledger's lookups and writes wait for others to join their trip to the database
# thread while other requests are out. The answers of a chunk land in bursts at 64 requests out
# but a few ms apart at 32, where each trip served one or two calls (its hop, query and commit
# about 0.6 ms of CPU a call); a chunk has twice as many items in progress as request slots, so
# an item's wait here delays no request (bench/llm_throughput.py).
LEDGER_GATHER_S = 0.02


class _Batched:
    """One database round trip for what the calls in flight ask at about the same time.

    Each lookup or write joins the batch being gathered, and one `run_many` in the database
    thread serves the whole batch. While a batch runs there, the next one gathers; while
    `crowded()` (other requests are out, so more asks are coming) a batch gathers for
    `gather_s` first, else it goes at once. Each caller still awaits its own result, so
    nothing is answered before its row is written. This halves the job system's CPU per call
    (bench/llm_throughput.py), most of it the thread hops and commits of one query per call."""

    def __init__(
        self,
        run_many: Callable[[list[Any]], list[Any]],
        *,
        gather_s: float = 0.0,
        crowded: Callable[[], bool] = lambda: False,
    ) -> None:
        def in_database_thread(items: list[Any]) -> list[Any]:
            try:
                return run_many(items)
            except OUTAGE_ERRORS:
                forget_broken_connection()  # the next try opens a new connection
                raise

        self._name = run_many.__name__
        self._run_many = sync_to_async(in_database_thread)
        self._gather_s, self._crowded = gather_s, crowded
        self._pending: list[tuple[Any, asyncio.Future[Any]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def __call__(self, item: Any) -> Any:
        future = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._flushing is None:
            self._flushing = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            # At least the calls made ready by the same event-loop turn join in.
            await asyncio.sleep(self._gather_s if self._crowded() else 0)
            outage_started: float | None = None
            failures = 0
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    results = await self._run_many([item for item, _ in batch])
                except Exception as exc:
                    loop = asyncio.get_running_loop()
                    outage_started = outage_started or loop.time()
                    if is_outage(exc) and loop.time() - outage_started < DATABASE_PATIENCE_S:
                        # The database went away: the batch waits for it, in front of what came
                        # meanwhile. A ledger row is thus written once the database is back,
                        # never lost with the answer it records (issue 22).
                        failures += 1
                        if failures == 1:
                            log.warning("ledger %s waits for the database: %s", self._name, exc)
                        self._pending = batch + self._pending
                        await asyncio.sleep(outage_pause(failures))
                        continue
                    # each caller gets the failure of its batch
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                outage_started, failures = None, 0
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._flushing = None


# The key of the job item whose handler makes the call: llm/jobs.py sets it around each handler,
# and the ledger rows of its calls carry it (the console's item page lists them).
ledger_item: ContextVar[str] = ContextVar("ledger_item", default="")


class ItemAnswers:
    """The answers one job item's handler got, kept while its chunk runs it: when a run ends in
    a database outage (a read or write of the handler's own), the job system runs the handler
    again once the database is back, and each request made again is given the answer it got
    before, in the same order, with what it cost. So the item neither pays twice nor loses
    what its calls cost, even for a job of fresh calls."""

    def __init__(self) -> None:
        self._kept: dict[str, deque[tuple[CallResult, Any]]] = defaultdict(deque)
        self._this_run: list[tuple[str, tuple[CallResult, Any]]] = []

    def next_run(self) -> None:
        """The handler runs again: what this run got, and what it did not come to ask again,
        are there for the next run."""
        left = self._kept
        self._kept = defaultdict(deque)
        for digest, answer in self._this_run:
            self._kept[digest].append(answer)
        for digest, answers in left.items():
            self._kept[digest].extend(answers)
        self._this_run = []

    def take(self, digest: str) -> tuple[CallResult, Any] | None:
        kept = self._kept.get(digest)
        answer = kept.popleft() if kept else None
        if answer is not None:
            self._this_run.append((digest, answer))
        return answer

    def keep(self, digest: str, answer: tuple[CallResult, Any]) -> None:
        self._this_run.append((digest, answer))


# Set by llm/jobs.py around each item's handler; None outside a job (nothing is kept).
item_answers: ContextVar[ItemAnswers | None] = ContextVar("item_answers", default=None)


@dataclass
class Observed:
    """What a gateway saw of one model's requests: its limits and how long its answers took
    (llm/jobs.py paces a job by it)."""

    requests_per_minute: int
    tokens_per_minute: int
    answers: int = 0
    latency_s: float = 0.0  # summed over the answers
    tokens: int = 0  # the limiter's estimates, summed over the answers

    @property
    def mean_latency_s(self) -> float:
        return self.latency_s / self.answers if self.answers else 0.0

    @property
    def rate(self) -> float:
        """Requests a second the limits allow (0: no limit)."""
        rates = []
        if self.requests_per_minute > 0:
            rates.append(self.requests_per_minute / 60)
        if self.tokens_per_minute > 0 and self.answers and self.tokens:
            rates.append(self.tokens_per_minute / 60 / (self.tokens / self.answers))
        return min(rates) if rates else 0.0


# How long a request waits, at most, for the rate limiter's Redis to answer again (a restart,
# an outage), asking again every few seconds; no request goes out meanwhile.
LIMITER_PATIENCE_S = 300.0
_LIMITER_PAUSE_CAP_S = 5.0


def prompt_text(request: Request) -> str:
    """A request as the ledger keeps it for admins to read: the system text, the user's parts
    (an image as one line with its type, size and sha256, not its bytes), the repairs' turns,
    and the tools or schema asked for."""
    lines = [f"[system]\n{request.system}"] if request.system else []
    lines.append("[user]")
    for part in request.prompt:
        if isinstance(part, ImagePart):
            digest = hashlib.sha256(part.data).hexdigest()
            lines.append(f"[image {part.mime_type}, {len(part.data):,} bytes, sha256 {digest}]")
        else:
            lines.append(part)
    for rejected, instruction in request.repairs:
        lines += ["[model]", rejected, "[user]", instruction]
    if request.tools:
        lines.append(f"[tools: {', '.join(request.tools)}]")
    if request.schema is not None:
        lines.append(f"[response schema: {request.schema.__name__}]")
    for name, values in request.ids:
        lines.append(f"[ids of {name} in the schema: {', '.join(map(str, values)) or 'none'}]")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


class Gateway:
    def __init__(self, *, limiter: RateLimiter, conf: GatewaySettings | None = None) -> None:
        self.limiter = limiter
        self.conf = conf or GatewaySettings.from_django()
        self._providers: dict[str, ProviderClient] = {}
        self._requests_out = 0
        self._lookup = _Batched(_cached_answers, gather_s=LEDGER_GATHER_S, crowded=self._busy)
        self._write = _Batched(_write_ledger_rows, gather_s=LEDGER_GATHER_S, crowded=self._busy)
        self._in_flight: asyncio.Semaphore | contextlib.nullcontext[None] = contextlib.nullcontext()
        self._slots = 0
        self._observed: dict[str, Observed] = {}

    def _busy(self) -> bool:
        """Whether any request is out: then more ledger work is on its way."""
        return self._requests_out > 0

    def limit_in_flight(self, requests: int) -> None:
        """At most `requests` of this gateway's requests at the providers at once (a job kind's
        concurrency). Only the request waits for a slot: the cache lookup, the ledger rows and
        the pauses between retries are done outside it, so that one call's own work never
        keeps another's request from going out."""
        self._in_flight = asyncio.Semaphore(requests)
        self._slots = requests

    def grow_in_flight(self, requests: int) -> None:
        """Raise the limit of limit_in_flight to `requests` (a job's pace grew): the new slots
        are free at once; a limit is never lowered while requests hold it."""
        if isinstance(self._in_flight, asyncio.Semaphore) and requests > self._slots:
            for _ in range(requests - self._slots):
                self._in_flight.release()
            self._slots = requests

    def observed(self) -> Observed | None:
        """The model this gateway sent the most answered requests to, and what it saw of it."""
        return max(self._observed.values(), key=lambda o: o.answers, default=None)

    def _observe(self, config: ModelConfig, tokens: int, latency_s: float) -> None:
        seen = self._observed.get(config.name)
        if seen is None:
            limits = config.limits
            seen = self._observed[config.name] = Observed(
                limits.requests_per_minute, limits.tokens_per_minute
            )
        seen.answers += 1
        seen.latency_s += latency_s
        seen.tokens += tokens

    async def __aenter__(self) -> Gateway:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()
        close = getattr(self.limiter, "aclose", None)
        if close is not None:
            await close()

    def _provider(self, name: str) -> ProviderClient:
        if name not in self._providers:
            self._providers[name] = provider_class(name)(self.conf)
        return self._providers[name]

    async def call_structured(
        self,
        model: LLMModel | ModelConfig,
        *,
        prompt: Sequence[PromptPart],
        system: str = "",
        schema: type[BaseModel],
        ids: Mapping[str, Iterable[str | int]] | None = None,
        check: Check | None = None,
        stage: str,
        template_name: str = "",
        template_version: str = "",
        fresh: bool = False,
        job_id: int | None = None,
    ) -> CallResult:
        """Ask `model` for an answer that validates against `schema` and passes `check`.

        `ids` gives, by set, the ids the answer may name, for the sets the schema marks
        (llm/schemas.py): they are sent in the schema, so a model decoding under it cannot
        name another; `check` stays the last line. An answer that does not validate or pass
        gets a repair turn with its problems, up to the configured number of repairs; then the
        call fails with the last raw text and its problems.
        Raises QuotaExhausted when the daily quota is spent; every other failure comes back as
        a CallResult whose outcome says what happened (never `ok` without a valid output)."""
        request = Request(system=system, prompt=tuple(prompt), schema=schema, ids=id_sets(ids))
        result, output = await self._call(
            model,
            request,
            _structured_accept(schema, check),
            repairs=self.conf.max_repairs,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            fresh=fresh,
            job_id=job_id,
        )
        result.output = output
        return result

    async def call_grounded(
        self,
        model: LLMModel | ModelConfig,
        *,
        prompt: Sequence[PromptPart],
        system: str = "",
        tools: Sequence[str] = ("google_search",),
        check: GroundedCheck | None = None,
        stage: str,
        template_name: str = "",
        template_version: str = "",
        fresh: bool = False,
        job_id: int | None = None,
    ) -> GroundedResult:
        """A free-text answer using built-in tools (Google Search, URL context), with its
        grounding metadata. The ledger's raw output is the JSON of {text, chunks, supports,
        url_statuses}, which is also what the cache answers from. An answer that `check` finds
        problems with (e.g. a search answered without grounding) is recorded as
        invalid_output, so the cache never serves it, and gets up to LLM_MAX_REPAIRS repair
        turns (its problems, and the model's own text); then the call fails with them.

        Raises QuotaExhausted like call_structured; GatewayError for a model whose provider
        has no such tools."""
        config = _active(model)
        if not getattr(provider_class(config.provider), "supports_tools", False):
            raise GatewayError(f"grounded calls need a Gemini model, not {config.provider!r}")
        unknown = [t for t in tools if t not in GROUNDING_TOOLS]
        if not tools or unknown:
            raise GatewayError(f"tools must be among {GROUNDING_TOOLS}, not {list(tools)}")
        request = Request(system=system, prompt=tuple(prompt), schema=None, tools=tuple(tools))
        result, parts = await self._call(
            config,
            request,
            _grounded_accept(check),
            # Only a check has something to repair: an answer it refuses (a search answered
            # without grounding) gets the same repair turns as a structured one.
            repairs=self.conf.max_repairs if check is not None else 0,
            repair_prompt=GROUNDED_REPAIR_PROMPT,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            fresh=fresh,
            job_id=job_id,
        )
        return GroundedResult(**(parts or _EMPTY_GROUNDING), call=result)

    async def call_text(
        self,
        model: LLMModel | ModelConfig,
        *,
        prompt: Sequence[PromptPart],
        system: str = "",
        stage: str,
        template_name: str = "",
        template_version: str = "",
        fresh: bool = False,
        job_id: int | None = None,
    ) -> CallResult:
        """A free-text answer (no schema, no tools), from either provider: what an evaluated
        model writes when it answers a question; `raw_text` is the answer. An empty answer is
        not `ok` (outcome invalid_output): there is nothing to keep.

        Raises QuotaExhausted like call_structured."""
        request = Request(system=system, prompt=tuple(prompt), schema=None)
        result, _ = await self._call(
            model,
            request,
            _text_accept,
            repairs=0,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            fresh=fresh,
            job_id=job_id,
        )
        return result

    async def _call(
        self,
        model: LLMModel | ModelConfig,
        request: Request,
        accept: _Accept,
        *,
        repairs: int,
        repair_prompt: str = REPAIR_PROMPT,
        stage: str,
        template_name: str,
        template_version: str,
        fresh: bool,
        job_id: int | None,
    ) -> tuple[CallResult, Any]:
        """Every call's one path: the cache, then the request (and its repairs) through the
        retry loop, each answer recorded with whether it was accepted."""
        config = _active(model)
        digest = _digest(
            config,
            system=request.system,
            prompt=request.prompt,
            schema=request.response_schema,  # built here once; the first request sends it
            tools=request.tools,
        )
        answers = item_answers.get()
        again = answers.take(digest) if answers is not None else None
        if again is not None:  # the item's handler runs again after an outage: as it was
            return again
        answer = await self._call_once(
            config,
            request,
            accept,
            digest,
            repairs=repairs,
            repair_prompt=repair_prompt,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            fresh=fresh,
            job_id=job_id,
        )
        if answers is not None:
            answers.keep(digest, answer)
        return answer

    async def _call_once(
        self,
        config: ModelConfig,
        request: Request,
        accept: _Accept,
        digest: str,
        *,
        repairs: int,
        repair_prompt: str,
        stage: str,
        template_name: str,
        template_version: str,
        fresh: bool,
        job_id: int | None,
    ) -> tuple[CallResult, Any]:
        if not fresh:
            hit = await self._lookup(digest)
            if hit is not None:
                accepted, problems = accept(hit.raw_output)
                if accepted is not None:
                    return CallResult(
                        outcome=Outcome.OK,
                        raw_text=hit.raw_output,
                        cached=True,
                        request_hash=digest,
                        model_version=hit.model_version,
                    ), accepted
                log.warning(
                    "cached answer %s is no longer accepted: calling again (%s)", hit.pk, problems
                )

        result = CallResult(outcome=Outcome.ERROR, request_hash=digest)
        row: dict[str, Any] = {
            "job_id": job_id,
            "stage": stage,
            "provider": config.provider,
            "model": config.model,
            "template_name": template_name,
            "template_version": template_version,
            "request_hash": digest,
        }
        while True:
            reply = await self._send(config, request, result, row)
            if reply is None:
                return result, None
            text = reply.text
            if request.tools:  # the sources go into the ledger with the text
                text = json.dumps({"text": reply.text, **reply.grounding}, ensure_ascii=False)
            accepted, problems = accept(text)
            outcome = Outcome.OK if accepted is not None else Outcome.INVALID_OUTPUT
            await self._record(result, row, reply, text, config, outcome, problems)
            result.outcome, result.raw_text, result.error = outcome, text, problems
            if accepted is not None or len(request.repairs) >= repairs:
                return result, accepted
            # The model's own words go back: for a grounded answer, not the ledger's JSON of it.
            rejected = reply.text if request.tools else text
            request = replace(
                request,
                repairs=(*request.repairs, (rejected, repair_prompt.format(errors=problems))),
            )

    async def _send(
        self, config: ModelConfig, request: Request, result: CallResult, row: dict[str, Any]
    ) -> Reply | None:
        """One request through the retry loop; None when it failed for good (`result` says
        why). Failed attempts are recorded here, the answered one by the caller."""
        provider = self._provider(config.provider)
        tokens = _estimated_tokens(request.prompt, request.system)
        failures = rate_waits = 0
        row["is_repair"] = bool(request.repairs)
        row["prompt"], row["item_key"] = prompt_text(request), ledger_item.get()
        while True:
            result.requests += 1
            row["attempt"] = failures + rate_waits + 1
            try:
                # The slot first: the rate limit's token is taken just before the request goes.
                async with self._in_flight:
                    await self._acquire(config, tokens)
                    started = time.perf_counter()
                    self._requests_out += 1
                    try:
                        reply = await provider.send(config, request)
                    finally:
                        self._requests_out -= 1
            except Failure as failure:
                latency = time.perf_counter() - started
                await self._record_failure(result, row, failure, latency)
                if failure.outcome == Outcome.QUOTA_EXHAUSTED:
                    raise QuotaExhausted(
                        config.model, failure.quota_id, failure.retry_delay
                    ) from failure
                if failure.outcome == Outcome.RATE_LIMITED:
                    rate_waits += 1
                    if rate_waits > self.conf.max_rate_limit_waits:
                        return self._give_up(result, failure)
                    await asyncio.sleep(self._rate_limit_pause(failure, rate_waits))
                    continue
                if failure.outcome in (Outcome.SERVER_ERROR, Outcome.TIMEOUT):
                    failures += 1
                    if failures >= self.conf.max_attempts:
                        return self._give_up(result, failure)
                    await asyncio.sleep(self._backoff(failures))
                    continue
                return self._give_up(result, failure)  # a refusal that retrying won't change
            latency = time.perf_counter() - started
            reply.latency_ms = int(latency * 1000)
            self._observe(config, tokens, latency)
            return reply

    async def _acquire(self, config: ModelConfig, tokens: int) -> None:
        """The rate limit's turn for one request. The limiter's own Redis not answering (a
        restart) is waited out as a provider's 5xx is, with backoff, for up to
        LIMITER_PATIENCE_S: nothing was sent, so no item fails for it (issue 22)."""
        waited = 0.0
        failures = 0
        while True:
            try:
                await self.limiter.acquire(config.name, config.limits, tokens)
                if failures:
                    log.warning("the rate limiter answers again after %.1f s", waited)
                return
            except LimiterUnavailable as exc:
                failures += 1
                if waited >= LIMITER_PATIENCE_S:
                    raise
                ceiling = min(_LIMITER_PAUSE_CAP_S, self.conf.backoff_base_s * 2 ** (failures - 1))
                pause = random.uniform(ceiling / 2, ceiling)
                if failures == 1:
                    log.warning("%s; a request for %s waits for it", exc, config.name)
                await asyncio.sleep(pause)
                waited += pause

    def _rate_limit_pause(self, failure: Failure, waits: int) -> float:
        if failure.retry_delay is not None:
            # The server knows when the window reopens; a little jitter spreads the workers.
            jittered = failure.retry_delay * (1 + random.random() / 10)
            return min(self.conf.retry_delay_cap_s, jittered)
        return self._backoff(waits)

    def _backoff(self, failures: int) -> float:
        """Exponential with jitter: uniform in [c/2, c] for c = base * 2^(n-1), capped."""
        ceiling = min(self.conf.backoff_cap_s, self.conf.backoff_base_s * 2 ** (failures - 1))
        return random.uniform(ceiling / 2, ceiling)

    @staticmethod
    def _give_up(result: CallResult, failure: Failure) -> None:
        result.outcome = failure.outcome
        result.error = f"{failure}\n{result.error}" if result.error else str(failure)

    async def _record_failure(
        self, result: CallResult, row: dict[str, Any], failure: Failure, latency: float
    ) -> None:
        entry = LedgerEntry(
            **row, outcome=failure.outcome, error=str(failure), latency_ms=int(latency * 1000)
        )
        result.ledger_ids.append(await self._write(entry))

    async def _record(
        self,
        result: CallResult,
        row: dict[str, Any],
        reply: Reply,
        text: str,
        config: ModelConfig,
        outcome: str,
        errors: str,
    ) -> None:
        cost = config.cost(reply.tokens_in, reply.tokens_out)
        entry = LedgerEntry(
            **row,
            outcome=outcome,
            model_version=reply.model_version,
            tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out,
            tokens_cached=reply.tokens_cached,
            cost=cost,
            latency_ms=reply.latency_ms,
            raw_output=text,
            error=errors,
        )
        result.ledger_ids.append(await self._write(entry))
        result.tokens_in += reply.tokens_in
        result.tokens_out += reply.tokens_out
        result.tokens_cached += reply.tokens_cached
        result.cost += cost
        result.model_version = reply.model_version


_EMPTY_GROUNDING: dict[str, Any] = {"text": "", "chunks": [], "supports": [], "url_statuses": []}


def _grounded_parts(data: dict[str, Any]) -> dict[str, Any]:
    return {
        "text": str(data["text"]),
        "chunks": [(str(uri), str(title)) for uri, title in data.get("chunks", [])],
        "supports": [
            (str(text), [int(i) for i in indices]) for text, indices in data.get("supports", [])
        ],
        "url_statuses": [(str(url), str(status)) for url, status in data.get("url_statuses", [])],
    }


def gateway_from_settings() -> Gateway:
    """The production gateway: settings' keys and the Redis limiter shared by all workers.
    Build it inside the event loop that will use it."""
    return Gateway(
        limiter=RedisTokenBucket.from_url(settings.REDIS_URL), conf=GatewaySettings.from_django()
    )


async def run_bounded(coros: Iterable[Awaitable[T]], limit: int) -> list[T | Exception]:
    """Await `coros` with at most `limit` in flight; results in the input order.

    An exception is returned in its slot rather than cancelling the others (one item's failure
    is its own), except QuotaExhausted, which cancels the rest and is raised: no call can
    succeed until the quota resets, and the job system parks the job."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, not {limit}")
    semaphore = asyncio.Semaphore(limit)

    async def bounded(awaitable: Awaitable[T]) -> T | Exception:
        async with semaphore:
            try:
                return await awaitable
            except QuotaExhausted:
                raise
            except Exception as exc:  # handed back to the caller, in the item's slot
                return exc

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(bounded(c)) for c in coros]
    except BaseExceptionGroup as failed:
        quota = failed.subgroup(QuotaExhausted)
        if quota is not None:
            raise quota.exceptions[0] from None
        raise
    return [task.result() for task in tasks]
