"""The providers behind the gateway: each turns a `Request` into its client's call, sends it,
and gives back a `Reply` or raises a classified `Failure`. The gateway (llm/gateway.py) owns
everything around that (cache, retries, rate limit, validation, repair, ledger).

A registry keyed by the `LLMModel.provider` name says which class serves a model. Adding a
provider is a class with `send` and `aclose` (and `supports_tools` if it can run Gemini's
built-in tools), registered under its name, plus that name in `llm.models.Provider`:

    @register_provider("demo")
    class Demo:
        supports_tools = True

        def __init__(self, conf: GatewaySettings) -> None: ...
        async def send(self, config: ModelConfig, request: Request) -> Reply: ...
        async def aclose(self) -> None: ...
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import re
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

import certifi
import httpx
import openai
from django.conf import settings
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types
from pydantic import BaseModel

from .models import LLMModel, Outcome, Provider
from .parameters import parameter_problems
from .ratelimit import Limits
from .schemas import IdSets, response_schema

# google-genai 3.x sends async requests through aiohttp whenever it is installed (inspect-ai
# brings it), else through httpx2 or httpx: the errors of each that is here are classified.
TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError,)
# asyncio's timeout (the builtin TimeoutError) is how aiohttp's total timeout surfaces.
TIMEOUTS: tuple[type[Exception], ...] = (httpx.TimeoutException, TimeoutError)
try:
    import httpx2

    TRANSPORT_ERRORS += (httpx2.TransportError,)
    TIMEOUTS += (httpx2.TimeoutException,)
except ImportError:  # pragma: no cover (depends on the installed set)
    pass
try:
    import aiohttp

    TRANSPORT_ERRORS += (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError)
    TIMEOUTS += (aiohttp.ServerTimeoutError,)
except ImportError:  # pragma: no cover (depends on the installed set)
    pass

_MILLION = Decimal(1_000_000)
GROUNDING_TOOLS = ("google_search", "url_context")


class GatewayError(Exception):
    """The gateway could not be used as configured (a missing key, an unknown provider)."""


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

    def __post_init__(self) -> None:
        # The parameters go into the client as keyword arguments: only generation settings
        # (llm/parameters.py), whatever wrote the row, so the endpoint is the environment's.
        problems = parameter_problems(self.provider, self.parameters)
        if problems:
            raise GatewayError(f"model {self.name!r}: " + " ".join(problems))

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
    # Repair turns per structured call, for answers that fail the schema or the caller's check.
    max_repairs: int = 2

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
            max_repairs=settings.LLM_MAX_REPAIRS,
        )


@dataclass(frozen=True)
class Request:
    """One provider request: the conversation so far and what the answer must look like."""

    system: str
    prompt: tuple[PromptPart, ...]
    schema: type[BaseModel] | None  # None: free text (grounded or call_text)
    # The turns of the repairs so far, in order: (the model's rejected text, our instruction).
    repairs: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] = ()  # Gemini built-in tools (GROUNDING_TOOLS); never with a schema
    # The ids the answer may name, by set (llm/schemas.py): they go into the schema sent.
    ids: IdSets = ()

    @functools.cached_property
    def response_schema(self) -> dict[str, Any] | None:
        """The JSON Schema sent (and hashed): the schema's own, with this call's ids. Built
        once per request (a repair is a request of its own); shared: never change it."""
        if self.schema is None:
            return None
        return response_schema(self.schema, self.ids)


@dataclass
class Reply:
    text: str
    model_version: str
    tokens_in: int
    tokens_out: int
    tokens_cached: int
    latency_ms: int = 0
    # A grounded call's metadata, as plain JSON (see _grounding); empty otherwise.
    grounding: dict[str, Any] = field(default_factory=dict)


class Failure(Exception):
    """A provider request that failed, classified; the retry loop decides what follows."""

    def __init__(
        self, outcome: str, message: str, retry_delay: float | None = None, quota_id: str = ""
    ) -> None:
        super().__init__(message)
        self.outcome = outcome
        self.retry_delay = retry_delay
        self.quota_id = quota_id


class ProviderClient(Protocol):
    supports_tools: bool

    async def send(self, config: ModelConfig, request: Request) -> Reply: ...

    async def aclose(self) -> None: ...


_registry: dict[str, Callable[[GatewaySettings], ProviderClient]] = {}


def register_provider(name: str) -> Callable[[type], type]:
    """Class decorator: the class serves the models whose `provider` is `name`."""

    def register(cls: type) -> type:
        _registry[name] = cls
        return cls

    return register


def provider_class(name: str) -> Callable[[GatewaySettings], ProviderClient]:
    try:
        return _registry[name]
    except KeyError:
        known = ", ".join(sorted(_registry))
        raise GatewayError(f"unknown provider {name!r}: expected one of {known}") from None


# ---------------------------------------------------------------------------------------------
# Gemini (google-genai).


_GEMINI_URL = "https://generativelanguage.googleapis.com/"  # the SDK's own default
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


@register_provider(Provider.GEMINI)
class Gemini:
    supports_tools = True

    def __init__(self, conf: GatewaySettings) -> None:
        if not conf.gemini_api_key:
            raise GatewayError("GEMINI_API_KEY is not set: no Gemini model can be called")
        self._conf = conf
        self._genai: genai.Client | None = None
        self._session: Any = None  # aiohttp.ClientSession, made with the client
        self._generations: dict[tuple[Any, ...], genai_types.GenerateContentConfig] = {}

    @property
    def _client(self) -> genai.Client:
        """The SDK's client, made at first use: inside the event loop that uses it, which
        its aiohttp session belongs to (the gateway is made per loop)."""
        if self._genai is None:
            self._session = _aiohttp_session(self._conf.gemini_base_url)
            self._genai = genai.Client(
                api_key=self._conf.gemini_api_key,
                http_options=genai_types.HttpOptions(
                    base_url=self._conf.gemini_base_url,
                    api_version="v1beta",  # pinned: the SDK's default moved between releases
                    timeout=int(self._conf.timeout_s * 1000),  # milliseconds
                    # The gateway owns retries. Not None: without retry options the SDK's
                    # aiohttp path retries a dropped connection itself after sleeping 1-10 s,
                    # unseen by the ledger; one attempt of its own turns that off.
                    retry_options=genai_types.HttpRetryOptions(attempts=1),
                    aiohttp_client=self._session,
                    # The SDK would build three TLS contexts per client (per chunk), loading
                    # the CA bundle each time: about 70 ms of CPU. One per process instead.
                    client_args={"verify": _tls_context()},
                    async_client_args={"verify": _tls_context(), "ssl": _tls_context()},
                ),
            )
        return self._genai

    @staticmethod
    def _contents(request: Request) -> list[genai_types.Content]:
        parts = [
            genai_types.Part.from_bytes(data=p.data, mime_type=p.mime_type)
            if isinstance(p, ImagePart)
            else genai_types.Part.from_text(text=p)
            for p in request.prompt
        ]
        contents = [genai_types.Content(role="user", parts=parts)]
        for rejected, instruction in request.repairs:
            contents.append(
                genai_types.Content(role="model", parts=[genai_types.Part.from_text(text=rejected)])
            )
            contents.append(
                genai_types.Content(
                    role="user", parts=[genai_types.Part.from_text(text=instruction)]
                )
            )
        return contents

    @staticmethod
    def _generation(
        config: ModelConfig, request: Request, *, with_schema: bool = True
    ) -> genai_types.GenerateContentConfig:
        """The request's config; `with_schema=False` leaves its response schema out (the
        config kept for requests with ids of their own, which put theirs into a copy)."""
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
                "response_json_schema": request.response_schema if with_schema else None,
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

    def _generation_for(
        self, config: ModelConfig, request: Request
    ) -> genai_types.GenerateContentConfig:
        """_generation, built once per kind of request: the pydantic config costs about as
        much CPU to build as the rest of a call's own work, and the SDK only reads it. A
        request with ids of its own (llm/schemas.py) gets a copy with its schema put in: the
        kept config holds no call's schema, so nothing here grows with the calls."""
        key = (
            config.model,
            json.dumps(config.parameters, sort_keys=True),
            request.system,
            request.schema,
            request.tools,
        )
        per_call = bool(request.ids)
        generation = self._generations.get(key)
        if generation is None:
            generation = self._generations[key] = self._generation(
                config, request, with_schema=not per_call
            )
        if per_call:
            return generation.model_copy(update={"response_json_schema": request.response_schema})
        return generation

    async def send(self, config: ModelConfig, request: Request) -> Reply:
        generation = self._generation_for(config, request)
        try:
            response = await self._client.aio.models.generate_content(
                model=config.model, contents=self._contents(request), config=generation
            )
        except genai_errors.APIError as exc:
            raise self._failure(exc) from exc
        except TIMEOUTS as exc:
            raise Failure(Outcome.TIMEOUT, f"timed out: {exc!r}") from exc
        except TRANSPORT_ERRORS as exc:
            raise Failure(Outcome.SERVER_ERROR, f"connection failed: {exc!r}") from exc
        usage = response.usage_metadata
        # Thinking tokens are billed as output.
        tokens_out = (
            (usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0) if usage else 0
        )
        return Reply(
            text=response.text or "",
            model_version=response.model_version or "",
            tokens_in=(usage.prompt_token_count or 0) if usage else 0,
            tokens_out=tokens_out,
            tokens_cached=(usage.cached_content_token_count or 0) if usage else 0,
            grounding=_grounding(response) if request.tools else {},
        )

    @staticmethod
    def _failure(exc: genai_errors.APIError) -> Failure:
        message = f"{exc.code} {exc.status}: {exc.message}"
        if exc.code == 429:
            delay, quota_id = _gemini_rate_limit(exc.details)
            outcome = Outcome.QUOTA_EXHAUSTED if "PerDay" in quota_id else Outcome.RATE_LIMITED
            return Failure(outcome, message, retry_delay=delay, quota_id=quota_id)
        if exc.code in (408, 504):
            return Failure(Outcome.TIMEOUT, message)
        if isinstance(exc, genai_errors.ServerError) or (exc.code or 0) >= 500:
            return Failure(Outcome.SERVER_ERROR, message)
        return Failure(Outcome.ERROR, message)

    async def aclose(self) -> None:
        if self._genai is None:
            return  # never used: nothing was opened
        await self._genai.aio.aclose()
        if self._session is not None:
            await self._session.close()  # the SDK leaves a session it was given open
        self._genai = self._session = None


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The TLS context google-genai makes for each client (the same CA bundle: SSL_CERT_FILE,
    else certifi's, and SSL_CERT_DIR), made once per process and shared by every client."""
    return ssl.create_default_context(
        cafile=os.environ.get("SSL_CERT_FILE", certifi.where()),
        capath=os.environ.get("SSL_CERT_DIR"),
    )


def _aiohttp_session(base_url: str | None) -> Any:
    """The aiohttp session google-genai would make for itself (no limit on connections, its
    4 MiB read buffer), but with `trust_env` off; None without aiohttp (the SDK then uses httpx).

    With `trust_env` on, aiohttp looks for ~/.netrc and reads the proxy variables in a worker
    thread on every request: two thread hops a call, each waiting for the GIL, which cost the
    bare client a third of its rate at 64 calls in flight (bench/llm_throughput.py). The proxy
    the environment names for the API's host (HTTPS_PROXY, NO_PROXY, ...) is read here once
    instead, so a worker behind a proxy still goes through it; ~/.netrc is not read (Gemini
    takes its key in a header, never basic auth)."""
    try:
        import aiohttp
        from aiohttp.helpers import get_env_proxy_for_url
        from yarl import URL
    except ImportError:  # pragma: no cover (depends on the installed set)
        return None
    proxy: Any = None
    proxy_auth: Any = None
    with contextlib.suppress(LookupError):
        proxy, proxy_auth = get_env_proxy_for_url(URL(base_url or _GEMINI_URL))
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        trust_env=False,
        proxy=proxy,
        proxy_auth=proxy_auth,
        read_bufsize=2**22,
    )


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible servers (vLLM, Ollama, hosted).


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


