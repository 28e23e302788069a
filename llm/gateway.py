"""One small gateway over both providers: structured output, validation with one repair,
retries owned here (the SDKs' own are off), a shared rate limit, the ledger and its cache.

Use one `Gateway` per event loop (a Celery task's chunk builds one, runs its calls with
`run_bounded`, then closes it): the HTTP and Redis clients it holds belong to that loop.

    async with gateway_from_settings() as gateway:
        result = await gateway.call_structured(model, prompt=[text, ImagePart(...)], ...)
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

import httpx
import openai
from asgiref.sync import sync_to_async
from django.conf import settings
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from pydantic import BaseModel, ValidationError

from .models import LedgerEntry, LLMModel, Outcome, Provider
from .ratelimit import Limits, RateLimiter, RedisTokenBucket

try:  # google-genai 3.x talks through httpx2 when it is installed, else httpx
    import httpx2

    _TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError, httpx2.TransportError)
    _TIMEOUTS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
except ImportError:  # pragma: no cover (depends on the installed set)
    _TRANSPORT_ERRORS = (httpx.TransportError,)
    _TIMEOUTS = (httpx.TimeoutException,)

log = logging.getLogger(__name__)

T = TypeVar("T")

REPAIR_PROMPT = (
    "Your previous reply did not validate against the required JSON schema.\n"
    "Validation errors:\n{errors}\n"
    "Reply again with the corrected JSON only: the same content, fixed to match the schema."
)
# An image costs about this many input tokens on Gemini; only the token bucket's estimate.
_IMAGE_TOKENS = 258
_MILLION = Decimal(1_000_000)


class GatewayError(Exception):
    """The gateway could not be used as configured (a missing key, an unknown provider)."""


class QuotaExhausted(GatewayError):  # noqa: N818 (the name says what the job system waits for)
    """The provider's per-day quota is spent: retrying now would only burn requests.
    The job system parks the job until the quota resets."""

    def __init__(self, model: str, quota_id: str, retry_delay: float | None) -> None:
        self.model = model
        self.quota_id = quota_id
        self.retry_delay = retry_delay
        super().__init__(f"daily quota exhausted for {model} ({quota_id})")


@dataclass(frozen=True)
class ImagePart:
    data: bytes
    mime_type: str


PromptPart = str | ImagePart


@dataclass(frozen=True)
class ModelConfig:
    """What a call needs of an `LLMModel`, detached from the database."""

    name: str
    provider: str
    model: str
    parameters: dict[str, Any] = field(default_factory=dict)
    price_input_per_million: Decimal = Decimal("0")
    price_output_per_million: Decimal = Decimal("0")
    requests_per_minute: int = 0
    tokens_per_minute: int = 0
    active: bool = True

    @classmethod
    def of(cls, model: LLMModel | ModelConfig) -> ModelConfig:
        if isinstance(model, ModelConfig):
            return model
        return cls(
            name=model.name,
            provider=model.provider,
            model=model.model,
            parameters=dict(model.parameters or {}),
            price_input_per_million=model.price_input_per_million,
            price_output_per_million=model.price_output_per_million,
            requests_per_minute=model.requests_per_minute,
            tokens_per_minute=model.tokens_per_minute,
            active=model.active,
        )

    @property
    def limits(self) -> Limits:
        return Limits(self.requests_per_minute, self.tokens_per_minute)

    def cost(self, tokens_in: int, tokens_out: int) -> Decimal:
        return (
            tokens_in * self.price_input_per_million + tokens_out * self.price_output_per_million
        ) / _MILLION


@dataclass(frozen=True)
class GatewaySettings:
    gemini_api_key: str = ""
    gemini_base_url: str | None = None
    openai_api_key: str = ""
    openai_base_url: str | None = None
    timeout_s: float = 120.0
    max_attempts: int = 5  # per request, through 5xx and timeouts
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 60.0
    max_rate_limit_waits: int = 10  # per-minute 429s waited out per request
    retry_delay_cap_s: float = 120.0

    @classmethod
    def from_django(cls) -> GatewaySettings:
        return cls(
            gemini_api_key=settings.GEMINI_API_KEY,
            gemini_base_url=settings.GEMINI_BASE_URL,
            openai_api_key=settings.OPENAI_API_KEY,
            openai_base_url=settings.OPENAI_BASE_URL,
            timeout_s=settings.LLM_TIMEOUT_SECONDS,
            max_attempts=settings.LLM_MAX_ATTEMPTS,
            backoff_base_s=settings.LLM_BACKOFF_BASE_MS / 1000,
            backoff_cap_s=settings.LLM_BACKOFF_CAP_SECONDS,
            max_rate_limit_waits=settings.LLM_MAX_RATE_LIMIT_WAITS,
            retry_delay_cap_s=settings.LLM_RETRY_DELAY_CAP_SECONDS,
        )


@dataclass
class CallResult:
    """The outcome of one logical call: `output` is set exactly when `ok`."""

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
    requests: int = 0  # HTTP requests sent (retries and the repair included)
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


GROUNDING_TOOLS = ("google_search", "url_context")


@dataclass(frozen=True)
class _Request:
    """One provider request: the conversation so far and what the answer must look like."""

    system: str
    prompt: tuple[PromptPart, ...]
    schema: type[BaseModel] | None  # None: free text (grounded or call_text)
    # Earlier turns of a repair: (invalid model text, the repair instruction).
    repair: tuple[str, str] | None = None
    tools: tuple[str, ...] = ()  # Gemini built-in tools (GROUNDING_TOOLS); never with a schema


@dataclass
class _Reply:
    text: str
    model_version: str
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    latency_ms: int = 0
    # A grounded call's metadata, as plain JSON (see _grounding); empty otherwise.
    grounding: dict[str, Any] = field(default_factory=dict)


class _Failure(Exception):
    """A provider request that failed, classified; the retry loop decides what follows."""

    def __init__(
        self, outcome: str, message: str, retry_delay: float | None = None, quota_id: str = ""
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.retry_delay = retry_delay
        self.quota_id = quota_id


# ---------------------------------------------------------------------------------------------
# The request hash: what makes two requests the same for the cache.


def request_hash(
    config: ModelConfig,
    *,
    system: str,
    prompt: Sequence[PromptPart],
    schema: type[BaseModel] | None,
    tools: Sequence[str] = (),
) -> str:
    """sha256 of a canonical JSON of everything the answer depends on; images by their hash."""
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
        "schema": _json_schema(schema) if schema is not None else None,
    }
    if tools:  # only here, so that the hashes of structured calls (the cache keys) stay put
        canonical["tools"] = list(tools)
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.cache
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A response model's JSON Schema, built once per class (pydantic builds it anew on every
    call, and each request needs it twice). Shared: readers must not change it."""
    return schema.model_json_schema()


