"""A job's pace (issue 22, section 3): how many chunks it runs at once and how many requests
each has in flight follow its model's per-minute limits at the latency its answers take; a
chunk grows to that pace while it runs, claiming more items as its slots free up; a job is sent
the chunks it misses only while a worker process is free; the job page says how it runs and
what it waits for."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from pydantic import BaseModel

from llm import jobs
from llm.gateway import Gateway, ModelConfig, Observed
from llm.models import ItemStatus, Job, JobItem, JobStatus, LedgerEntry
from llm.tasks import sweep_expired_leases
from tests.fake_llm import Reply

from .conftest import GEMINI, Harness

KIND = "test.pace"
SLOTS = 2  # the kind's own concurrency: what a chunk starts with


class Answer(BaseModel):
    answer: str


async def ask(gateway: Gateway, payload: dict[str, Any]) -> jobs.ItemResult:
    model = ModelConfig(**{**GEMINI.__dict__, "requests_per_minute": payload["rpm"]})
    call = await gateway.call_structured(
        model,
        prompt=[f"Question {payload['n']}."],
        schema=Answer,
        stage="pace-test",
        job_id=jobs.current_item.get().job_id,
    )
    if not call.ok:
        raise jobs.ItemFailed(f"{call.outcome}: {call.error}", call)
    return jobs.ItemResult.of_calls({}, call)


@pytest.fixture(autouse=True)
def kind() -> Iterator[jobs.JobKind]:
    spec = jobs.register_kind(KIND, ask, chunk_size=4, concurrency=SLOTS)
    yield spec
    jobs._registry.pop(KIND, None)


def observed(rpm: int, latency_s: float, answers: int = 10, tpm: int = 0, tokens: int = 0):
    return Observed(rpm, tpm, answers, latency_s * answers, tokens * answers)


# --- the pace --------------------------------------------------------------------------------


def test_the_pace_follows_the_quota_at_the_observed_latency(kind):
    # 3,000 a minute at 2 s a call: 50 calls a second, 125 in flight with the headroom, in
    # chunks of 25 calls a second each.
    pace = jobs.job_pace(spec=kind, observed=observed(3000, 2.0), items=5000)
    assert (pace.chunks, pace.slots, pace.rate) == (2, 63, 50.0)
    # Slower answers: more in flight, the same chunks; a larger quota: more chunks.
    assert jobs.job_pace(spec=kind, observed=observed(3000, 8.0), items=5000).slots == 250
    assert jobs.job_pace(spec=kind, observed=observed(30_000, 2.0), items=10**6).chunks == 20
    # A tokens-per-minute limit binds first when the requests are large: 600,000 tokens a
    # minute at 2,000 tokens a request is 5 requests a second.
    tokens = observed(3000, 2.0, tpm=600_000, tokens=2000)
    assert jobs.job_pace(spec=kind, observed=tokens, items=5000).rate == 5.0
    # No limit, or nothing seen yet: the kind's concurrency in LLM_JOB_PARALLEL_CHUNKS chunks
    # (fewer for a small job).
    default = jobs.Pace(settings.LLM_JOB_PARALLEL_CHUNKS, SLOTS)
    assert jobs.job_pace(spec=kind, observed=None, items=5000) == default
    assert jobs.job_pace(spec=kind, observed=observed(0, 2.0), items=5000).slots == SLOTS
    assert jobs.job_pace(spec=kind, observed=None, items=6).chunks == 2
    # A tiny quota still has the kind's own slots; a huge latency is capped per chunk.
    assert jobs.job_pace(spec=kind, observed=observed(10, 2.0), items=50).slots == SLOTS
    huge = jobs.job_pace(spec=kind, observed=observed(3000, 600.0), items=5000)
    assert huge.slots == jobs.MAX_CHUNK_SLOTS


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("sent")
def test_a_chunk_grows_to_its_pace_and_claims_more_as_slots_free(harness: Harness):
    """A job of a model limited to 1,500 a minute, answering in 0.3 s: its first chunk starts
    with the kind's 2 slots and 4 items, sees the limit and the latency, stores the pace (one
    chunk of 10 requests: 25 calls a second at 0.3 s, with the headroom) and grows to it,
    claiming items as they free up, until the job is done in that one chunk."""
    harness.fake.default = Reply(text='{"answer": "yes"}', delay=0.3)
    job = jobs.job_launch(
        kind=KIND, items=[(f"q-{n:03d}", {"n": n, "rpm": 1500}) for n in range(120)]
    )
    claimed = jobs.job_run_chunk(job_id=job.pk, gateway_factory=harness.gateway)
    job.refresh_from_db()
    assert (claimed, job.status, job.items_done) == (120, JobStatus.DONE, 120)
    assert job.pace["chunks"] == 1 and job.pace["rate"] == 25.0
    # The requests in flight that 25 a second need at the latency seen (0.3 s and what the
    # two sides of loopback add on a busy machine), with the headroom.
    assert 0.3 <= job.pace["latency_s"] < 1.5
    assert abs(job.pace["slots"] - 25 * job.pace["latency_s"] * 1.25) <= 1
    # It grew past the kind's 2 slots (to what the first answers' latency asked for, never
    # lowered while the chunk runs), never past what the quota needs at the slowest allowed.
    assert SLOTS < harness.fake.most_in_flight <= 25 * 1.5 * 1.25
    assert LedgerEntry.objects.filter(job_id=job.pk).count() == 120
    assert set(JobItem.objects.filter(job=job).values_list("attempts", flat=True)) == {1}


# --- the chunks a job misses -----------------------------------------------------------------


@pytest.mark.django_db
def test_a_job_is_sent_the_chunks_it_misses_only_while_a_worker_is_free(sent, kind):
    job = jobs.job_launch(kind=KIND, items=[(f"q-{n:03d}", {"n": n}) for n in range(40)])
    Job.objects.filter(pk=job.pk).update(pace=jobs.Pace(3, 8).as_json())
    job.refresh_from_db()
    now = timezone.now()
    assert jobs.item_claim_chunk(job_id=job.pk, now=now)  # one chunk of the three runs
    sent.clear()
    assert jobs.job_top_up(job=job, spec=kind, now=now) == 2 and sent == [job.pk] * 2

    # A task waits in the broker's queue: every worker process is busy, so a chunk more
    # would only wait too. Only what must go goes (a chunk's successor: at_least).
    sweep_expired_leases.apply_async()
    sent.clear()
    assert jobs.job_top_up(job=job, spec=kind, now=now) == 0
    assert jobs.job_top_up(job=job, spec=kind, now=now, at_least=1) == 1 and sent == [job.pk]


@pytest.mark.django_db
def test_a_chunk_that_stops_renewing_is_lost_within_two_heartbeats(sent, kind):
    job = jobs.job_launch(kind=KIND, items=[(f"q-{n:03d}", {"n": n}) for n in range(8)])
    now = timezone.now()
    claim = jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert claim and jobs._live_chunks(job.pk, now) == [claim.token]
    beats = jobs.heartbeat_seconds()
    assert beats == 5.0  # a third of the default 60 s lease is more: at most 5 s
    later = now + timedelta(seconds=2 * beats + 1.5)  # two beats missed, the lease still on
    assert jobs._live_chunks(job.pk, later) == []
    progress = jobs.job_progress(job)
    assert (progress["lost"], progress["chunks"]) == (0, 1)


# --- the job page ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_page_says_what_a_running_job_waits_for(sent, root, django_assert_num_queries):
    job = jobs.job_launch(kind=KIND, items=[(f"q-{n:03d}", {"n": n}) for n in range(10)])
    # A chunk that claimed 30 s ago and stopped renewing (its worker was killed): its lease
    # has 30 s to go, and its items are lost meanwhile.
    claimed = timezone.now() - timedelta(seconds=30)
    lost = jobs.item_claim_chunk(job_id=job.pk, now=claimed)
    assert lost and len(lost.items) == 4
    Job.objects.filter(pk=job.pk).update(pace=jobs.Pace(2, 63, rate=50.0, latency_s=2.04).as_json())
    client = Client()
    client.force_login(root)
    url = reverse("job", args=[job.pk])
    # Session, user with their roles, job, count and page of items, the running items'
    # counts (lost ones and live chunks with them), the deferred ones. No failures.
    with django_assert_num_queries(7):
        page = client.get(url).content.decode()
    until = timezone.localtime(lost.items[0].lease_until).strftime("%H:%M:%S")
    assert f"4 items wait for a lost worker's lease to expire at {until}" in page
    # No chunk alive, items ready: no worker has taken the job's next chunk.
    assert "Waiting for a worker" in page
    assert (
        "Runs 2 chunks at once, each with up to 63 requests at the model: it allows 3000 "
        "requests a minute and answers in 2.0 s." in page
    )

    # Once the lease ran out: handed out again at the next sweep.
    JobItem.objects.filter(job=job, status=ItemStatus.RUNNING).update(
        lease_until=timezone.now() - timedelta(seconds=1)
    )
    page = client.get(url).content.decode()
    assert "4 items of a lost worker are handed out again within" in page
    # A live chunk: nothing to explain.
    JobItem.objects.filter(job=job, status=ItemStatus.RUNNING).update(
        lease_until=timezone.now() + timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    )
    page = client.get(url).content.decode()
    assert "lost worker" not in page and "Waiting for a worker" not in page
