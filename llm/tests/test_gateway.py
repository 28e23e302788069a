"""The gateway with the real clients (google-genai, openai) against the fake servers."""

from __future__ import annotations

import base64
import json
import time
from decimal import Decimal

import pytest
import redis
from asgiref.sync import sync_to_async
from django.db import connections
from pydantic import BaseModel

from llm.gateway import (
    GatewayError,
    ImagePart,
    ModelConfig,
    QuotaExhausted,
    _json_schema,
    gateway_from_settings,
    request_hash,
)
from llm.models import LedgerEntry, LLMModel, Outcome
from tests.fake_llm import (
    GEMINI_MODEL_VERSION,
    OPENAI_KEY,
    OPENAI_MODEL_VERSION,
    Reply,
)

from .conftest import GEMINI, MODELS, QWEN, Harness, run_async

pytestmark = pytest.mark.django_db(transaction=True)

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
VALID = '{"questions": ["What did the builders of this bridge have to overcome?"]}'


class Candidates(BaseModel):
    questions: list[str]


def ask(harness: Harness, model: ModelConfig, **kwargs) -> object:
    kwargs.setdefault(
        "prompt", ["Propose questions about this image.", ImagePart(PNG, "image/png")]
    )
    kwargs.setdefault("system", "You write benchmark questions.")
    kwargs.setdefault("schema", Candidates)
    kwargs.setdefault("stage", "generate")
    kwargs.setdefault("template_name", "generate_candidates")
    kwargs.setdefault("template_version", "3")
    return harness.call(model, **kwargs)


def test_gemini_structured_output_with_the_image_inline(harness):
    harness.fake.default = Reply(
        text=VALID, prompt_tokens=1200, output_tokens=80, thoughts_tokens=20, cached_tokens=1000
    )

    result = ask(harness, GEMINI, job_id=7)

    assert result.ok and not result.cached
    assert result.output == Candidates.model_validate_json(VALID)
    (sent,) = harness.fake.requests
    assert sent.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == "fake-gemini-key"
    parts = sent.body["contents"][0]["parts"]
    assert parts[0] == {"text": "Propose questions about this image."}
    # google-genai 3.6.1 writes the inline part's mime type in snake case and its data in
    # URL-safe base64 without padding.
    inline = parts[1]["inlineData"]
    assert base64.urlsafe_b64decode(inline["data"] + "=" * (-len(inline["data"]) % 4)) == PNG
    assert (inline.get("mimeType") or inline.get("mime_type")) == "image/png"
    assert sent.body["systemInstruction"]["parts"] == [{"text": "You write benchmark questions."}]
    config = sent.body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == Candidates.model_json_schema()
    assert config["temperature"] == 0.2
    # The schema is built once per class and shared: sending it must not have changed it.
    assert _json_schema(Candidates) == Candidates.model_json_schema()

    row = LedgerEntry.objects.get()
    assert (row.outcome, row.provider, row.model, row.model_version) == (
        Outcome.OK,
        "gemini",
        "gemini-2.5-flash",
        GEMINI_MODEL_VERSION,
    )
    assert (row.tokens_in, row.tokens_out, row.tokens_cached) == (1200, 100, 1000)
    # 1200 x 1.25 + 100 x 10 per million (thinking tokens are billed as output).
    assert row.cost == Decimal("0.0025") == result.cost
    assert (row.stage, row.template_name, row.template_version, row.job_id) == (
        "generate",
        "generate_candidates",
        "3",
        7,
    )
    assert row.request_hash == result.request_hash and len(row.request_hash) == 64
    assert row.raw_output == VALID and row.latency_ms >= 0 and not row.is_repair


