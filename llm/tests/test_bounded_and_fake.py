"""run_bounded, and the fake server's own promises (grounding metadata as Gemini sends it, both
API versions, the key checks) so that later stages can rely on them."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from google import genai
from google.genai import types

from llm.gateway import QuotaExhausted, run_bounded
from llm.tests.conftest import run_async
from tests.fake_llm import GEMINI_KEY, Reply, grounding_metadata


def test_run_bounded_caps_concurrency_and_keeps_order():
    in_flight = peak = 0

    async def work(i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        if i == 3:
            raise ValueError("item 3 is bad")
        return i * i

    results = run_async(lambda: run_bounded((work(i) for i in range(20)), limit=4))

    assert peak == 4
    assert isinstance(results[3], ValueError)
    assert [r for i, r in enumerate(results) if i != 3] == [i * i for i in range(20) if i != 3]


def test_run_bounded_stops_everything_on_quota_exhausted():
    finished: list[int] = []

    async def work(i: int) -> int:
        await asyncio.sleep(0.01 * i)
        if i == 2:
            raise QuotaExhausted("gemini-2.5-pro", "GenerateRequestsPerDayPerProject", None)
        finished.append(i)
        return i

    with pytest.raises(QuotaExhausted):
        run_async(lambda: run_bounded([work(i) for i in range(10)], limit=10))
    assert finished == [0, 1]  # the others were cancelled, not left running

    with pytest.raises(ValueError, match="at least 1"):
        run_async(lambda: run_bounded([], limit=0))


def test_fake_gemini_sends_grounding_and_url_context_metadata(fake_llm):
    grounding = grounding_metadata(
        sources=[("Golden Gate Bridge - Wikipedia", "wikipedia.org"), ("NPS", "nps.gov")],
        supports=[("The bridge opened in 1937.", [0]), ("Fog is frequent.", [0, 1])],
        queries=["golden gate bridge history"],
    )
    url_context = {
        "urlMetadata": [
            {
                "retrievedUrl": "https://www.nps.gov/goga/",
                "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
            }
        ]
    }
    fake_llm.queue(
        Reply(
            text="The bridge opened in 1937. Fog is frequent.",
            grounding=grounding,
            url_context=url_context,
        )
    )
    client = genai.Client(
        api_key=GEMINI_KEY,
        http_options=types.HttpOptions(base_url=fake_llm.base_url, api_version="v1"),
    )  # the fake also answers v1

    response = client.models.generate_content(
        model="gemini-2.5-pro",
        contents="When did it open?",
        config=types.GenerateContentConfig(tools=[types.Tool(google_search=types.GoogleSearch())]),
    )

    candidate = response.candidates[0]
    chunks = candidate.grounding_metadata.grounding_chunks
    assert [c.web.title for c in chunks] == ["Golden Gate Bridge - Wikipedia", "NPS"]
    assert "grounding-api-redirect" in chunks[0].web.uri
    supports = candidate.grounding_metadata.grounding_supports
    assert supports[1].segment.text == "Fog is frequent."
    assert supports[1].grounding_chunk_indices == [0, 1]
    assert supports[1].segment.start_index == len(b"The bridge opened in 1937. ")
    status = candidate.url_context_metadata.url_metadata[0].url_retrieval_status
    assert status == types.UrlRetrievalStatus.URL_RETRIEVAL_STATUS_SUCCESS
    (sent,) = fake_llm.requests
    assert sent.path == "/v1/models/gemini-2.5-pro:generateContent"
    assert sent.body["tools"] == [{"googleSearch": {}}]


def test_fake_refuses_wrong_keys(fake_llm):
    gemini = httpx.post(
        f"{fake_llm.base_url}/v1beta/models/m:generateContent",
        json={},
        headers={"x-goog-api-key": "stolen"},
    )
    openai = httpx.post(
        f"{fake_llm.base_url}/v1/chat/completions",
        json={},
        headers={"Authorization": "Bearer stolen"},
    )
    elsewhere = httpx.post(f"{fake_llm.base_url}/v1/embeddings", json={})

    assert (gemini.status_code, openai.status_code, elsewhere.status_code) == (403, 401, 404)
    assert fake_llm.requests == []  # refused requests consume no scripted reply
