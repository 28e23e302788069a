"""Response schemas built per call with the ids a reply may name (llm/schemas.py): the pure
part, then what the real google-genai and openai clients put on the wire, and the ledger's
request hash."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from llm import schemas
from llm.gateway import GatewaySettings, request_hash
from llm.models import LedgerEntry
from llm.providers import Gemini, Request
from llm.schemas import SchemaIdsError, id_sets, names, one_each, response_schema
from tests.fake_llm import Reply

from .conftest import GEMINI, MODELS, Harness


class Verdict(BaseModel):
    id: int = Field(json_schema_extra=names("candidates"))
    ok: bool


class Answer(BaseModel):
    verdicts: list[Verdict] = Field(json_schema_extra=one_each("candidates"))
    selected: int | None = Field(json_schema_extra=names("candidates"))


class Cited(BaseModel):
    # A list of ids, marked on its elements (the compiler's citations are so).
    snippets: list[Annotated[str, Field(json_schema_extra=names("snippets"))]]


class Plain(BaseModel):
    verdict: str
    rationale: str


def candidates(*ids: int) -> schemas.IdSets:
    return id_sets({"candidates": ids})


def test_ids_become_an_enum_and_a_list_of_one_each_its_exact_length():
    sent = response_schema(Answer, candidates(21, 22, 23))
    verdict = sent["$defs"]["Verdict"]
    assert verdict["properties"]["id"] == {"enum": [21, 22, 23], "title": "Id", "type": "integer"}
    verdicts = sent["properties"]["verdicts"]
    assert (verdicts["minItems"], verdicts["maxItems"]) == (3, 3)
    # A union with null: the ids on the integer branch, null still allowed.
    assert sent["properties"]["selected"]["anyOf"] == [
        {"enum": [21, 22, 23], "type": "integer"},
        {"type": "null"},
    ]
    # No mark is sent: the providers get plain JSON Schema.
    assert schemas.NAMES not in json.dumps(sent) and schemas.ONE_EACH not in json.dumps(sent)


def test_string_ids_and_a_list_of_ids_from_an_empty_set():
    sent = response_schema(Cited, id_sets({"snippets": ["s1", "s3"]}))
    assert sent["properties"]["snippets"]["items"] == {"enum": ["s1", "s3"], "type": "string"}
    assert "maxItems" not in sent["properties"]["snippets"]
    # No evidence at all: a citation can only be absent.
    empty = response_schema(Cited, id_sets({"snippets": []}))
    assert empty["properties"]["snippets"]["maxItems"] == 0
    assert "enum" not in empty["properties"]["snippets"]["items"]


def test_the_sets_given_must_be_the_ones_the_model_marks():
    with pytest.raises(SchemaIdsError, match=r"missing \['candidates'\]"):
        response_schema(Answer)
    with pytest.raises(SchemaIdsError, match=r"not marked: \['snippets'\]"):
        response_schema(Answer, id_sets({"candidates": [1], "snippets": ["s1"]}))
    with pytest.raises(SchemaIdsError, match="not marked"):
        response_schema(Plain, id_sets({"candidates": [1]}))


def test_a_model_without_marks_costs_nothing_more_and_keeps_its_schema():
    """The judge's schema: the one dict cached per class, as before (so its request hashes,
    the ledger's cache keys, do not change), never a copy per call."""
    first = response_schema(Plain)
    assert first is response_schema(Plain) is schemas.json_schema(Plain)
    assert first == Plain.model_json_schema()


def test_per_call_schemas_leave_the_shared_one_untouched_and_keep_nothing():
    before = copy.deepcopy(schemas.json_schema(Answer))
    response_schema(Answer, candidates(0))  # the class's own entries made
    cached = (schemas.json_schema.cache_info().currsize, schemas.marked_sets.cache_info().currsize)
    sent = [response_schema(Answer, candidates(n, n + 1)) for n in range(1000)]
    assert schemas.json_schema(Answer) == before  # the marks are still in the shared one
    assert sent[0] is not sent[1] and sent[5]["properties"]["verdicts"]["maxItems"] == 2
    # The caches are per class (the code's own, a fixed few): a thousand calls added nothing.
    assert (
        schemas.json_schema.cache_info().currsize,
        schemas.marked_sets.cache_info().currsize,
    ) == cached


