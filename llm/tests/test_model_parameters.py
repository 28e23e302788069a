"""A model's `parameters` are generation settings from an allowlist per provider: anything else
(Gemini's `http_options` with a `base_url`, OpenAI's `extra_headers`, ...) is refused in the
admin, and a row written some other way is refused at the call, before any request: the key
goes only where the environment says."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import BaseModel

from llm.gateway import GatewayError, ModelConfig
from llm.models import LLMModel
from llm.parameters import parameter_problems
from tests.fake_llm import Reply, start_fake_llm

from .conftest import Harness

VALID = '{"questions": ["What is it?"]}'


class Candidates(BaseModel):
    questions: list[str]


@pytest.mark.parametrize(
    ("provider", "parameters", "message"),
    [
        (
            "gemini",
            {"http_options": {"base_url": "https://thief.example/"}},
            "http_options is not a generation setting of a gemini model; the allowed ones are "
            "temperature, top_p, top_k, max_output_tokens, stop_sequences",
        ),
        ("openai", {"extra_headers": {"X": "1"}}, "extra_headers is not a generation setting"),
        ("openai", {"extra_body": {}}, "extra_body is not a generation setting"),
        ("openai", {"timeout": 1}, "timeout is not a generation setting"),
        ("gemini", {"temperature": 3}, "temperature: Input should be less than or equal to 2."),
        ("gemini", {"temperature": "0.2"}, "temperature: Input should be a valid number."),
        ("gemini", {"max_output_tokens": True}, "max_output_tokens: Input should be a valid"),
        (
            "gemini",
            {"thinking_config": {"thinking_budget": 512, "endpoint": "x"}},
            "thinking_config.endpoint is not a generation setting of a gemini model; the "
            "allowed ones are thinking_budget, include_thoughts, thinking_level.",
        ),
        ("demo", {"temperature": 0.2}, "temperature is not a generation setting of a demo"),
        ("gemini", ["temperature"], "parameters must be a JSON object"),
    ],
)
def test_what_is_refused_and_how_it_is_said(provider, parameters, message):
    problems = parameter_problems(provider, parameters)
    assert any(message in problem for problem in problems), problems


@pytest.mark.parametrize(
    ("provider", "parameters"),
    [
        ("gemini", {}),
        ("gemini", {"temperature": 1, "top_p": 0.95, "max_output_tokens": 8192}),
        ("gemini", {"thinking_config": {"thinking_budget": 0}, "seed": 7}),
        ("openai", {"temperature": 0.0, "max_tokens": 2048, "stop": ["\n\n"]}),
        ("openai", {"reasoning_effort": "low", "stop": "END"}),
        ("demo", {"demo_delay_seconds": 0}),
    ],
)
def test_generation_settings_pass(provider, parameters):
    assert parameter_problems(provider, parameters) == []


@pytest.mark.django_db
def test_the_admin_refuses_an_endpoint_in_the_parameters(client, root):
    root.is_superuser = True
    root.save()
    client.force_login(root)
    form = {
        "name": "flash",
        "provider": "gemini",
        "model": "gemini-2.5-flash",
        "parameters": '{"temperature": 0.2, "http_options": {"base_url": "https://thief.example/"}}',
        "price_input_per_million": "0.3",
        "price_output_per_million": "2.5",
        "requests_per_minute": "60",
        "tokens_per_minute": "0",
        "active": "on",
    }
    response = client.post("/admin/llm/llmmodel/add/", form)
    assert response.status_code == 200
    page = response.content.decode()
    assert "http_options is not a generation setting of a gemini model" in page
    assert "Where requests go is set in the environment, never here." in page
    assert not LLMModel.objects.exists()

    form["parameters"] = '{"temperature": 0.2}'
    assert client.post("/admin/llm/llmmodel/add/", form).status_code == 302
    assert LLMModel.objects.get().parameters == {"temperature": 0.2}


@pytest.mark.django_db(transaction=True)
def test_a_row_with_an_endpoint_is_refused_before_any_request(harness: Harness):
    """A row written past the admin (the shell, an old row) names a second server: the call is
    refused before a request is made, and that server never sees the key."""
    thief, server = start_fake_llm()
    try:
        model = LLMModel.objects.create(
            name="flash",
            provider="gemini",
            model="gemini-2.5-flash",
            parameters={"http_options": {"base_url": thief.base_url}},
            price_input_per_million=Decimal("0.30"),
            price_output_per_million=Decimal("2.50"),
        )
        harness.fake.default = thief.default = Reply(text=VALID)
        with pytest.raises(GatewayError, match="http_options is not a generation setting"):
            harness.call(model, prompt=["Questions?"], schema=Candidates)
        assert thief.requests == [] and harness.fake.requests == []
        with pytest.raises(GatewayError, match="extra_headers is not a generation setting"):
            ModelConfig(
                name="q", provider="openai", model="m", parameters={"extra_headers": {"a": "b"}}
            )
    finally:
        server.shutdown()
        server.server_close()
