"""Each ledger row keeps the prompt it sent (images by size and sha256) and the job item it was
sent for; the console's item page shows the item's calls with their prompts, escaped."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connections, transaction
from django.urls import reverse
from pydantic import BaseModel

from llm import jobs
from llm.gateway import Gateway, ImagePart, ledger_item
from llm.models import ItemStatus, JobItem, LedgerEntry, Outcome
from llm.ratelimit import MemoryTokenBucket
from llm.tasks import run_job_chunk
from tests.fake_llm import Reply

from .conftest import GEMINI, MODELS, Harness

KIND = "test.prompted"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
SYSTEM = "You write <b>benchmark</b> questions & nothing else."
VALID = '{"questions": ["Why was the bridge built here?"]}'


class Candidates(BaseModel):
    questions: list[str]


def ask_prompt(key: str) -> list[Any]:
    return [
        f"Propose questions about image {key} <script>alert('x')</script>",
        ImagePart(PNG, "image/png"),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("provider", ["gemini", "openai"])
def test_every_row_keeps_its_prompt_and_a_repair_its_turns(harness: Harness, provider):
    harness.fake.queue(Reply.server_error(), Reply(text='{"questions": "oops"'), Reply(text=VALID))

    async def call(gateway: Gateway) -> Any:
        ledger_item.set("img-7")  # what llm/jobs.py does around a handler
        return await gateway.call_structured(
            MODELS[provider],
            prompt=ask_prompt("img-7"),
            system=SYSTEM,
            schema=Candidates,
            stage="generate",
        )

    assert harness.run(call).ok
    failed, invalid, repaired = LedgerEntry.objects.order_by("pk")
    assert [r.outcome for r in (failed, invalid, repaired)] == [
        Outcome.SERVER_ERROR,
        Outcome.INVALID_OUTPUT,
        Outcome.OK,
    ]
    assert {r.item_key for r in (failed, invalid, repaired)} == {"img-7"}
    image = f"[image image/png, {len(PNG):,} bytes, sha256 {hashlib.sha256(PNG).hexdigest()}]"
    assert (
        failed.prompt
        == invalid.prompt
        == "\n".join(
            [
                "[system]",
                SYSTEM,
                "[user]",
                ask_prompt("img-7")[0],
                image,
                "[response schema: Candidates]",
            ]
        )
    )
    # The repair's row shows the whole conversation it sent: the invalid answer, the errors.
    assert repaired.prompt.startswith(invalid.prompt.removesuffix("[response schema: Candidates]"))
    assert '[model]\n{"questions": "oops"\n[user]\nYour previous reply did not validate' in (
        repaired.prompt
    )
    assert "did not validate" not in invalid.prompt


@pytest.mark.django_db(transaction=True)
def test_a_call_outside_a_job_has_no_item(harness: Harness):
    harness.fake.default = Reply(text=VALID)
    harness.call(GEMINI, prompt=["plain"], schema=Candidates)
    row = LedgerEntry.objects.get()
    assert (row.item_key, row.prompt) == ("", "[user]\nplain\n[response schema: Candidates]")


# --- through a job and the console -----------------------------------------------------------


async def prompted(gateway: Gateway, payload: dict[str, Any]) -> jobs.ItemResult:
    context = jobs.current_item.get()
    call = await gateway.call_structured(
        GEMINI,
        prompt=ask_prompt(context.key),
        system=SYSTEM,
        schema=Candidates,
        stage="generate",
        job_id=context.job_id,
    )
    if not call.ok:
        raise jobs.ItemFailed(f"{call.outcome}: {call.error}", call)
    return jobs.ItemResult.of_calls({"n": len(call.output.questions)}, call)  # type: ignore[union-attr]


@pytest.fixture
def prompted_kind(monkeypatch, harness: Harness) -> Iterator[Harness]:
    jobs.register_kind(KIND, prompted, chunk_size=10, concurrency=2)
    monkeypatch.setattr(
        run_job_chunk, "delay_on_commit", lambda job_id: transaction.on_commit(lambda: None)
    )
    yield harness
    jobs._registry.pop(KIND, None)


@pytest.mark.django_db(transaction=True)
def test_item_page_shows_the_items_calls_with_their_prompts_escaped(client, root, prompted_kind):
    harness = prompted_kind
    # img-0: invalid then repaired; img-1: answered at once (scripted replies go in order).
    harness.fake.default = Reply(text=VALID)
    job = jobs.job_launch(kind=KIND, items=[("img-0", {}), ("img-1", {})])
    harness.fake.queue(Reply(text="<i>not json</i>"))
    try:
        jobs.job_run_chunk(
            job_id=job.pk,
            gateway_factory=lambda: Gateway(limiter=MemoryTokenBucket(), conf=harness.conf),
        )
    finally:
        connections.close_all()
    assert JobItem.objects.filter(job=job, status=ItemStatus.DONE).count() == 2
    rows = LedgerEntry.objects.filter(job_id=job.pk)
    # Whichever item asked first got the invalid answer: two rows are its, one the other's.
    repaired_key = rows.get(is_repair=True).item_key
    other_key = "img-1" if repaired_key == "img-0" else "img-0"
    assert sorted(rows.values_list("item_key", flat=True)) == sorted(
        [repaired_key, repaired_key, other_key]
    )

    client.force_login(root)
    item = JobItem.objects.get(job=job, key=repaired_key)
    html = client.get(reverse("job_item", args=[job.pk, item.pk])).content.decode()
    calls = html[html.index('data-testid="ledger"') :]
    assert calls.count('data-testid="prompt"') == 2  # its answer and the repair
    assert (
        f"Propose questions about image {repaired_key} &lt;script&gt;alert(&#x27;x&#x27;)"
        "&lt;/script&gt;" in calls
    )
    assert "<script>alert" not in html
    assert "You write &lt;b&gt;benchmark&lt;/b&gt; questions &amp; nothing else." in calls
    assert f"sha256 {hashlib.sha256(PNG).hexdigest()}" in calls
    assert "&lt;i&gt;not json&lt;/i&gt;" in calls and "<i>not json" not in html  # raw output
    assert f"image {other_key}" not in calls  # the other item's call is on its own page
    assert "(repair)" in calls
