"""Lease renewal: a live chunk keeps its items however long they take, a dead one loses them
to the sweeper once the lease runs out, and a chunk never renews items it no longer holds."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from llm import jobs
from llm.gateway import Gateway, GatewaySettings
from llm.models import ItemStatus, Job, JobItem, JobStatus
from llm.ratelimit import MemoryTokenBucket

KIND = "test.slow"

pytestmark = pytest.mark.usefixtures("sent")  # chunk tasks are caught, not sent


async def slow(gateway: Gateway, payload: dict[str, Any]) -> dict[str, Any]:
    await asyncio.sleep(payload["sleep"])
    return {"slept": payload["sleep"]}


@pytest.fixture(autouse=True)
def slow_kind() -> Iterator[None]:
    jobs.register_kind(KIND, slow, chunk_size=5, concurrency=5)
    yield
    jobs._registry.pop(KIND, None)


@pytest.fixture
def one_second_leases(settings) -> None:
    settings.LLM_JOB_LEASE_SECONDS = 1


def launch(n: int, sleep: float) -> Job:
    return jobs.job_launch(kind=KIND, items=[(f"img-{i}", {"sleep": sleep}) for i in range(n)])


def running(job: Job) -> list[JobItem]:
    return list(JobItem.objects.filter(job=job, status=ItemStatus.RUNNING))


@pytest.mark.django_db(transaction=True)
def test_a_live_chunk_keeps_items_that_outlast_the_lease(one_second_leases, sent):
    job = launch(3, sleep=2.5)
    sent.clear()  # the launch's own chunk task: run below by hand
    claimed: list[int] = []

    def run_chunk() -> None:
        try:
            claimed.append(
                jobs.job_run_chunk(
                    job_id=job.pk,
                    gateway_factory=lambda: Gateway(
                        limiter=MemoryTokenBucket(), conf=GatewaySettings()
                    ),
                )
            )
        finally:
            connections.close_all()

    runner = threading.Thread(target=run_chunk)
    runner.start()
    try:
        deadline = time.monotonic() + 5
        while len(running(job)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        first = running(job)
        assert len(first) == 3
        token = first[0].lease_token
        time.sleep(1.6)  # well past the claim's own lease of 1 s
        now = timezone.now()
        counts = jobs.jobs_sweep(now=now)
        assert (counts["requeued"], counts["failed"], counts["enqueued"]) == (0, 0, 0)
        assert jobs.item_claim_chunk(job_id=job.pk, now=now) is None  # nothing to take over
        still = running(job)
        assert [i.lease_token for i in still] == [token] * 3
        assert all(i.lease_until > now for i in still)
    finally:
        runner.join(timeout=30)
    assert claimed == [3]
    job.refresh_from_db()
    assert (job.status, job.items_done) == (JobStatus.DONE, 3)
    items = JobItem.objects.filter(job=job)
    assert {(i.attempts, i.lease_until) for i in items} == {(1, None)}  # once, lease released
    assert sent == []  # the sweep sent no second chunk


@pytest.mark.django_db
def test_a_dead_chunk_loses_its_items_to_the_sweeper(
    one_second_leases, sent, django_capture_on_commit_callbacks
):
    job = launch(3, sleep=2.5)
    now = timezone.now()
    claim = jobs.item_claim_chunk(job_id=job.pk, now=now)  # and no runner: it died at once
    assert claim and len(claim.items) == 3
    assert jobs.jobs_sweep(now=now + timedelta(seconds=0.5))["requeued"] == 0
    with django_capture_on_commit_callbacks(execute=True):
        counts = jobs.jobs_sweep(now=now + timedelta(seconds=1.5))
    assert (counts["requeued"], counts["enqueued"]) == (3, 1)
    assert sent == [job.pk]
    assert JobItem.objects.filter(job=job, status=ItemStatus.PENDING).count() == 3
    # The dead chunk's token is worth nothing now: its heartbeat would renew nothing.
    assert jobs.item_renew_leases(job_id=job.pk, token=claim.token) == 0


@pytest.mark.django_db
def test_renewal_extends_only_the_chunks_running_items(one_second_leases, sent):
    job = launch(4, sleep=0)
    now = timezone.now()
    claim = jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert claim
    done, *rest = claim.items
    assert jobs.item_record(item_id=done.pk, token=claim.token, outcome=jobs.ItemResult({}))
    later = now + timedelta(seconds=0.9)
    assert jobs.item_renew_leases(job_id=job.pk, token=claim.token, now=later) == 3
    leases = dict(JobItem.objects.filter(job=job).values_list("pk", "lease_until"))
    assert leases[done.pk] is None
    assert {leases[i.pk] for i in rest} == {later + timedelta(seconds=1)}
    assert jobs.item_renew_leases(job_id=job.pk, token="someone-else", now=later) == 0
