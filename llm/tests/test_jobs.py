"""The job system: services, claims and leases, idempotent recording, quota parking, a fault
run with 20% of items failing, and runs through a real Celery worker on a real Redis."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from llm import jobs
from llm.gateway import Gateway, GatewaySettings
from llm.models import ItemStatus, Job, JobItem, JobStatus
from llm.ratelimit import MemoryTokenBucket
from llm.tasks import run_job_chunk
from llm.tests.job_kinds import flaky_failure
from tests.processes import child_database_url
from tests.test_worker import celery_app, redis_url, stop  # noqa: F401 (fixtures)


def local_gateway() -> Gateway:
    """No Redis, no keys: the test kinds make no provider calls."""
    return Gateway(limiter=MemoryTokenBucket(), conf=GatewaySettings())


class Sent(list):
    """The chunk tasks sent now (job ids), and in `later` those sent with a countdown."""

    later: list[tuple[int, float]]


@pytest.fixture
def sent(monkeypatch) -> Sent:
    """The chunk tasks the services send, caught instead of going to a broker (after the
    commit, as delay_on_commit would)."""
    calls = Sent()
    calls.later = []

    def delay_on_commit(job_id: int) -> None:
        transaction.on_commit(lambda: calls.append(job_id))

    def apply_async(args: tuple[int], countdown: float | None = None, **options) -> None:
        # A worker's sends go at once (a chunk's successor, the sweep's); a countdown later.
        if countdown is None:
            calls.append(args[0])
        else:
            calls.later.append((args[0], countdown))

    monkeypatch.setattr(run_job_chunk, "delay_on_commit", delay_on_commit)
    monkeypatch.setattr(run_job_chunk, "apply_async", apply_async)
    return calls


def launch(kind: str, n: int, user=None, **payload) -> Job:
    return jobs.job_launch(
        kind=kind,
        items=[(f"img-{i:03d}", {"n": i, **payload}) for i in range(n)],
        params={"p": 1},
        user=user,
    )


def drain(job: Job, runners: int = 1) -> None:
    """Run chunks until the job has nothing left to claim, from `runners` threads at once."""

    def run() -> None:
        try:
            while jobs.job_run_chunk(job_id=job.pk, gateway_factory=local_gateway):
                pass
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(runners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    job.refresh_from_db()


def assert_counters_match_rows(job: Job) -> None:
    job.refresh_from_db()
    by_status = {s: JobItem.objects.filter(job=job, status=s).count() for s in ItemStatus}
    assert job.items_total == JobItem.objects.filter(job=job).count()
    assert job.items_done == by_status[ItemStatus.DONE]
    assert job.items_failed == by_status[ItemStatus.FAILED]
    assert job.items_remaining == by_status[ItemStatus.PENDING] + by_status[ItemStatus.RUNNING]


# --- launching -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_launch_creates_items_and_enqueues_after_commit(
    sent, root, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        job = launch("test.echo", 12, user=root)
        assert sent == []  # nothing leaves before the commit
    assert len(callbacks) == 3  # ceil(12 / chunk_size 5), under LLM_JOB_PARALLEL_CHUNKS
    assert sent == [job.pk] * 3
    assert (job.status, job.items_total, job.items_remaining, job.launched_by) == (
        JobStatus.QUEUED,
        12,
        12,
        root,
    )
    items = JobItem.objects.filter(job=job).order_by("key")
    assert [i.key for i in items][:2] == ["img-000", "img-001"]
    assert all(i.status == ItemStatus.PENDING and i.attempts == 0 for i in items)
    assert items[3].payload == {"n": 3}


@pytest.mark.django_db
def test_launch_refuses_unknown_kinds_duplicate_keys_and_empty_scopes(sent):
    with pytest.raises(jobs.JobError, match="unknown job kind"):
        jobs.job_launch(kind="nope", items=[("a", {})])
    with pytest.raises(jobs.JobError, match="unique"):
        jobs.job_launch(kind="test.echo", items=[("a", {}), ("a", {})])
    with pytest.raises(jobs.JobError, match="at least one"):
        jobs.job_launch(kind="test.echo", items=[])
    assert not Job.objects.exists() and sent == []


# --- claims and recording --------------------------------------------------------------------


@pytest.mark.django_db
def test_claims_lease_chunks_and_take_back_expired_leases(sent):
    job = launch("test.echo", 12)
    now = timezone.now()
    first = jobs.item_claim_chunk(job_id=job.pk, now=now)
    second = jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert first and second
    assert [i.key for i in first.items] == [f"img-{i:03d}" for i in range(5)]
    assert [i.key for i in second.items] == [f"img-{i:03d}" for i in range(5, 10)]
    lease = now + timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS)
    assert all(
        (i.status, i.attempts, i.lease_until, i.lease_token)
        == (ItemStatus.RUNNING, 1, lease, first.token)
        for i in first.items
    )
    job.refresh_from_db()
    assert (job.status, job.started_at) == (JobStatus.RUNNING, now)

    third = jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert third and len(third.items) == 2
    assert jobs.item_claim_chunk(job_id=job.pk, now=now) is None  # all leased

    later = lease + timedelta(seconds=1)  # the first chunks' worker is gone
    retaken = jobs.item_claim_chunk(job_id=job.pk, now=later)
    assert retaken and [i.key for i in retaken.items] == [i.key for i in first.items]
    assert {i.attempts for i in retaken.items} == {2}
    # The old chunk's late answer is refused: the item belongs to the new token now.
    late = jobs.ItemResult({"late": True})
    assert not jobs.item_record(item_id=first.items[0].pk, token=first.token, outcome=late)


@pytest.mark.django_db
def test_recording_the_same_item_twice_changes_nothing(sent):
    job = launch("test.echo", 2)
    claim = jobs.item_claim_chunk(job_id=job.pk)
    assert claim
    item = claim.items[0]
    outcome = jobs.ItemResult({"answer": 42}, tokens_in=7, tokens_out=3, cost=Decimal("0.5"))
    assert jobs.item_record(item_id=item.pk, token=claim.token, outcome=outcome)
    snapshot = Job.objects.values().get(pk=job.pk)
    assert not jobs.item_record(item_id=item.pk, token=claim.token, outcome=outcome)
    assert not jobs.item_record(item_id=item.pk, token=claim.token, outcome=ValueError("x"))
    assert Job.objects.values().get(pk=job.pk) == snapshot
    item.refresh_from_db()
    assert (item.status, item.result, item.tokens_in) == (ItemStatus.DONE, {"answer": 42}, 7)
    assert (
        snapshot["items_done"],
        snapshot["items_remaining"],
        snapshot["tokens_in"],
        snapshot["cost"],
    ) == (1, 1, 7, Decimal("0.5"))


@pytest.mark.django_db
def test_a_mixed_batch_records_each_item_its_own_values_in_a_fixed_number_of_queries(
    sent, django_assert_num_queries
):
    """items_record: one read and one UPDATE per kind of outcome, whatever the batch holds,
    each item keeping its own result, reason and spending; an item of another chunk, or one
    named twice, changes nothing."""
    job = launch("test.echo", 8)
    claim, other = jobs.item_claim_chunk(job_id=job.pk), jobs.item_claim_chunk(job_id=job.pk)
    assert claim and other and len(claim.items + other.items) == 8
    a, b, c, d, e, f, g, h = claim.items + other.items
    # One chunk holds all but h, which the other chunk holds.
    JobItem.objects.filter(lease_token=other.token).exclude(pk=h.pk).update(lease_token=claim.token)
    # A deferred run spent before: its spending is added to, not replaced.
    JobItem.objects.filter(pk=a.pk).update(tokens_in=100, cost=Decimal("1"))
    now = timezone.now()
    outcomes = [
        (a.pk, jobs.ItemResult({"n": 1}, tokens_in=5, tokens_out=1, cost=Decimal("0.25"))),
        (b.pk, jobs.ItemResult({"n": 2}, tokens_in=6, tokens_out=2, cost=Decimal("0.5"))),
        (c.pk, jobs.ItemFailed("bad answer", raw_output="{oops")),
        (d.pk, ValueError("boom")),
        (e.pk, jobs.ItemDeferred(30, {"batch": "b-1"})),
        (f.pk, jobs.ItemDeferred(90, {"batch": "b-2"})),
        (g.pk, jobs.ItemResult({"n": 7})),
        (g.pk, ValueError("a second outcome for g")),
        (h.pk, jobs.ItemResult({"n": 8})),
    ]
    # the savepoint and its release, the read, one UPDATE per kind (done, failed, deferred),
    # the job's counters, and the two of _finish_if_over
    with django_assert_num_queries(9):
        assert jobs.items_record(job_id=job.pk, token=claim.token, outcomes=outcomes, now=now) == 5
    rows = {row.pk: row for row in JobItem.objects.filter(job=job)}
    assert [(rows[x.pk].status, rows[x.pk].result) for x in (a, b, g)] == [
        (ItemStatus.DONE, {"n": 1}),
        (ItemStatus.DONE, {"n": 2}),
        (ItemStatus.DONE, {"n": 7}),
    ]
    assert (rows[a.pk].tokens_in, rows[a.pk].tokens_out, rows[a.pk].cost) == (
        105,
        1,
        Decimal("1.25"),
    )
    assert (rows[b.pk].tokens_in, rows[b.pk].cost) == (6, Decimal("0.5"))
    assert [(rows[x.pk].status, rows[x.pk].last_error, rows[x.pk].raw_output) for x in (c, d)] == [
        (ItemStatus.FAILED, "bad answer", "{oops"),
        (ItemStatus.FAILED, "ValueError: boom", ""),
    ]
    assert [
        (rows[x.pk].status, rows[x.pk].result, rows[x.pk].not_before, rows[x.pk].attempts)
        for x in (e, f)
    ] == [
        (ItemStatus.PENDING, {"batch": "b-1"}, now + timedelta(seconds=30), 0),
        (ItemStatus.PENDING, {"batch": "b-2"}, now + timedelta(seconds=90), 0),
    ]
    assert (rows[h.pk].status, rows[h.pk].result) == (ItemStatus.RUNNING, None)
    job.refresh_from_db()
    assert (job.items_done, job.items_failed, job.items_remaining) == (3, 2, 3)
    assert (job.tokens_in, job.tokens_out, job.cost) == (11, 3, Decimal("0.75"))


@pytest.mark.django_db
def test_a_failure_keeps_its_reason_raw_output_and_cost(sent):
    job = launch("test.echo", 1)
    claim = jobs.item_claim_chunk(job_id=job.pk)
    assert claim
    failure = jobs.ItemFailed("output did not validate", raw_output="{not json")
    assert jobs.item_record(item_id=claim.items[0].pk, token=claim.token, outcome=failure)
    item = JobItem.objects.get(job=job)
    assert (item.status, item.last_error, item.raw_output) == (
        ItemStatus.FAILED,
        "output did not validate",
        "{not json",
    )
    job.refresh_from_db()
    assert (job.status, job.items_failed, job.items_remaining) == (JobStatus.DONE, 1, 0)
    assert job.finished_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_job_is_done_when_its_remaining_counter_reaches_zero(sent):
    job = launch("test.echo", 12)
    drain(job)
    assert (job.status, job.items_done, job.items_failed, job.items_remaining) == (
        JobStatus.DONE,
        12,
        0,
        0,
    )
    assert (job.tokens_in, job.tokens_out, job.cost) == (120, 60, Decimal("0.012"))
    assert job.finished_at is not None
    item = JobItem.objects.get(job=job, key="img-004")
    # The handler saw its item through current_item.
    assert item.result == {"echo": 4, "key": "img-004", "job": job.pk}
    progress = jobs.job_progress(job)
    assert (progress["percent"], progress["done"], progress["running"]) == (100.0, 12, 0)


@pytest.mark.django_db(transaction=True)
def test_outcomes_that_come_apart_are_recorded_together_and_closing_does_not_wait(
    sent, monkeypatch
):
    """The recorder gathers what finishes within RECORD_EVERY_S into one write; the chunk's
    end writes what is left at once, however long the interval."""
    batches: list[int] = []
    record = jobs.items_record

    def counted(**kwargs):
        batches.append(len(kwargs["outcomes"]))
        return record(**kwargs)

    monkeypatch.setattr(jobs, "items_record", counted)
    # Five items finishing 15 ms apart: each once written on its own (5 batches).
    staggered = jobs.job_launch(
        kind="test.echo", items=[(f"img-{i:03d}", {"n": i, "sleep": 0.015 * i}) for i in range(5)]
    )
    monkeypatch.setattr(jobs, "RECORD_EVERY_S", 0.5)
    drain(staggered)
    assert (staggered.items_done, batches) == (5, [5])

    batches.clear()
    monkeypatch.setattr(jobs, "RECORD_EVERY_S", 60)
    prompt = launch("test.echo", 5)
    started = time.monotonic()
    drain(prompt)
    assert (prompt.status, prompt.items_done, batches) == (JobStatus.DONE, 5, [5])
    assert time.monotonic() - started < 10  # not the 60 s interval


@pytest.mark.django_db(transaction=True)
def test_the_first_chunk_task_of_a_process_freezes_the_loaded_heap_once(sent, monkeypatch):
    import gc

    from llm import tasks

    monkeypatch.setattr(tasks, "_heap_frozen", False)  # as in a fresh worker process
    monkeypatch.setattr(tasks, "GATEWAY_FACTORY", local_gateway)
    job = launch("test.echo", 10)  # two chunks of 5
    claimed: list[int] = []

    def task() -> None:  # in a thread of its own, as drain() runs chunks
        try:
            claimed.append(run_job_chunk(job.pk))
        finally:
            connections.close_all()

    def run_task() -> None:
        thread = threading.Thread(target=task)
        thread.start()
        thread.join()

    before = gc.get_freeze_count()
    try:
        run_task()
        frozen = gc.get_freeze_count()
        assert frozen > before  # the modules, Django, this test: all out of the collector's way
        run_task()
        # Once per process, not once per chunk: nothing joined (frozen objects freed left).
        assert gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()  # the rest of the test session collects as before
    # The first chunk claimed the rest as its slots freed up; the second found nothing left.
    assert claimed == [10, 0]
    job.refresh_from_db()
    assert (job.status, job.items_done) == (JobStatus.DONE, 10)


# --- cancel, retry, attempts -----------------------------------------------------------------


@pytest.mark.django_db
def test_cancel_stops_pending_items_and_running_ones_still_count(sent):
    job = launch("test.echo", 12)
    claim = jobs.item_claim_chunk(job_id=job.pk)
    assert claim
    job = jobs.job_cancel(job_id=job.pk)
    assert (job.status, job.items_remaining, job.finished_at) == (JobStatus.CANCELLED, 5, None)
    assert JobItem.objects.filter(job=job, status=ItemStatus.CANCELLED).count() == 7
    assert jobs.item_claim_chunk(job_id=job.pk) is None  # nothing more is handed out
    for item in claim.items:
        assert jobs.item_record(
            item_id=item.pk, token=claim.token, outcome=jobs.ItemResult({"ok": True})
        )
    job.refresh_from_db()
    assert (job.status, job.items_done, job.items_remaining) == (JobStatus.CANCELLED, 5, 0)
    assert job.finished_at is not None
    assert jobs.job_progress(job)["cancelled"] == 7
    with pytest.raises(jobs.JobError, match="already cancelled"):
        jobs.job_cancel(job_id=job.pk)
    with pytest.raises(jobs.JobError, match="cancelled"):
        jobs.job_retry_failed(job_id=job.pk)


@pytest.mark.django_db(transaction=True)
def test_retry_failed_puts_failures_back_and_they_run_again(sent, monkeypatch):
    job = launch("test.flaky", 60)
    drain(job)
    failed = set(
        JobItem.objects.filter(job=job, status=ItemStatus.FAILED).values_list("key", flat=True)
    )
    assert failed and job.status == JobStatus.DONE
    sent.clear()
    assert jobs.job_retry_failed(job_id=job.pk) == len(failed)
    job.refresh_from_db()
    assert (job.status, job.items_failed, job.items_remaining, job.finished_at) == (
        JobStatus.QUEUED,
        0,
        len(failed),
        None,
    )
    assert sent and set(sent) == {job.pk}
    # This time the handler succeeds for everyone.
    monkeypatch.setattr("llm.tests.job_kinds.flaky_failure", lambda key: None)
    drain(job)
    assert (job.status, job.items_done, job.items_failed) == (JobStatus.DONE, 60, 0)
    assert jobs.job_retry_failed(job_id=job.pk) == 0


@pytest.mark.django_db
def test_an_item_whose_worker_keeps_dying_fails_after_max_attempts(sent, settings):
    settings.LLM_JOB_MAX_ATTEMPTS = 2
    job = launch("test.echo", 1)
    now = timezone.now()
    step = timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS + 1)
    assert jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert jobs.item_claim_chunk(job_id=job.pk, now=now + step)  # attempt 2
    assert jobs.item_claim_chunk(job_id=job.pk, now=now + 2 * step) is None
    item = JobItem.objects.get(job=job)
    assert (item.status, item.attempts) == (ItemStatus.FAILED, 2)
    assert "lease expired on each of 2 attempts" in item.last_error
    job.refresh_from_db()
    assert (job.status, job.items_failed) == (JobStatus.DONE, 1)


# --- quota -----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_quota_parks_the_job_without_burning_attempts_and_the_sweep_resumes_it(sent):
    items = [(f"img-{i}", {"n": i, "quota": i == 5}) for i in range(8)]
    job = jobs.job_launch(kind="test.quota", items=items)
    drain(job)  # chunk 1 (items 0-3) succeeds, chunk 2 meets the spent quota at item 5
    assert job.status == JobStatus.WAITING_FOR_QUOTA
    assert "daily quota exhausted" in job.last_error
    assert (job.items_done, job.items_failed, job.items_remaining) == (5, 0, 3)
    parked = JobItem.objects.filter(job=job, status=ItemStatus.PENDING)
    assert sorted(parked.values_list("key", flat=True)) == ["img-5", "img-6", "img-7"]
    assert set(parked.values_list("attempts", flat=True)) == {0}
    assert jobs.item_claim_chunk(job_id=job.pk) is None  # a parked job hands nothing out

    sent.clear()
    assert jobs.jobs_sweep()["resumed"] == 0  # the retry delay (30 s) has not passed
    assert jobs.jobs_sweep(now=job.resume_at + timedelta(seconds=1))["resumed"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and sent == [job.pk]

    JobItem.objects.filter(job=job, key="img-5").update(payload={"n": 5})  # quota is back
    drain(job)
    assert (job.status, job.items_done) == (JobStatus.DONE, 8)


@pytest.mark.django_db(transaction=True)
def test_retry_resumes_a_job_waiting_for_quota(sent):
    job = jobs.job_launch(kind="test.quota", items=[("a", {"n": 1, "quota": True})])
    drain(job)
    assert job.status == JobStatus.WAITING_FOR_QUOTA
    assert jobs.job_retry_failed(job_id=job.pk) == 0
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED and job.resume_at is None


# --- the sweep -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_sweep_requeues_expired_leases_and_restarts_stalled_jobs(
    sent, django_capture_on_commit_callbacks
):
    job = launch("test.echo", 7)  # two chunks' worth: the job runs two chunks at once
    now = timezone.now()
    claim = jobs.item_claim_chunk(job_id=job.pk, now=now)
    assert claim
    sent.clear()
    # One chunk runs of the two the job runs at once (its message was lost): one more is sent.
    assert jobs.jobs_sweep(now=now)["enqueued"] == 1 and sent == [job.pk]
    assert jobs.item_claim_chunk(job_id=job.pk, now=now)
    sent.clear()
    assert jobs.jobs_sweep(now=now)["enqueued"] == 0  # two live chunks: they will go on
    later = now + timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS + 1)
    with django_capture_on_commit_callbacks(execute=True):
        counts = jobs.jobs_sweep(now=later)
    assert (counts["requeued"], counts["enqueued"]) == (7, 1)
    assert sent == [job.pk] * 2  # two chunks' worth of pending items
    assert JobItem.objects.filter(job=job, status=ItemStatus.PENDING).count() == 7


@pytest.mark.django_db
def test_a_job_of_an_unknown_kind_fails_with_its_reason(sent):
    job = Job.objects.create(kind="gone.kind", items_total=1, items_remaining=1)
    JobItem.objects.create(job=job, key="a")
    assert jobs.job_run_chunk(job_id=job.pk, gateway_factory=local_gateway) == 0
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "unknown job kind" in job.last_error


# --- faults ----------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_with_20_percent_failing_every_item_ends_done_or_failed_with_its_reason(sent):
    n = 200
    job = launch("test.flaky", n, sleep=0.001)
    drain(job, runners=3)  # three chunk runners racing over the same job
    expected_failures = {f"img-{i:03d}": flaky_failure(f"img-{i:03d}") for i in range(n)}
    expected_failures = {k: v for k, v in expected_failures.items() if v is not None}
    assert 0.1 * n < len(expected_failures) < 0.3 * n

    items = list(JobItem.objects.filter(job=job))
    assert len(items) == n and len({i.key for i in items}) == n
    for item in items:
        failure = expected_failures.get(item.key)
        if failure is None:
            assert (item.status, item.result, item.last_error) == (
                ItemStatus.DONE,
                {"ok": item.payload["n"]},
                "",
            )
        else:
            assert item.status == ItemStatus.FAILED and item.result is None
            assert item.last_error == jobs._reason(failure)
            assert item.last_error  # every failure says why
    assert {i.attempts for i in items} == {1}  # none ran twice
    assert (job.status, job.items_done, job.items_failed, job.items_remaining) == (
        JobStatus.DONE,
        n - len(expected_failures),
        len(expected_failures),
        0,
    )
    assert_counters_match_rows(job)
    reasons = {i.last_error.split(":")[0] for i in items if i.status == ItemStatus.FAILED}
    assert {"ValueError", "RuntimeError", "KeyError", "output did not validate"} <= reasons
    raw = JobItem.objects.filter(job=job, last_error="output did not validate").first()
    assert raw is not None and raw.raw_output.startswith("not json")


# --- a real worker on a real Redis -----------------------------------------------------------

REPO = Path(settings.BASE_DIR)


def start_worker(
    redis_url: str,
    log_path: Path,
    name: str,  # noqa: F811 (a value here)
    database_url: str = "",
    processes: int = 0,
    queues: str = "",
    **env_extra: str,
) -> subprocess.Popen:
    """tests/test_worker.py's worker, importing the test kinds (`-I`), with extra settings,
    on the test database (or `database_url`): one process (the solo pool), or with
    `processes` a prefork pool of that many, as production runs it. The worker leads a process
    group of its own, so a test can kill it whole (os.killpg), as a container is killed."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=database_url or child_database_url(),
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
        **env_extra,
    )
    with open(log_path, "a") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "gamut_site",
                "worker",
                *(
                    ["--pool=prefork", f"--concurrency={processes}"]
                    if processes
                    else ["--pool=solo"]
                ),
                "-I",
                "llm.tests.job_kinds",
                "--loglevel=WARNING",
                "--without-heartbeat",
                "--without-gossip",
                "--without-mingle",
                *(["-Q", queues] if queues else []),
                "-n",
                worker_name(name),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def worker_name(name: str) -> str:
    """The node name start_worker gives a worker (control commands address it by it)."""
    return f"{name}-{os.getpid()}@{socket.gethostname()}"