def test_openai_compatible_structured_output_with_the_image_as_a_data_url(harness):
    harness.fake.default = Reply(text=VALID, prompt_tokens=900, output_tokens=50)

    result = ask(harness, QWEN)

    assert result.ok and result.output.questions
    (sent,) = harness.fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert sent.body["model"] == "Qwen/Qwen3-VL-8B-Instruct"
    assert sent.body["temperature"] == 0.0
    system, user = sent.body["messages"]
    assert system == {"role": "system", "content": "You write benchmark questions."}
    text, image = user["content"]
    assert text == {"type": "text", "text": "Propose questions about this image."}
    assert image["type"] == "image_url"
    assert image["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    response_format = sent.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Candidates"
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert schema["additionalProperties"] is False  # strict mode demands it
    assert schema["properties"] == Candidates.model_json_schema()["properties"]

    row = LedgerEntry.objects.get()
    assert (row.outcome, row.model_version, row.tokens_in, row.tokens_out) == (
        Outcome.OK,
        OPENAI_MODEL_VERSION,
        900,
        50,
    )
    assert row.cost == Decimal("0.00055")  # 900 x 0.5 + 50 x 2 per million


def test_an_admin_configured_model_row_is_accepted(harness):
    model = LLMModel.objects.create(
        name="flash",
        provider="gemini",
        model="gemini-2.5-flash",
        parameters={"temperature": 1},
        price_input_per_million=Decimal("0.30"),
        price_output_per_million=Decimal("2.50"),
    )
    harness.fake.default = Reply(text=VALID, prompt_tokens=1000, output_tokens=1000)

    result = ask(harness, model)

    assert result.ok
    assert harness.fake.requests[0].body["generationConfig"]["temperature"] == 1
    assert LedgerEntry.objects.get().cost == Decimal("0.0028")

    model.active = False
    with pytest.raises(GatewayError, match="switched off"):
        ask(harness, model, fresh=True)
    assert len(harness.fake.requests) == 1


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_invalid_output_gets_one_repair(harness, provider):
    harness.fake.queue(Reply(text='{"questions": "not a list"'), Reply(text=VALID))

    result = ask(harness, MODELS[provider])

    assert result.ok and result.output == Candidates.model_validate_json(VALID)
    first, repair = harness.fake.requests
    if provider == "gemini":
        turns = repair.body["contents"]
        assert [turn["role"] for turn in turns] == ["user", "model", "user"]
        assert turns[0] == first.body["contents"][0]
        assert turns[1]["parts"] == [{"text": '{"questions": "not a list"'}]
        instruction = turns[2]["parts"][0]["text"]
    else:
        messages = repair.body["messages"]
        assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
        assert messages[2]["content"] == '{"questions": "not a list"'
        instruction = messages[3]["content"]
    assert "did not validate" in instruction and "questions" in instruction

    rows = list(LedgerEntry.objects.order_by("pk"))
    assert [(r.outcome, r.is_repair) for r in rows] == [
        (Outcome.INVALID_OUTPUT, False),
        (Outcome.OK, True),
    ]
    assert rows[0].raw_output == '{"questions": "not a list"' and rows[0].error
    # Both rows are the same logical request: the cache finds the repaired answer.
    assert {r.request_hash for r in rows} == {result.request_hash}
    assert result.tokens_in == 240 and result.requests == 2


def test_invalid_past_the_repairs_fails_with_the_raw_text_kept(harness):
    harness.fake.queue(
        Reply(text="Sure! Here are questions: 1. Why?"),
        Reply(text='{"questions": [1, 2]'),
        Reply(text='{"questions": 7}'),
    )

    result = ask(harness, GEMINI)

    assert not result.ok and result.outcome == Outcome.INVALID_OUTPUT
    assert result.output is None
    assert result.raw_text == '{"questions": 7}'
    assert "validation error" in result.error
    assert len(harness.fake.requests) == 3  # two repairs (GatewaySettings.max_repairs), no more
    # Each repair carries the whole conversation: every rejected answer and its problems.
    assert [t["role"] for t in harness.fake.requests[2].body["contents"]] == [
        "user",
        "model",
        "user",
        "model",
        "user",
    ]
    rows = LedgerEntry.objects.order_by("pk")
    assert [r.outcome for r in rows] == [Outcome.INVALID_OUTPUT] * 3
    assert [r.is_repair for r in rows] == [False, True, True]
    assert rows[0].raw_output == "Sure! Here are questions: 1. Why?"
    # A failed answer is never served from the cache.
    harness.fake.default = Reply(text=VALID)
    assert ask(harness, GEMINI).ok and len(harness.fake.requests) == 4


class Numbered(BaseModel):
    ids: list[int]


def _distinct_ids(output: BaseModel) -> list[str]:
    assert isinstance(output, Numbered)
    return [
        f"ids[{i}]: {value} is repeated"
        for i, value in enumerate(output.ids)
        if value in output.ids[:i]
    ]


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_a_schema_valid_answer_that_breaks_the_check_gets_repaired(harness, provider):
    harness.fake.queue(Reply(text='{"ids": [1, 1]}'), Reply(text='{"ids": [1, 2]}'))

    result = ask(harness, MODELS[provider], schema=Numbered, check=_distinct_ids)

    assert result.ok and result.output == Numbered(ids=[1, 2])
    repair = harness.fake.requests[1].body
    instruction = json.dumps(repair.get("contents") or repair.get("messages"))
    assert "ids[1]: 1 is repeated" in instruction  # the problem, with its JSON path
    rows = list(LedgerEntry.objects.order_by("pk"))
    assert [(r.outcome, r.is_repair) for r in rows] == [
        (Outcome.INVALID_OUTPUT, False),
        (Outcome.OK, True),
    ]
    assert "ids[1]: 1 is repeated" in rows[0].error


def test_an_answer_that_breaks_the_check_is_never_served_from_the_cache(harness):
    # Every answer repeats an id: the call fails, and asking again sends anew instead of
    # reading the failed answer back; the same text without the check is cached as usual.
    harness.fake.default = Reply(text='{"ids": [3, 3]}')

    first = ask(harness, GEMINI, schema=Numbered, check=_distinct_ids)
    assert not first.ok and first.outcome == Outcome.INVALID_OUTPUT
    assert "ids[1]: 3 is repeated" in first.error and first.raw_text == '{"ids": [3, 3]}'
    assert len(harness.fake.requests) == 3
    assert not LedgerEntry.objects.filter(outcome=Outcome.OK).exists()

    again = ask(harness, GEMINI, schema=Numbered, check=_distinct_ids)
    assert not again.ok and not again.cached and len(harness.fake.requests) == 6

    # An answer cached as ok before a check existed is checked when read back, too.
    unchecked = ask(harness, GEMINI, schema=Numbered)
    assert unchecked.ok and len(harness.fake.requests) == 7
    assert ask(harness, GEMINI, schema=Numbered).cached
    rechecked = ask(harness, GEMINI, schema=Numbered, check=_distinct_ids)
    assert not rechecked.cached and len(harness.fake.requests) == 10


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_a_per_minute_429_waits_the_servers_retry_delay(harness, provider):
    harness.fake.queue(Reply.rate_limited(retry_delay="0.3s"), Reply(text=VALID))

    started = time.monotonic()
    result = ask(harness, MODELS[provider])

    assert time.monotonic() - started >= 0.3
    assert result.ok and len(harness.fake.requests) == 2
    assert list(LedgerEntry.objects.order_by("pk").values_list("outcome", "attempt")) == [
        (Outcome.RATE_LIMITED, 1),
        (Outcome.OK, 2),
    ]


def test_the_retry_delay_is_capped(harness):
    harness.conf = harness.conf.__class__(**{**harness.conf.__dict__, "retry_delay_cap_s": 0.1})
    harness.fake.queue(Reply.rate_limited(retry_delay="30s"), Reply(text=VALID))

    started = time.monotonic()
    assert ask(harness, GEMINI).ok
    assert time.monotonic() - started < 2


def test_per_minute_429s_without_end_fail_as_rate_limited(harness):
    harness.fake.default = Reply.rate_limited(retry_delay="0.01s")

    result = ask(harness, GEMINI)

    assert result.outcome == Outcome.RATE_LIMITED and result.output is None
    assert len(harness.fake.requests) == 4  # the first and max_rate_limit_waits=3 more


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_a_per_day_429_raises_quota_exhausted_without_retrying(harness, provider):
    harness.fake.queue(Reply.rate_limited(retry_delay="3600s", per="PerDay"), Reply(text=VALID))

    started = time.monotonic()
    with pytest.raises(QuotaExhausted) as raised:
        ask(harness, MODELS[provider])

    assert time.monotonic() - started < 2
    if provider == "gemini":
        assert "PerDay" in raised.value.quota_id and raised.value.retry_delay == 3600
    else:
        assert raised.value.quota_id == "insufficient_quota"
    assert len(harness.fake.requests) == 1
    assert LedgerEntry.objects.get().outcome == Outcome.QUOTA_EXHAUSTED


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_server_errors_are_retried_with_backoff(harness, provider):
    harness.fake.queue(Reply.server_error(), Reply.server_error(503), Reply(text=VALID))

    result = ask(harness, MODELS[provider])

    assert result.ok and len(harness.fake.requests) == 3
    assert [r.outcome for r in LedgerEntry.objects.order_by("pk")] == [
        Outcome.SERVER_ERROR,
        Outcome.SERVER_ERROR,
        Outcome.OK,
    ]


def test_server_errors_without_end_fail_after_the_bounded_attempts(harness):
    harness.fake.default = Reply.server_error()

    result = ask(harness, GEMINI)

    assert result.outcome == Outcome.SERVER_ERROR and result.output is None
    assert "500" in result.error
    assert len(harness.fake.requests) == 3  # max_attempts
    assert LedgerEntry.objects.filter(outcome=Outcome.SERVER_ERROR).count() == 3


@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_timeouts_are_retried_then_fail_as_timeout(harness, provider):
    harness.conf = harness.conf.__class__(
        **{**harness.conf.__dict__, "timeout_s": 0.2, "max_attempts": 2}
    )
    harness.fake.default = Reply(text=VALID, delay=0.6)

    result = ask(harness, MODELS[provider])

    assert result.outcome == Outcome.TIMEOUT and len(harness.fake.requests) == 2


def test_a_refusal_is_not_retried(harness):
    harness.conf = harness.conf.__class__(**{**harness.conf.__dict__, "gemini_api_key": "wrong"})

    result = ask(harness, GEMINI)

    assert result.outcome == Outcome.ERROR and "403" in result.error
    assert LedgerEntry.objects.get().outcome == Outcome.ERROR


def test_the_cache_answers_an_identical_request_without_a_call(harness):
    harness.fake.default = Reply(text=VALID)
    first = ask(harness, GEMINI)
    assert first.ok and len(harness.fake.requests) == 1

    again = ask(harness, GEMINI, stage="generate-again")
    assert again.ok and again.cached and again.output == first.output
    assert again.model_version == GEMINI_MODEL_VERSION and again.cost == 0
    assert len(harness.fake.requests) == 1
    assert LedgerEntry.objects.count() == 1  # no call, no row

    fresh = ask(harness, GEMINI, fresh=True)
    assert fresh.ok and not fresh.cached and len(harness.fake.requests) == 2

    other_image = ask(
        harness,
        GEMINI,
        prompt=["Propose questions about this image.", ImagePart(PNG + b"x", "image/png")],
    )
    assert not other_image.cached and len(harness.fake.requests) == 3
    other_model = ask(harness, QWEN)
    assert not other_model.cached and len(harness.fake.requests) == 4


def test_the_request_hash_covers_what_the_answer_depends_on():
    prompt = ["Q?", ImagePart(PNG, "image/png")]
    base = request_hash(GEMINI, system="s", prompt=prompt, schema=Candidates)
    assert base == request_hash(GEMINI, system="s", prompt=list(prompt), schema=Candidates)
    warmer = ModelConfig(**{**GEMINI.__dict__, "parameters": {"temperature": 0.9}})

    class Other(BaseModel):
        questions: list[str]
        reason: str

    variants = [
        request_hash(warmer, system="s", prompt=prompt, schema=Candidates),
        request_hash(GEMINI, system="t", prompt=prompt, schema=Candidates),
        request_hash(
            GEMINI, system="s", prompt=["Q?", ImagePart(PNG, "image/jpeg")], schema=Candidates
        ),
        request_hash(
            GEMINI, system="s", prompt=["Q?", ImagePart(PNG[:-1], "image/png")], schema=Candidates
        ),
        request_hash(GEMINI, system="s", prompt=prompt, schema=Other),
        request_hash(QWEN, system="s", prompt=prompt, schema=Candidates),
    ]
    assert len({base, *variants}) == 7


def test_every_request_goes_through_the_limiter(harness):
    seen: list[tuple[str, int]] = []

    class Spy:
        async def acquire(self, key, limits, tokens):
            seen.append((key, limits.requests_per_minute))
            return 0.0

    harness.limiter = Spy()
    harness.fake.queue(Reply.server_error(), Reply(text="{"), Reply(text=VALID))

    assert ask(harness, GEMINI).ok
    assert seen == [("gemini-test", 6000)] * 3  # the retry and the repair are requests too


def test_the_settings_gateway_uses_the_environment_and_the_redis_bucket(
    settings, fake_llm, redis_url
):
    """The production path: keys and base URLs from settings, the limiter in Redis."""
    settings.GEMINI_API_KEY = "fake-gemini-key"
    settings.GEMINI_BASE_URL = fake_llm.base_url
    settings.REDIS_URL = redis_url
    fake_llm.default = Reply(text=VALID)
    model = ModelConfig(**{**GEMINI.__dict__, "requests_per_minute": 60})

    async def call():
        try:
            async with gateway_from_settings() as gateway:
                return await gateway.call_structured(
                    model, prompt=["Q?"], schema=Candidates, stage="generate"
                )
        finally:
            await sync_to_async(connections.close_all)()

    result = run_async(call)

    assert result.ok and len(fake_llm.requests) == 1
    bucket = redis.Redis.from_url(redis_url)
    try:
        level = float(bucket.hget("llm:bucket:gemini-test:req", "level"))
    finally:
        bucket.close()
    # One request taken from the shared bucket, which holds a second's worth of 60 a minute.
    assert level == 0
