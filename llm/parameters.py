"""What a model's `parameters` may hold: generation settings, per provider, and nothing else.

The parameters are passed into the provider's client as keyword arguments, so a key the client
knows for something else would change where or how it calls: Gemini's `http_options` takes a
`base_url` (and would send GEMINI_API_KEY to that host), OpenAI's `extra_headers`, `extra_body`
and `timeout` reach the HTTP request. Hence an allowlist (pydantic models that forbid every
other key), checked where an admin saves a model (LLMModel.clean) and again where a call is
made (llm.providers.ModelConfig), for rows written some other way. Where a request goes comes
only from the environment (GEMINI_BASE_URL, OPENAI_BASE_URL)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Settings(BaseModel):
    # strict: true is not 1, "0.2" is not 0.2; a number where a number belongs.
    model_config = ConfigDict(extra="forbid", strict=True)


class GeminiThinking(_Settings):
    thinking_budget: int | None = Field(None, ge=-1, description="-1: the model decides; 0: off")
    include_thoughts: bool | None = None
    thinking_level: Literal["minimal", "low", "medium", "high"] | None = None


class GeminiParameters(_Settings):
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    stop_sequences: list[str] | None = Field(None, max_length=5)
    presence_penalty: float | None = Field(None, ge=-2, lt=2)
    frequency_penalty: float | None = Field(None, ge=-2, lt=2)
    seed: int | None = None
    thinking_config: GeminiThinking | None = None
    media_resolution: (
        Literal["MEDIA_RESOLUTION_LOW", "MEDIA_RESOLUTION_MEDIUM", "MEDIA_RESOLUTION_HIGH"] | None
    ) = None


class OpenAIParameters(_Settings):
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | Annotated[list[str], Field(max_length=4)] | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    seed: int | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None


class DemoParameters(_Settings):
    demo_delay_seconds: float | None = Field(None, ge=0, le=60)


# Provider name (llm.models.Provider) -> its settings. A provider registered without an entry
# here takes no parameters at all.
ALLOWED: dict[str, type[_Settings]] = {
    "gemini": GeminiParameters,
    "openai": OpenAIParameters,
    "demo": DemoParameters,
}


def allowed_names(provider: str) -> list[str]:
    settings = ALLOWED.get(provider)
    return list(settings.model_fields) if settings else []


def parameter_problems(provider: str, parameters: Any) -> list[str]:
    """Each problem of a model's parameters in plain words, naming the key; [] when sound."""
    if parameters is None or parameters == {}:
        return []
    if not isinstance(parameters, dict):
        return ['parameters must be a JSON object, such as {"temperature": 0.2}.']
    settings = ALLOWED.get(provider)
    if settings is None:
        return [f"a model of provider {provider!r} takes no parameters; leave them empty ({{}})."]
    try:
        settings.model_validate(parameters)
    except ValidationError as exc:
        return [_problem(provider, error) for error in exc.errors()]
    return []


def _problem(provider: str, error: Any) -> str:
    where = ".".join(str(part) for part in error["loc"]) or "parameters"
    if error["type"] == "extra_forbidden":
        parent = error["loc"][:-1]
        names = (
            list(GeminiThinking.model_fields)
            if parent == ("thinking_config",)
            else allowed_names(provider)
        )
        return (
            f"{where} is not a generation setting of a {provider} model; the allowed ones are "
            f"{', '.join(names)}. Where requests go is set in the environment, never here."
        )
    return f"{where}: {error['msg']}."