def wait_for(job: Job, condition: Callable[[Job], bool], timeout: float, log_path: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if condition(job):
            return
        time.sleep(0.1)
    pytest.fail(f"job {job.pk} stuck at {jobs.job_progress(job)}:\n{log_path.read_text()}")


@pytest.mark.django_db(transaction=True)
def test_a_job_runs_through_a_real_worker(celery_app, redis_url, tmp_path):  # noqa: F811
    log_path = tmp_path / "worker.log"
    worker = start_worker(redis_url, log_path, "jobs")
    try:
        job = launch("test.flaky", 40, sleep=0.01)
        wait_for(job, lambda j: j.status == JobStatus.DONE, 60, log_path)
        assert worker.poll() is None, log_path.read_text()
    finally:
        stop(worker, timeout=15)
    failures = sum(flaky_failure(f"img-{i:03d}") is not None for i in range(40))
    assert (job.items_done, job.items_failed) == (40 - failures, failures)
    assert_counters_match_rows(job)
    assert set(JobItem.objects.filter(job=job).values_list("attempts", flat=True)) == {1}


@pytest.mark.slow  # waits on real servers for 8-15 s: make test leaves it to CI
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_job_loses_and_duplicates_nothing(
    celery_app,
    redis_url,  # noqa: F811
    tmp_path,
):
    log_path = tmp_path / "worker.log"
    short = {"LLM_JOB_LEASE_SECONDS": "3", "CELERY_VISIBILITY_TIMEOUT": "5"}
    first = start_worker(redis_url, log_path, "doomed", **short)
    second = None
    try:
        job = launch("test.echo", 40, sleep=0.2)
        wait_for(job, lambda j: j.items_done >= 5, 60, log_path)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        job.refresh_from_db()
        assert job.items_remaining > 0, "the job ended before the kill"
        second = start_worker(redis_url, log_path, "rescuer", **short)
        # The beat's sweep, after the dead worker's leases expire, hands its items out again
        # (the unacked message also comes back after the visibility timeout: either will do).
        time.sleep(3.5)
        jobs.jobs_sweep()
        wait_for(job, lambda j: j.status == JobStatus.DONE, 90, log_path)
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc, timeout=15)
    assert (job.items_done, job.items_failed, job.items_remaining) == (40, 0, 0)
    assert_counters_match_rows(job)
    assert (job.tokens_in, job.cost) == (400, Decimal("0.040"))  # each item counted once
    results = list(JobItem.objects.filter(job=job).values_list("result", flat=True))
    assert sorted(r["echo"] for r in results) == list(range(40))
    # Items the killed worker held were claimed a second time; whether it held one at the very
    # moment of the kill depends on timing (on PostgreSQL it is often between two chunks).
    assert max(JobItem.objects.filter(job=job).values_list("attempts", flat=True)) <= 2


