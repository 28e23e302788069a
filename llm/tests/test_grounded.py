"""Gateway.call_grounded: free text with Gemini's built-in tools, its grounding and URL context
metadata, through the same ledger and cache as structured calls."""

from __future__ import annotations

import pytest

from llm.gateway import GatewayError
from llm.models import LedgerEntry, Outcome
from llm.tests.conftest import GEMINI, QWEN, Harness
from tests.fake_llm import Reply, grounding_metadata

pytestmark = pytest.mark.django_db(transaction=True)


def grounded(harness: Harness, **kwargs):
    kwargs.setdefault("stage", "test")
    kwargs.setdefault("prompt", ["Find evidence on beef bourguignon."])
    return harness.run(lambda gateway: gateway.call_grounded(GEMINI, **kwargs))


def test_search_call_sends_the_tool_and_no_json_type_and_reads_the_metadata(harness):
    meta = grounding_metadata(
        [("Wine of Burgundy", "wine.example"), ("Stew", "stew.example")],
        [("It is braised in red Burgundy wine.", [0]), ("Lardons are browned first.", [0, 1])],
    )
    harness.fake.queue(
        Reply(text="It is braised in red Burgundy wine. Lardons are browned first.", grounding=meta)
    )
    result = grounded(harness, system="Research.", template_name="t", template_version="1")
    assert result.ok and not result.call.cached
    assert result.text.startswith("It is braised")
    assert result.chunks == [
        ("https://vertexaisearch.cloud.google.com/grounding-api-redirect/0", "Wine of Burgundy"),
        ("https://vertexaisearch.cloud.google.com/grounding-api-redirect/1", "Stew"),
    ]
    assert result.supports == [
        ("It is braised in red Burgundy wine.", [0]),
        ("Lardons are browned first.", [0, 1]),
    ]
    body = harness.fake.requests[0].body
    assert body["tools"] == [{"googleSearch": {}}]
    assert "responseMimeType" not in body.get("generationConfig", {})
    assert "responseJsonSchema" not in body.get("generationConfig", {})
    row = LedgerEntry.objects.get()
    assert (row.outcome, row.template_name, row.tokens_in) == (Outcome.OK, "t", 120)
    assert '"chunks"' in row.raw_output  # the metadata is kept, for the cache and the console


def test_url_context_statuses_and_the_cache_answers_with_the_metadata(harness):
    statuses = {
        "urlMetadata": [
            {
                "retrievedUrl": "https://a.example",
                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
            },
            {
                "retrievedUrl": "https://b.example",
                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR",
            },
        ]
    }
    harness.fake.queue(Reply(text="s1: verified", url_context=statuses))
    first = grounded(harness, tools=("url_context",))
    assert harness.fake.requests[0].body["tools"] == [{"urlContext": {}}]
    assert first.url_statuses == [
        ("https://a.example", "URL_RETRIEVAL_STATUS_SUCCESS"),
        ("https://b.example", "URL_RETRIEVAL_STATUS_ERROR"),
    ]
    again = grounded(harness, tools=("url_context",))
    assert again.call.cached and len(harness.fake.requests) == 1
    assert (again.text, again.url_statuses) == (first.text, first.url_statuses)
    # The tools are part of the request: the same prompt with search is another request.
    harness.fake.queue(Reply(text="searched"))
    assert grounded(harness).text == "searched" and len(harness.fake.requests) == 2
    grounded(harness, tools=("url_context",), fresh=True)
    assert len(harness.fake.requests) == 3


def test_retries_server_errors_and_records_them(harness):
    harness.fake.queue(
        Reply.server_error(),
        Reply(text="fine", grounding=grounding_metadata([("T", "t.example")], [("fine", [0])])),
    )
    result = grounded(harness)
    assert result.ok and result.call.requests == 2 and result.supports == [("fine", [0])]
    assert list(LedgerEntry.objects.order_by("pk").values_list("outcome", flat=True)) == [
        Outcome.SERVER_ERROR,
        Outcome.OK,
    ]


def test_failure_comes_back_as_a_result_and_bad_arguments_are_refused(harness):
    harness.fake.default = Reply(
        status=400,
        error_body={"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}},
    )
    result = grounded(harness)
    assert not result.ok and result.text == "" and "400" in result.call.error
    with pytest.raises(GatewayError, match="Gemini"):
        harness.run(lambda g: g.call_grounded(QWEN, prompt=["x"], stage="t"))
    with pytest.raises(GatewayError, match="tools"):
        grounded(harness, tools=("code_execution",))


def test_an_answer_the_callers_check_refuses_is_never_cached(harness):
    """Found by bench/pipeline_faults.py: a search answered without grounding was recorded ok,
    the stage then failed the item, and the next launch without fresh calls got the same
    ungrounded answer from the cache. With a check, the answer is recorded invalid_output (with
    the check's problems) and the same request is sent again next time."""

    def grounded_only(found):
        return [] if found.supports else ["the answer has no grounding supports"]

    for _ in range(3):  # the answer and both repair turns (LLM_MAX_REPAIRS) ungrounded
        harness.fake.queue(Reply(text="No sources were used."))
    first = grounded(harness, check=grounded_only)
    assert not first.ok and first.call.outcome == Outcome.INVALID_OUTPUT
    assert "no grounding supports" in first.call.error and first.text == ""
    rows = list(LedgerEntry.objects.order_by("id"))
    assert [(r.outcome, r.is_repair) for r in rows] == [
        (Outcome.INVALID_OUTPUT, False),
        (Outcome.INVALID_OUTPUT, True),
        (Outcome.INVALID_OUTPUT, True),
    ]
    assert rows[0].raw_output.startswith('{"text": "No sources')
    meta = grounding_metadata([("Stew", "stew.example")], [("It is a stew.", [0])])
    harness.fake.queue(Reply(text="It is a stew.", grounding=meta))
    again = grounded(harness, check=grounded_only)
    assert again.ok and not again.call.cached and len(harness.fake.requests) == 4
    assert grounded(harness, check=grounded_only).call.cached  # an accepted answer is
    assert len(harness.fake.requests) == 4


def test_an_ungrounded_answer_gets_a_repair_turn_that_asks_for_the_tools(harness):
    """Found by bench/pipeline_faults.py: most of the rubric build's first failures were
    searches answered without grounding, failed at once. The check's problems go back to the
    model, with its own words (not the ledger's JSON), and a grounded second answer is kept."""

    def grounded_only(found):
        return [] if found.supports else ["the answer has no grounding supports"]

    harness.fake.queue(Reply(text="From memory: it is a stew."))
    meta = grounding_metadata([("Stew", "stew.example")], [("It is a stew.", [0])])
    harness.fake.queue(Reply(text="It is a stew.", grounding=meta))
    found = grounded(harness, check=grounded_only)
    assert found.ok and found.text == "It is a stew." and found.supports
    assert len(harness.fake.requests) == 2
    turns = harness.fake.requests[1].body["contents"]
    assert [t["role"] for t in turns] == ["user", "model", "user"]
    assert turns[1]["parts"][0]["text"] == "From memory: it is a stew."
    repair = turns[2]["parts"][0]["text"]
    assert "no grounding supports" in repair and "tools" in repair and "JSON" not in repair
    assert harness.fake.requests[1].body["tools"] == [{"googleSearch": {}}]
    rows = list(LedgerEntry.objects.order_by("id").values_list("outcome", "is_repair"))
    assert rows == [(Outcome.INVALID_OUTPUT, False), (Outcome.OK, True)]