def _active(model: LLMModel | ModelConfig) -> ModelConfig:
    config = ModelConfig.of(model)
    if not config.active:
        raise GatewayError(f"model {config.name!r} is switched off (LLMModel.active)")
    return config


def _ledger_row(
    config: ModelConfig,
    digest: str,
    *,
    stage: str,
    template_name: str,
    template_version: str,
    job_id: int | None,
) -> dict[str, Any]:
    """The fields every ledger row of one logical call shares."""
    return {
        "job_id": job_id,
        "stage": stage,
        "provider": config.provider,
        "model": config.model,
        "template_name": template_name,
        "template_version": template_version,
        "request_hash": digest,
    }


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


# ---------------------------------------------------------------------------------------------
# Providers: build the request, send it, turn errors into _Failure.


_RETRY_DELAY = re.compile(r"^\s*([0-9.]+)s\s*$")


def _gemini_rate_limit(details: Any) -> tuple[float | None, str]:
    """(retryDelay in seconds, quotaId) from a Gemini 429's error details."""
    delay: float | None = None
    quota_ids: list[str] = []
    error = details.get("error", {}) if isinstance(details, dict) else {}
    for detail in error.get("details") or []:
        kind = str(detail.get("@type", ""))
        if kind.endswith("google.rpc.RetryInfo"):
            match = _RETRY_DELAY.match(str(detail.get("retryDelay", "")))
            delay = float(match.group(1)) if match else None
        elif kind.endswith("google.rpc.QuotaFailure"):
            quota_ids += [str(v.get("quotaId", "")) for v in detail.get("violations") or []]
    per_day = [q for q in quota_ids if "PerDay" in q]
    return delay, (per_day[0] if per_day else ",".join(quota_ids))