def start_beat(redis_url: str, log_path: Path, schedule: Path) -> subprocess.Popen:  # noqa: F811
    """`celery beat` as docker-compose runs it, with the default schedule of the settings."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="gamut_site.settings",
        DATABASE_URL=child_database_url(),
        REDIS_URL=redis_url,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
    )
    with open(log_path, "a") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "gamut_site",
                "beat",
                "--loglevel=WARNING",
                "--schedule",
                str(schedule),
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow  # waits on real servers for 8-15 s: make test leaves it to CI
@pytest.mark.django_db(transaction=True)
def test_a_waiting_job_polls_on_its_schedule_without_beat(
    celery_app,
    redis_url,  # noqa: F811
    tmp_path,
):
    log_path = tmp_path / "worker.log"
    worker = start_worker(redis_url, log_path, "poller")  # and no beat anywhere
    try:
        job = launch("test.waits", 3, polls=2, seconds=2)
        wait_for(job, lambda j: j.status == JobStatus.DONE, 60, log_path)
        assert worker.poll() is None, log_path.read_text()
    finally:
        stop(worker, timeout=15)
    # Two waits of 2 s each from the first claim, then done (the worker's start-up aside).
    took = (job.finished_at - job.started_at).total_seconds()
    assert 4 <= took < 12, took
    assert (
        list(JobItem.objects.filter(job=job).values_list("result", flat=True)) == [{"polls": 2}] * 3
    )


@pytest.mark.django_db(transaction=True)
def test_a_deferred_item_waits_keeps_its_state_and_its_attempts(sent):
    job = launch("test.waits", 2, polls=2, seconds=60)
    drain(job)  # both defer: pending, not claimable for 60 s
    # The chunk sent one task due when they may run: the job polls without beat.
    [(job_id, countdown)] = sent.later
    assert job_id == job.pk and 59 < countdown <= 60
    items = list(JobItem.objects.filter(job=job))
    assert {(i.status, i.attempts, i.result["polls"]) for i in items} == {
        (ItemStatus.PENDING, 0, 1)
    }
    assert job.items_remaining == 2 and job.status == JobStatus.RUNNING
    assert jobs.job_progress(job)["waiting"] == 2
    assert jobs.item_claim_chunk(job_id=job.pk) is None
    sent.clear()
    assert jobs.jobs_sweep()["enqueued"] == 0  # nothing is ready: no chunk task
    later = timezone.now() + timedelta(seconds=61)
    assert jobs.jobs_sweep(now=later)["enqueued"] == 1  # its time has come
    assert sent == [job.pk]
    for _ in range(2):  # the second poll defers again, the third finishes
        JobItem.objects.filter(job=job).update(not_before=timezone.now() - timedelta(seconds=1))
        drain(job)
    assert job.status == JobStatus.DONE and job.items_done == 2
    assert (
        list(JobItem.objects.filter(job=job).values_list("result", "attempts"))
        == [({"polls": 2}, 1)] * 2
    )  # three runs each, one attempt used
    assert job.tokens_in == 2
    assert_counters_match_rows(job)
