"""Request slots: a job kind's concurrency bounds the requests at the provider, not the items'
own work. A chunk has twice as many items in progress as it has slots, so that an item's cache
lookup and ledger row are done while the others' requests are out."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from llm import jobs
from llm.gateway import Gateway
from llm.models import JobStatus
from tests.fake_llm import Reply

from .conftest import GEMINI, Harness

KIND = "test.in_flight"
SLOTS = 3
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("sent")]


class Answer(BaseModel):
    answer: str
    score: int


VALID = '{"answer": "yes", "score": 1}'


class Progress:
    """How many handlers are running now, and the most there were at once."""

    def __init__(self) -> None:
        self.now = self.most = 0

    def enter(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


progress = Progress()


async def ask(gateway: Gateway, payload: dict[str, Any]) -> jobs.ItemResult:
    progress.enter()
    try:
        call = await gateway.call_structured(
            GEMINI,
            prompt=[f"Question {payload['n']} of run {payload['run']}."],
            schema=Answer,
            stage="in-flight-test",
            job_id=jobs.current_item.get().job_id,
        )
    finally:
        progress.leave()
    if not call.ok:
        raise jobs.ItemFailed(f"{call.outcome}: {call.error}", call)
    return jobs.ItemResult.of_calls({"cached": call.cached}, call)


@pytest.fixture(autouse=True)
def kind() -> Iterator[None]:
    global progress
    progress = Progress()
    jobs.register_kind(KIND, ask, chunk_size=12, concurrency=SLOTS)
    yield
    jobs._registry.pop(KIND, None)


def launch(run: int) -> Any:
    return jobs.job_launch(
        kind=KIND, items=[(f"q-{n:02d}", {"n": n, "run": run}) for n in range(12)]
    )


def test_a_chunk_has_its_kinds_concurrency_of_requests_out_and_twice_as_many_items(
    harness: Harness,
):
    harness.fake.default = Reply(text=VALID, delay=0.1)
    job = launch(run=1)
    harness.drain(job)
    assert (job.status, job.items_done) == (JobStatus.DONE, 12)
    assert harness.fake.most_in_flight == SLOTS
    assert progress.most == SLOTS * jobs.ITEMS_PER_REQUEST_SLOT


def test_a_gateway_without_a_limit_sends_every_call_at_once(harness: Harness):
    harness.fake.default = Reply(text=VALID, delay=0.1)

    async def six_calls(gateway: Gateway, run: str) -> None:
        await asyncio.gather(
            *(
                gateway.call_structured(GEMINI, prompt=[f"{run} {n}"], schema=Answer, stage="t")
                for n in range(6)
            )
        )

    harness.run(lambda gateway: six_calls(gateway, "unlimited"))
    assert harness.fake.most_in_flight == 6

    async def limited(gateway: Gateway) -> None:
        gateway.limit_in_flight(2)
        await six_calls(gateway, "limited")

    harness.fake.reset()
    harness.fake.default = Reply(text=VALID, delay=0.1)
    harness.run(limited)
    assert harness.fake.most_in_flight == 2