def _status(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def _grounding(response: genai_types.GenerateContentResponse) -> dict[str, Any]:
    """The first candidate's grounding and URL context metadata as plain JSON, the form the
    ledger keeps (so that a cached answer carries its sources too)."""
    candidate = response.candidates[0] if response.candidates else None
    meta = candidate.grounding_metadata if candidate else None
    chunks = (
        [
            [(c.web.uri or "") if c.web else "", (c.web.title or "") if c.web else ""]
            for c in (meta.grounding_chunks or [])
        ]
        if meta
        else []
    )
    supports = (
        [
            [(s.segment.text or "") if s.segment else "", list(s.grounding_chunk_indices or [])]
            for s in (meta.grounding_supports or [])
        ]
        if meta
        else []
    )
    url_meta = candidate.url_context_metadata if candidate else None
    statuses = (
        [
            [u.retrieved_url or "", _status(u.url_retrieval_status)]
            for u in (url_meta.url_metadata or [])
        ]
        if url_meta
        else []
    )
    return {"chunks": chunks, "supports": supports, "url_statuses": statuses}


class _Gemini:
    def __init__(self, conf: GatewaySettings) -> None:
        if not conf.gemini_api_key:
            raise GatewayError("GEMINI_API_KEY is not set: no Gemini model can be called")
        self._client = genai.Client(
            api_key=conf.gemini_api_key,
            http_options=genai_types.HttpOptions(
                base_url=conf.gemini_base_url,
                api_version="v1beta",  # pinned: the SDK's default moved between releases
                timeout=int(conf.timeout_s * 1000),  # milliseconds
                retry_options=None,  # the gateway owns retries
            ),
        )

    @staticmethod
    def _contents(request: _Request) -> list[genai_types.Content]:
        parts = [
            genai_types.Part.from_bytes(data=p.data, mime_type=p.mime_type)
            if isinstance(p, ImagePart)
            else genai_types.Part.from_text(text=p)
            for p in request.prompt
        ]
        contents = [genai_types.Content(role="user", parts=parts)]
        if request.repair:
            invalid, instruction = request.repair
            contents.append(
                genai_types.Content(role="model", parts=[genai_types.Part.from_text(text=invalid)])
            )
            contents.append(
                genai_types.Content(
                    role="user", parts=[genai_types.Part.from_text(text=instruction)]
                )
            )
        return contents

    @staticmethod
    def _generation(config: ModelConfig, request: _Request) -> genai_types.GenerateContentConfig:
        # Gemini refuses a JSON response type together with tools: a request has one or the
        # other (structured calls a schema, grounded calls their tools and free text).
        if request.tools:
            output: dict[str, Any] = {
                "tools": [
                    genai_types.Tool(google_search=genai_types.GoogleSearch())
                    if tool == "google_search"
                    else genai_types.Tool(url_context=genai_types.UrlContext())
                    for tool in request.tools
                ]
            }
        elif request.schema is not None:
            output = {
                "response_mime_type": "application/json",
                "response_json_schema": _json_schema(request.schema),
            }
        else:
            output = {}  # free text (call_text)
        return genai_types.GenerateContentConfig(
            system_instruction=request.system or None,
            **output,
            # Built-in tools run on the server: nothing for the SDK to call automatically.
            automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
            **config.parameters,
        )

    async def send(self, config: ModelConfig, request: _Request) -> _Reply:
        generation = self._generation(config, request)
        try:
            response = await self._client.aio.models.generate_content(
                model=config.model, contents=self._contents(request), config=generation
            )
        except genai_errors.APIError as exc:
            raise self._failure(exc) from exc
        except _TIMEOUTS as exc:
            raise _Failure(Outcome.TIMEOUT, f"timed out: {exc!r}") from exc
        except _TRANSPORT_ERRORS as exc:
            raise _Failure(Outcome.SERVER_ERROR, f"connection failed: {exc!r}") from exc
        usage = response.usage_metadata
        # Thinking tokens are billed as output.
        tokens_out = (
            (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0) if usage else 0
        )
        return _Reply(
            text=response.text or "",
            model_version=response.model_version or "",
            tokens_in=(usage.prompt_token_count or 0) if usage else 0,
            tokens_out=tokens_out,
            tokens_cached=(usage.cached_content_token_count or 0) if usage else 0,
            grounding=_grounding(response) if request.tools else {},
        )

    @staticmethod
    def _failure(exc: genai_errors.APIError) -> _Failure:
        message = f"{exc.code} {exc.status}: {exc.message}"
        if exc.code == 429:
            delay, quota_id = _gemini_rate_limit(exc.details)
            outcome = Outcome.QUOTA_EXHAUSTED if "PerDay" in quota_id else Outcome.RATE_LIMITED
            return _Failure(outcome, message, retry_delay=delay, quota_id=quota_id)
        if exc.code in (408, 504):
            return _Failure(Outcome.TIMEOUT, message)
        if isinstance(exc, genai_errors.ServerError) or (exc.code or 0) >= 500:
            return _Failure(Outcome.SERVER_ERROR, message)
        return _Failure(Outcome.ERROR, message)

    async def aclose(self) -> None:
        await self._client.aio.aclose()


def _strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` on every object, which OpenAI's strict mode
    demands (pydantic leaves it out unless a model forbids extras)."""
    if isinstance(schema, dict):
        fixed = {key: _strict(value) for key, value in schema.items()}
        if fixed.get("type") == "object" and "properties" in fixed:
            fixed.setdefault("additionalProperties", False)
        return fixed
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


class _OpenAI:
    def __init__(self, conf: GatewaySettings) -> None:
        if not conf.openai_base_url and not conf.openai_api_key:
            raise GatewayError("OPENAI_BASE_URL or OPENAI_API_KEY must be set for openai models")
        self._client = openai.AsyncOpenAI(
            base_url=conf.openai_base_url,
            api_key=conf.openai_api_key or "unused",  # local vLLM or Ollama take any key
            timeout=conf.timeout_s,
            max_retries=0,  # the gateway owns retries
        )

    @staticmethod
    def _messages(request: _Request) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for part in request.prompt:
            if isinstance(part, ImagePart):
                url = f"data:{part.mime_type};base64,{base64.b64encode(part.data).decode()}"
                content.append({"type": "image_url", "image_url": {"url": url}})
            else:
                content.append({"type": "text", "text": part})
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.append({"role": "user", "content": content})
        if request.repair:
            invalid, instruction = request.repair
            messages.append({"role": "assistant", "content": invalid})
            messages.append({"role": "user", "content": instruction})
        return messages

    async def send(self, config: ModelConfig, request: _Request) -> _Reply:
        # Grounded calls are Gemini's only: here a request has a schema or is free text.
        structured: dict[str, Any] = {}
        if request.schema is not None:
            structured["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema.__name__,
                    "schema": _strict(_json_schema(request.schema)),
                    "strict": True,
                },
            }
        try:
            response = await self._client.chat.completions.create(
                model=config.model,
                messages=self._messages(request),
                **structured,
                **config.parameters,
            )
        except openai.APITimeoutError as exc:
            raise _Failure(Outcome.TIMEOUT, f"timed out: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise _Failure(Outcome.SERVER_ERROR, f"connection failed: {exc}") from exc
        except openai.APIStatusError as exc:
            raise self._failure(exc) from exc
        usage = response.usage
        cached = 0
        if usage and usage.prompt_tokens_details:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        choice = response.choices[0] if response.choices else None
        return _Reply(
            text=(choice.message.content or "") if choice else "",
            model_version=response.model or "",
            tokens_in=usage.prompt_tokens if usage else 0,
            tokens_out=usage.completion_tokens if usage else 0,
            tokens_cached=cached,
        )

    @staticmethod
    def _failure(exc: openai.APIStatusError) -> _Failure:
        message = f"{exc.status_code}: {exc.message}"
        if exc.status_code == 429:
            body = exc.body if isinstance(exc.body, dict) else {}
            # OpenAI's own convention for a spent quota (not a per-minute limit).
            if body.get("code") == "insufficient_quota":
                return _Failure(Outcome.QUOTA_EXHAUSTED, message, quota_id="insufficient_quota")
            retry_after = exc.response.headers.get("retry-after")
            try:
                delay = float(retry_after) if retry_after else None
            except ValueError:
                delay = None  # an HTTP date: fall back to backoff
            return _Failure(Outcome.RATE_LIMITED, message, retry_delay=delay)
        if exc.status_code in (408, 504):
            return _Failure(Outcome.TIMEOUT, message)
        if exc.status_code >= 500:
            return _Failure(Outcome.SERVER_ERROR, message)
        return _Failure(Outcome.ERROR, message)

    async def aclose(self) -> None:
        await self._client.close()


# ---------------------------------------------------------------------------------------------
# The ledger (the database is touched only here, from the loop through sync_to_async).


def _cached_answer(request_hash_: str) -> LedgerEntry | None:
    return (
        LedgerEntry.objects.filter(request_hash=request_hash_, outcome=Outcome.OK)
        .order_by("-created_at", "-pk")
        .first()
    )


def _write_ledger(row: LedgerEntry) -> int:
    row.save(force_insert=True)
    return row.pk


# The key of the job item whose handler makes the call: llm/jobs.py sets it around each handler,
# and the ledger rows of its calls carry it (the console's item page lists them).
ledger_item: ContextVar[str] = ContextVar("ledger_item", default="")


def prompt_text(request: _Request) -> str:
    """A request as the ledger keeps it for admins to read: the system text, the user's parts
    (an image as one line with its type, size and sha256, not its bytes), a repair's turns,
    and the tools or schema asked for."""
    lines = [f"[system]\n{request.system}"] if request.system else []
    lines.append("[user]")
    for part in request.prompt:
        if isinstance(part, ImagePart):
            digest = hashlib.sha256(part.data).hexdigest()
            lines.append(f"[image {part.mime_type}, {len(part.data):,} bytes, sha256 {digest}]")
        else:
            lines.append(part)
    if request.repair:
        invalid, instruction = request.repair
        lines += ["[model]", invalid, "[user]", instruction]
    if request.tools:
        lines.append(f"[tools: {', '.join(request.tools)}]")
    if request.schema is not None:
        lines.append(f"[response schema: {request.schema.__name__}]")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


class Gateway:
    def __init__(self, *, limiter: RateLimiter, conf: GatewaySettings | None = None) -> None:
        self.limiter = limiter
        self.conf = conf or GatewaySettings.from_django()
        self._providers: dict[str, Any] = {}

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

    def _provider(self, name: str) -> Any:
        if name not in self._providers:
            if name == Provider.GEMINI:
                self._providers[name] = _Gemini(self.conf)
            elif name == Provider.OPENAI:
                self._providers[name] = _OpenAI(self.conf)
            elif name == Provider.DEMO:
                from .demo_provider import DemoProvider  # it imports this module

                self._providers[name] = DemoProvider(self.conf)
            else:
                raise GatewayError(f"unknown provider {name!r}: expected gemini or openai")
        return self._providers[name]

    async def call_structured(
        self,
        model: LLMModel | ModelConfig,
        *,
        prompt: Sequence[PromptPart],
        system: str = "",
        schema: type[BaseModel],
        stage: str,
        template_name: str = "",
        template_version: str = "",
        fresh: bool = False,
        job_id: int | None = None,
    ) -> CallResult:
        """Ask `model` for an answer that validates against `schema`.

        Raises QuotaExhausted when the daily quota is spent; every other failure comes back as
        a CallResult whose outcome says what happened (never `ok` without a valid output)."""
        config = _active(model)
        request = _Request(system=system, prompt=tuple(prompt), schema=schema)
        digest = request_hash(config, system=system, prompt=prompt, schema=schema)
        if not fresh:
            hit = await sync_to_async(_cached_answer)(digest)
            if hit is not None:
                output, errors = _validation_errors(schema, hit.raw_output)
                if output is not None:
                    return CallResult(
                        outcome=Outcome.OK,
                        output=output,
                        raw_text=hit.raw_output,
                        cached=True,
                        request_hash=digest,
                        model_version=hit.model_version,
                    )
                log.warning(
                    "cached answer %s no longer validates: calling again (%s)", hit.pk, errors
                )

        result = CallResult(outcome=Outcome.ERROR, request_hash=digest)
        row = _ledger_row(
            config,
            digest,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            job_id=job_id,
        )
        reply = await self._send(config, request, result, row, is_repair=False)
        if reply is None:
            return result
        output, errors = _validation_errors(schema, reply.text)
        if output is None:
            # One repair: the invalid text goes back with the errors; its answer decides.
            await self._record(result, row, reply, config, Outcome.INVALID_OUTPUT, errors)
            result.raw_text, result.error = reply.text, errors  # kept if the repair fails
            repair = _Request(
                system=system,
                prompt=tuple(prompt),
                schema=schema,
                repair=(reply.text, REPAIR_PROMPT.format(errors=errors)),
            )
            reply = await self._send(config, repair, result, row, is_repair=True)
            if reply is None:
                return result
            output, errors = _validation_errors(schema, reply.text)
        outcome = Outcome.OK if output is not None else Outcome.INVALID_OUTPUT
        await self._record(result, row, reply, config, outcome, errors)
        result.outcome, result.output, result.raw_text, result.error = (
            outcome,
            output,
            reply.text,
            errors,
        )
        return result

    async def call_grounded(
        self,
        model: LLMModel | ModelConfig,
        *,
        prompt: Sequence[PromptPart],
        system: str = "",
        tools: Sequence[str] = ("google_search",),
        stage: str,
        template_name: str = "",
        template_version: str = "",
        fresh: bool = False,
        job_id: int | None = None,
    ) -> GroundedResult:
        """A free-text Gemini answer using built-in tools (Google Search, URL context), with
        its grounding metadata. Same retries, rate limit, ledger and cache as call_structured;
        no repair, as free text has nothing to validate. The ledger's raw output is the JSON
        of {text, chunks, supports, url_statuses}, which is also what the cache answers from.

        Raises QuotaExhausted like call_structured; GatewayError for a non-Gemini model."""
        config = _active(model)
        # The demo provider makes up grounding metadata of the same shape (make run).
        if config.provider not in (Provider.GEMINI, Provider.DEMO):
            raise GatewayError(f"grounded calls need a Gemini model, not {config.provider!r}")
        unknown = [t for t in tools if t not in GROUNDING_TOOLS]
        if not tools or unknown:
            raise GatewayError(f"tools must be among {GROUNDING_TOOLS}, not {list(tools)}")
        request = _Request(system=system, prompt=tuple(prompt), schema=None, tools=tuple(tools))
        digest = request_hash(config, system=system, prompt=prompt, schema=None, tools=tools)
        if not fresh:
            hit = await sync_to_async(_cached_answer)(digest)
            if hit is not None:
                try:
                    return _grounded(
                        json.loads(hit.raw_output),
                        CallResult(
                            outcome=Outcome.OK,
                            raw_text=hit.raw_output,
                            cached=True,
                            request_hash=digest,
                            model_version=hit.model_version,
                        ),
                    )
                except (ValueError, KeyError, TypeError):
                    log.warning("cached grounded answer %s is unreadable: calling again", hit.pk)

        result = CallResult(outcome=Outcome.ERROR, request_hash=digest)
        row = _ledger_row(
            config,
            digest,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            job_id=job_id,
        )
        reply = await self._send(config, request, result, row, is_repair=False)
        if reply is None:
            return GroundedResult("", [], [], [], result)
        blob = json.dumps({"text": reply.text, **reply.grounding}, ensure_ascii=False)
        answered = _Reply(
            blob,
            reply.model_version,
            reply.tokens_in,
            reply.tokens_out,
            reply.tokens_cached,
            reply.latency_ms,
        )
        await self._record(result, row, answered, config, Outcome.OK, "")
        result.outcome, result.raw_text = Outcome.OK, blob
        return _grounded(json.loads(blob), result)

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
        model writes when it answers a question. Same retries, rate limit, ledger and cache as
        call_structured; `raw_text` is the answer. An empty answer is not `ok` (outcome
        invalid_output): there is nothing to keep.

        Raises QuotaExhausted like call_structured."""
        config = _active(model)
        request = _Request(system=system, prompt=tuple(prompt), schema=None)
        digest = request_hash(config, system=system, prompt=prompt, schema=None)
        hit = None if fresh else await sync_to_async(_cached_answer)(digest)
        if hit is not None and hit.raw_output.strip():
            return CallResult(
                outcome=Outcome.OK,
                raw_text=hit.raw_output,
                cached=True,
                request_hash=digest,
                model_version=hit.model_version,
            )
        result = CallResult(outcome=Outcome.ERROR, request_hash=digest)
        row = _ledger_row(
            config,
            digest,
            stage=stage,
            template_name=template_name,
            template_version=template_version,
            job_id=job_id,
        )
        reply = await self._send(config, request, result, row, is_repair=False)
        if reply is None:
            return result
        empty = not reply.text.strip()
        outcome = Outcome.INVALID_OUTPUT if empty else Outcome.OK
        errors = "the model answered with no text" if empty else ""
        await self._record(result, row, reply, config, outcome, errors)
        result.outcome, result.raw_text, result.error = outcome, reply.text, errors
        return result

    async def _send(
        self,
        config: ModelConfig,
        request: _Request,
        result: CallResult,
        row: dict[str, Any],
        *,
        is_repair: bool,
    ) -> _Reply | None:
        """One request through the retry loop; None when it failed for good (`result` says
        why). Failed attempts are recorded here, the answered one by the caller."""
        provider = self._provider(config.provider)
        tokens = _estimated_tokens(request.prompt, request.system)
        failures = rate_waits = 0
        row["is_repair"] = is_repair
        row["prompt"], row["item_key"] = prompt_text(request), ledger_item.get()
        while True:
            await self.limiter.acquire(config.name, config.limits, tokens)
            started = time.perf_counter()
            result.requests += 1
            row["attempt"] = failures + rate_waits + 1
            try:
                reply = await provider.send(config, request)
            except _Failure as failure:
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
            reply.latency_ms = int((time.perf_counter() - started) * 1000)
            return reply

    def _rate_limit_pause(self, failure: _Failure, waits: int) -> float:
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
    def _give_up(result: CallResult, failure: _Failure) -> None:
        result.outcome = failure.outcome
        result.error = f"{failure}\n{result.error}" if result.error else str(failure)

    async def _record_failure(
        self, result: CallResult, row: dict[str, Any], failure: _Failure, latency: float
    ) -> None:
        entry = LedgerEntry(
            **row, outcome=failure.outcome, error=str(failure), latency_ms=int(latency * 1000)
        )
        result.ledger_ids.append(await sync_to_async(_write_ledger)(entry))

    async def _record(
        self,
        result: CallResult,
        row: dict[str, Any],
        reply: _Reply,
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
            raw_output=reply.text,
            error=errors,
        )
        result.ledger_ids.append(await sync_to_async(_write_ledger)(entry))
        result.tokens_in += reply.tokens_in
        result.tokens_out += reply.tokens_out
        result.tokens_cached += reply.tokens_cached
        result.cost += cost
        result.model_version = reply.model_version


def _grounded(data: dict[str, Any], call: CallResult) -> GroundedResult:
    return GroundedResult(
        text=str(data["text"]),
        chunks=[(str(uri), str(title)) for uri, title in data.get("chunks", [])],
        supports=[
            (str(text), [int(i) for i in indices]) for text, indices in data.get("supports", [])
        ],
        url_statuses=[(str(url), str(status)) for url, status in data.get("url_statuses", [])],
        call=call,
    )


def gateway_from_settings() -> Gateway:
    """The production gateway: settings' keys and the Redis limiter shared by all workers.
    Build it inside the event loop that will use it."""
    return Gateway(
        limiter=RedisTokenBucket.from_url(settings.REDIS_URL), conf=GatewaySettings.from_django()
    )


async def call_structured(model: LLMModel | ModelConfig, **kwargs: Any) -> CallResult:
    """One call through a gateway of its own (convenient for a single call; a chunk of many
    calls should share one `Gateway`)."""
    async with gateway_from_settings() as gateway:
        return await gateway.call_structured(model, **kwargs)


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