@register_provider(Provider.OPENAI)
class OpenAI:
    supports_tools = False  # grounded calls are Gemini's

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
    def _messages(request: Request) -> list[dict[str, Any]]:
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
        for rejected, instruction in request.repairs:
            messages.append({"role": "assistant", "content": rejected})
            messages.append({"role": "user", "content": instruction})
        return messages

    async def send(self, config: ModelConfig, request: Request) -> Reply:
        structured: dict[str, Any] = {}
        if request.schema is not None:
            structured["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema.__name__,
                    "schema": _strict(request.response_schema),
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
            raise Failure(Outcome.TIMEOUT, f"timed out: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise Failure(Outcome.SERVER_ERROR, f"connection failed: {exc}") from exc
        except openai.APIStatusError as exc:
            raise self._failure(exc) from exc
        usage = response.usage
        cached = 0
        if usage and usage.prompt_tokens_details:
            cached = usage.prompt_tokens_details.cached_tokens or 0
        choice = response.choices[0] if response.choices else None
        return Reply(
            text=(choice.message.content or "") if choice else "",
            model_version=response.model or "",
            tokens_in=usage.prompt_tokens if usage else 0,
            tokens_out=usage.completion_tokens if usage else 0,
            tokens_cached=cached,
        )

    @staticmethod
    def _failure(exc: openai.APIStatusError) -> Failure:
        message = f"{exc.status_code}: {exc.message}"
        if exc.status_code == 429:
            body = exc.body if isinstance(exc.body, dict) else {}
            # OpenAI's own convention for a spent quota (not a per-minute limit).
            if body.get("code") == "insufficient_quota":
                return Failure(Outcome.QUOTA_EXHAUSTED, message, quota_id="insufficient_quota")
            retry_after = exc.response.headers.get("retry-after")
            try:
                delay = float(retry_after) if retry_after else None
            except ValueError:
                delay = None  # an HTTP date: fall back to backoff
            return Failure(Outcome.RATE_LIMITED, message, retry_delay=delay)
        if exc.status_code in (408, 504):
            return Failure(Outcome.TIMEOUT, message)
        if exc.status_code >= 500:
            return Failure(Outcome.SERVER_ERROR, message)
        return Failure(Outcome.ERROR, message)

    async def aclose(self) -> None:
        await self._client.close()