def test_the_gemini_provider_keeps_one_config_per_kind_of_request_not_per_call():
    provider = Gemini(GatewaySettings(gemini_api_key="unused"))  # opens nothing until a send
    configs = [
        provider._generation_for(
            GEMINI, Request(system="s", prompt=("p",), schema=Answer, ids=candidates(n))
        )
        for n in range(50)
    ]
    assert len(provider._generations) == 1
    kept = next(iter(provider._generations.values()))
    assert kept.response_json_schema is None  # no call's ids kept
    assert [c.response_json_schema["properties"]["selected"]["anyOf"][0]["enum"] for c in configs][
        :2
    ] == [[0], [1]]
    plain = provider._generation_for(
        GEMINI, Request(system="s", prompt=("p",), schema=Plain, ids=())
    )
    assert plain is provider._generation_for(
        GEMINI, Request(system="s", prompt=("p",), schema=Plain, ids=())
    )


def test_the_request_hash_covers_the_ids_sent():
    def digest(*ids: int) -> str:
        return request_hash(GEMINI, system="", prompt=["p"], schema=Answer, ids=candidates(*ids))

    assert digest(1, 2) == digest(1, 2)
    assert digest(1, 2) != digest(1, 3) != digest(2, 1)
    # A schema without ids hashes as it always did (the judge's cache keys stay put): the
    # canonical JSON of the request with the class's schema as pydantic makes it.
    canonical = {
        "provider": "gemini",
        "model": GEMINI.model,
        "params": GEMINI.parameters,
        "system": "",
        "contents": [{"text": "p"}],
        "schema": Plain.model_json_schema(),
    }
    blob = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert request_hash(GEMINI, system="", prompt=["p"], schema=Plain) == (
        hashlib.sha256(blob.encode()).hexdigest()
    )


# ---------------------------------------------------------------------------------------------
# On the wire, through the real clients.


ANSWER = json.dumps({"verdicts": [{"id": 21, "ok": True}, {"id": 22, "ok": False}], "selected": 21})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_the_real_clients_send_the_ids_as_an_enum(harness: Harness, provider: str):
    harness.fake.default = Reply(text=ANSWER)
    result = harness.call(
        MODELS[provider], prompt=["Judge these."], schema=Answer, ids={"candidates": [21, 22]}
    )
    assert result.ok, result.error
    (sent,) = harness.fake.requests
    if provider == "gemini":
        schema = sent.body["generationConfig"]["responseJsonSchema"]
    else:
        schema = sent.body["response_format"]["json_schema"]["schema"]
        assert sent.body["response_format"]["json_schema"]["strict"] is True
    verdict = schema["$defs"]["Verdict"]["properties"]["id"]
    assert verdict["enum"] == [21, 22] and verdict["type"] == "integer"
    assert (
        schema["properties"]["verdicts"]["minItems"],
        schema["properties"]["verdicts"]["maxItems"],
    ) == (2, 2)
    assert schema["properties"]["selected"]["anyOf"][0]["enum"] == [21, 22]
    assert "x-ids" not in json.dumps(schema) and "x-each-id" not in json.dumps(schema)
    # The ledger keeps which ids were sent, and its hash is of the schema sent.
    row = LedgerEntry.objects.get()
    assert "[ids of candidates in the schema: 21, 22]" in row.prompt
    assert row.request_hash == request_hash(
        MODELS[provider], system="", prompt=["Judge these."], schema=Answer, ids=candidates(21, 22)
    )


@pytest.mark.django_db(transaction=True)
def test_the_cache_answers_only_the_same_ids(harness: Harness):
    harness.fake.default = Reply(text=ANSWER)
    first = harness.call(GEMINI, prompt=["Judge."], schema=Answer, ids={"candidates": [21, 22]})
    again = harness.call(GEMINI, prompt=["Judge."], schema=Answer, ids={"candidates": [21, 22]})
    other = harness.call(GEMINI, prompt=["Judge."], schema=Answer, ids={"candidates": [21, 22, 23]})
    assert first.ok and again.cached and not other.cached
    assert len(harness.fake.requests) == 2
