"""The generic job system: a registry of job kinds, the services that launch, cancel and retry
jobs, and the chunk runner that the Celery tasks call.

It knows nothing of the apps that use it. An app registers a handler per kind of work, at import
time of a module its AppConfig.ready() imports (so web processes and workers both know it):

    async def generate(gateway: Gateway, payload: dict) -> ItemResult | dict: ...
    register_kind("annotation.generate", generate, chunk_size=50, concurrency=16)

The database is the source of truth: items are claimed by conditional UPDATE with a lease and a
token, an outcome is recorded only by the chunk holding the item's current token, and the job's
counters move by F() expressions in that same transaction. A running chunk renews its leases
(every few seconds), so only a dead or stuck chunk loses its items to the sweeper. A job
is over when its remaining counter reaches zero (no chords).

A chunk is one Celery task's turn at a job: it claims items in batches as its slots free up, for
TURN_SECONDS, then finishes what it holds and sends its successor. How many chunks a job runs
at once, and how many requests each has in flight, is the job's pace (Pace): what the model's
per-minute limits allow at the latency its answers take, spread over chunks of at most
LLM_JOB_CHUNK_CALLS_PER_SECOND each. Chunks are added while a worker process is free (nothing
waits in the broker's queue), so a job grows to its pace or to the workers there are. A chunk
that stopped renewing its leases (its worker was killed) no longer counts: the job's other
chunks and the sweep replace it within seconds, while only its own items wait for their leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection, connections, transaction
from django.db.models import Case, Count, Exists, F, Max, Min, OuterRef, Q, Value, When
from django.db.models.functions import Cast
from django.utils import timezone

from .gateway import (
    CallResult,
    Gateway,
    ItemAnswers,
    Observed,
    QuotaExhausted,
    item_answers,
    ledger_item,
)
from .models import ItemStatus, Job, JobItem, JobStatus
from .outages import (
    DATABASE_PATIENCE_S,
    OUTAGE_ERRORS,
    database_back,
    forget_broken_connection,
    is_outage,
)
from .outages import pause as outage_pause
from .sending import chunk_task, queue_idle, send_chunks

log = logging.getLogger(__name__)

ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
OVER = (JobStatus.DONE, JobStatus.CANCELLED, JobStatus.FAILED)
_MAX_ERROR = 10_000  # characters of a reason kept on a row


class JobError(Exception):
    """A job service was asked for something the job's state does not allow."""


class AlreadyRunning(Exception):  # noqa: N818 (what the caller is told)
    """A kind that runs one job at a time (the diversity report, the export) has one queued or
    running already: `job` is that one."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.pk} ({job.kind}) is queued or running already")
        self.job = job


def refuse_if_running(kind: str) -> None:
    """Raise AlreadyRunning when a job of `kind` is queued or running."""
    running = Job.objects.filter(kind=kind, status__in=ACTIVE).first()
    if running is not None:
        raise AlreadyRunning(running)


# ---------------------------------------------------------------------------------------------
# What handlers return or raise, and what they may read.


@dataclass(frozen=True)
class ItemResult:
    """A handler's result with what its calls cost (a plain dict means nothing was spent)."""

    result: dict[str, Any]
    tokens_in: int = 0
    tokens_out: int = 0
    cost: Decimal = Decimal("0")

    @classmethod
    def of_calls(cls, result: dict[str, Any], *calls: CallResult) -> ItemResult:
        return cls(result, **_usage(calls))


class ItemFailed(Exception):  # noqa: N818 (what the item becomes)
    """Raised by a handler to fail its item with a reason, keeping the model's raw text and
    the cost of the calls that led there (any other exception fails the item too)."""

    def __init__(self, reason: str, *calls: CallResult, raw_output: str = "") -> None:
        super().__init__(reason)
        self.raw_output = raw_output or next(
            (c.raw_text for c in reversed(calls) if c.raw_text), ""
        )
        self.usage = _usage(calls)


class ItemDeferred(Exception):  # noqa: N818 (what the item becomes)
    """Raised by a handler whose work waits on something outside (a provider's batch): the
    item goes back to pending, not claimable for `seconds`, without using up an attempt, and
    keeps `state`, which the handler reads back as `current_item.get().state` next time."""

    def __init__(
        self, seconds: float, state: dict[str, Any] | None = None, *calls: CallResult
    ) -> None:
        super().__init__(f"deferred for {seconds:g} s")
        self.seconds = seconds
        self.state = state or {}
        self.usage = _usage(calls)  # what this run spent: counted now, the item still open


def _usage(calls: Sequence[CallResult]) -> dict[str, Any]:
    return {
        "tokens_in": sum(c.tokens_in for c in calls),
        "tokens_out": sum(c.tokens_out for c in calls),
        "cost": sum((c.cost for c in calls), Decimal("0")),
    }


@dataclass(frozen=True)
class JobContext:
    """The job and item a handler runs for: `current_item.get()` inside a handler (e.g. to pass
    `job_id` to the gateway's ledger, or to read the job's params)."""

    job_id: int
    key: str
    params: dict[str, Any]
    state: dict[str, Any] | None = None  # what the item's last ItemDeferred kept
    # Calls skip the ledger's cache: the job was launched with fresh calls, or the item is a
    # retry of a failed one (job_retry_failed), whose cached answers led to the failure.
    fresh: bool = False


current_item: ContextVar[JobContext] = ContextVar("current_item")

Handler = Callable[[Gateway, dict[str, Any]], Awaitable[ItemResult | dict[str, Any]]]


@dataclass(frozen=True)
class JobKind:
    name: str
    handler: Handler
    chunk_size: int
    concurrency: int
    max_attempts_override: int | None = None
    title: str = ""  # what the pages call a job of this kind ("Generate candidates")
    item_noun: str = "item"  # what one item is ("image", "question", "response")

    @property
    def max_attempts(self) -> int:
        return self.max_attempts_override or settings.LLM_JOB_MAX_ATTEMPTS


_registry: dict[str, JobKind] = {}

# Items a chunk has in progress per request slot (the kind's concurrency). An item's own work,
# its prompt, the cache lookup before its request and the ledger row after, takes turns of the
# event loop and trips to the database thread; with one item per slot each slot sat idle
# meanwhile (72% of the ideal rate at 64 slots, 85-87% with two items a slot, no better with
# three: bench/llm_throughput.py). A cached answer completes its item without taking a slot.
ITEMS_PER_REQUEST_SLOT = 2


def outcome_lines(job: Job, *, failures: int) -> list[str]:
    """What a command prints when a job it waited for is over: the counts, the tokens and the
    cost, and the first `failures` failed items with the first line of their error."""
    lines = [
        f"job {job.pk} {job.status}: {job.items_done} done, {job.items_failed} failed of "
        f"{job.items_total}; {job.tokens_in} tokens in, {job.tokens_out} out, "
        f"cost {job.cost:.4f}"
    ]
    failed = list(
        JobItem.objects.filter(job=job, status=ItemStatus.FAILED)
        .order_by("pk")
        .values_list("key", "last_error")[:failures]
    )
    lines += [f"  failed {key}: {error.splitlines()[0] if error else ''}" for key, error in failed]
    if job.items_failed > len(failed):
        lines.append(f"  ... and {job.items_failed - len(failed)} more")
    return lines


def register_kind(
    kind: str,
    handler: Handler,
    *,
    chunk_size: int,
    concurrency: int,
    max_attempts: int | None = None,
    title: str = "",
    item_noun: str = "item",
) -> JobKind:
    """Declare how items of `kind` are handled: `chunk_size` items per task, `concurrency`
    requests of a chunk at the providers at once (ITEMS_PER_REQUEST_SLOT times as many items in
    progress). Registering a kind again replaces it (module reloads, tests)."""
    if chunk_size < 1 or concurrency < 1:
        raise ValueError("chunk_size and concurrency must be at least 1")
    spec = JobKind(kind, handler, chunk_size, concurrency, max_attempts, title, item_noun)
    _registry[kind] = spec
    return spec


def get_kind(kind: str) -> JobKind:
    try:
        return _registry[kind]
    except KeyError:
        raise JobError(f"unknown job kind {kind!r}: no handler is registered") from None


def registered_kinds() -> list[str]:
    return sorted(_registry)


def kind_title(kind: str) -> str:
    """A job kind as the pages name it: its registered title, else its name in words."""
    spec = _registry.get(kind)
    if spec is not None and spec.title:
        return spec.title
    return kind.rsplit(".", 1)[-1].replace("_", " ").capitalize()


def item_title(kind: str, key: str) -> str:
    """One item as the pages name it: "Image cat-001", "Question 12" (the key "q12")."""
    spec = _registry.get(kind)
    noun = spec.item_noun if spec is not None else "item"
    if noun == "question" and re.fullmatch(r"q\d+", key):
        key = key[1:]
    return f"{noun.capitalize()} {key}"


# ---------------------------------------------------------------------------------------------
# Services.


def _enqueue(job_id: int, count: int = 1) -> None:
    """Send `count` chunk tasks once the current transaction commits (never inside it: a worker
    could look for the rows before they exist)."""
    task = chunk_task()
    for _ in range(count):
        task.delay_on_commit(job_id)


def _enqueue_later(job_id: int, seconds: float) -> None:
    """Send one chunk task due in `seconds`, after the commit: how a job whose items all wait
    (a provider's batch) polls on its own schedule, with or without beat. Capped below the
    broker's visibility timeout (Redis would deliver a longer-held message twice); a wait longer
    than that is picked up by the periodic sweep instead."""
    task = chunk_task()
    cap = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("visibility_timeout", 3600) / 2
    countdown = max(0.0, min(seconds, cap))
    transaction.on_commit(lambda: task.apply_async((job_id,), countdown=countdown))


def _send_now(job_id: int, count: int) -> None:
    """Send `count` chunk tasks from a worker (a chunk's end, its heartbeat, the sweep): no
    transaction to wait for and no launch to refuse, so a broker that does not answer is
    retried for a few seconds, then logged and left to the sweep."""
    send_chunks(job_id, count)


def _chunks_for(spec: JobKind, items: int) -> int:
    return max(1, min(math.ceil(items / spec.chunk_size), settings.LLM_JOB_PARALLEL_CHUNKS))


# ---------------------------------------------------------------------------------------------
# Pace: how many chunks a job runs at once, and how many requests each has in flight.

# Requests in flight above what the quota needs at the observed latency: the limiter, not a
# slow answer or a chunk between two claims, then sets the rate.
PACE_HEADROOM = 1.25
# A chunk's requests in flight at most, whatever the pace (its items in progress are twice as
# many, each holding its prompt and images in one process).
MAX_CHUNK_SLOTS = 512


@dataclass(frozen=True)
class Pace:
    """How a job runs: `chunks` chunk tasks at once, each with `slots` requests in flight.
    `rate` is what the model's limits allow (requests a second, 0: no limit) and `latency_s`
    how long its answers took, when a chunk has seen them."""

    chunks: int
    slots: int
    rate: float = 0.0
    latency_s: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "chunks": self.chunks,
            "slots": self.slots,
            "rate": round(self.rate, 3),
            "latency_s": round(self.latency_s, 3),
        }

    def differs_from(self, other: Pace) -> bool:
        """Worth storing: another number of chunks, or slots a tenth apart or more."""
        return self.chunks != other.chunks or abs(self.slots - other.slots) > other.slots / 10


def job_pace(*, spec: JobKind, observed: Observed | None, items: int) -> Pace:
    """The pace for what the job's chunks saw of its model (`observed`, None before any
    answer). A model without per-minute limits, or not yet seen, runs the kind's concurrency
    in LLM_JOB_PARALLEL_CHUNKS chunks. A limited one runs the requests its quota needs at the
    observed latency (Little's law, with PACE_HEADROOM), in as many chunks as its rate needs
    at LLM_JOB_CHUNK_CALLS_PER_SECOND a chunk: 3,000 a minute at 2 s a call is 50 calls a
    second, 2 chunks of 63 requests in flight."""
    default = Pace(_chunks_for(spec, items), spec.concurrency)
    if observed is None or not observed.answers:
        return default
    rate, latency = observed.rate, observed.mean_latency_s
    if rate <= 0:
        return Pace(default.chunks, default.slots, 0.0, latency)
    chunks = max(1, math.ceil(rate / settings.LLM_JOB_CHUNK_CALLS_PER_SECOND))
    in_flight = math.ceil(rate * latency * PACE_HEADROOM)
    slots = min(MAX_CHUNK_SLOTS, max(spec.concurrency, math.ceil(in_flight / chunks)))
    return Pace(chunks, slots, rate, latency)


def pace_of(job: Job, spec: JobKind) -> Pace:
    """The job's pace as its chunks last stored it, else the kind's own."""
    stored = job.pace or {}
    if not stored.get("chunks"):
        return Pace(_chunks_for(spec, job.items_remaining), spec.concurrency)
    return Pace(
        int(stored["chunks"]),
        int(stored.get("slots") or spec.concurrency),
        float(stored.get("rate") or 0),
        float(stored.get("latency_s") or 0),
    )


# ---------------------------------------------------------------------------------------------
# Liveness: which chunks are still running.

# A running chunk renews its leases this often at most (a third of a lease when that is less).
MAX_HEARTBEAT_S = 5.0


def heartbeat_seconds() -> float:
    """How often a running chunk renews its leases: often enough that a chunk which stopped
    (its worker killed) is told from a live one within seconds, long before its lease ends."""
    return min(settings.LLM_JOB_LEASE_SECONDS / 3, MAX_HEARTBEAT_S)


def _fresh_after(now: datetime) -> datetime:
    """A running item's lease ending after this was renewed within the last two heartbeats
    (and a second): its chunk is alive. One ending before it belongs to a lost chunk."""
    lease = settings.LLM_JOB_LEASE_SECONDS
    return now + timedelta(seconds=max(0.0, lease - 2 * heartbeat_seconds() - 1))


def _live_chunks(job_id: int, now: datetime) -> list[str]:
    """The tokens of the job's live chunks, in order (a chunk's rank among them is the same
    whichever chunk asks)."""
    return sorted(
        JobItem.objects.filter(
            job_id=job_id, status=ItemStatus.RUNNING, lease_until__gte=_fresh_after(now)
        )
        .values_list("lease_token", flat=True)
        .distinct()
    )


def job_top_up(
    *, job: Job, spec: JobKind, now: datetime, leaving: str = "", at_least: int = 0
) -> int:
    """Send the chunk tasks the job misses: its pace's number of chunks less the live ones
    (`leaving`, a chunk about to end, not counted), no more than its ready items fill, and
    only while a worker process is free (nothing waits in the broker's queue: a chunk beyond
    the workers would only wait there); `at_least` are sent whatever the queue holds (a
    chunk's successor, or the one chunk of a job with none alive). Returns how many were sent."""
    live = [token for token in _live_chunks(job.pk, now) if token != leaving]
    missing = pace_of(job, spec).chunks - len(live)
    if missing <= 0:
        return 0
    ready = JobItem.objects.filter(_ready(now), job_id=job.pk)[: missing * spec.chunk_size]
    missing = min(missing, math.ceil(ready.count() / spec.chunk_size))
    if missing > at_least and not queue_idle():
        missing = at_least
    if missing > 0:
        _send_now(job.pk, missing)
    return max(0, missing)


@transaction.atomic
def job_launch(
    *,
    kind: str,
    items: Sequence[tuple[str, dict[str, Any]]],
    params: dict[str, Any] | None = None,
    user: Any = None,
) -> Job:
    """Create a job and its items, and enqueue its first chunk tasks after the commit."""
    spec = get_kind(kind)
    if not items:
        raise JobError("a job needs at least one item")
    keys = [key for key, _ in items]
    if len(set(keys)) != len(keys):
        raise JobError("item keys must be unique within a job")
    job = Job.objects.create(
        kind=kind,
        params=params or {},
        launched_by=user,
        items_total=len(items),
        items_remaining=len(items),
    )
    JobItem.objects.bulk_create(
        [JobItem(job=job, key=key, payload=payload) for key, payload in items], batch_size=500
    )
    _enqueue(job.pk, _chunks_for(spec, len(items)))
    return job


@transaction.atomic
def job_cancel(*, job_id: int, now: datetime | None = None) -> Job:
    """Cancel the pending items; running ones finish and their results still count."""
    now = now or timezone.now()
    job = Job.objects.select_for_update().get(pk=job_id)
    if job.status in OVER:
        raise JobError(f"job {job.pk} is already {job.status}")
    cancelled = JobItem.objects.filter(job=job, status=ItemStatus.PENDING).update(
        status=ItemStatus.CANCELLED, finished_at=now
    )
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.CANCELLED, resume_at=None, items_remaining=F("items_remaining") - cancelled
    )
    _finish_if_over(job.pk, now)
    job.refresh_from_db()
    return job


# The payload flag of a retried item: its calls skip the ledger's cache (JobContext.fresh).
RETRY_FRESH = "fresh_calls"


@transaction.atomic
def job_retry_failed(*, job_id: int, now: datetime | None = None) -> int:
    """Put the failed items back to pending with fresh attempts and fresh calls (the cache
    would only hand back what led to the failure), resume a job waiting for quota, and enqueue
    chunk tasks. Returns how many failed items were requeued."""
    now = now or timezone.now()
    job = Job.objects.select_for_update().get(pk=job_id)
    if job.status == JobStatus.CANCELLED:
        raise JobError(f"job {job.pk} was cancelled")
    spec = get_kind(job.kind)
    failed = list(JobItem.objects.filter(job=job, status=ItemStatus.FAILED).only("payload"))
    for item in failed:
        item.payload = {**item.payload, RETRY_FRESH: True}
    JobItem.objects.bulk_update(failed, ["payload"], batch_size=500)
    retried = JobItem.objects.filter(job=job, status=ItemStatus.FAILED).update(
        status=ItemStatus.PENDING,
        attempts=0,
        lease_until=None,
        lease_token="",
        result=None,
        not_before=None,  # a fresh start: a deferred handler's state is gone
        finished_at=None,
    )
    if retried == 0 and job.status != JobStatus.WAITING_FOR_QUOTA:
        return 0
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING if job.status == JobStatus.RUNNING else JobStatus.QUEUED,
        items_failed=F("items_failed") - retried,
        items_remaining=F("items_remaining") + retried,
        finished_at=None,
        resume_at=None,
    )
    pending = JobItem.objects.filter(job=job, status=ItemStatus.PENDING).count()
    _enqueue(job.pk, _chunks_for(spec, pending))
    return retried


@contextlib.contextmanager
def one_snapshot() -> Any:
    """Reads inside see one state of the database, as of their first query: the job's row, its
    counts and its item rows then agree with each other even while a worker records outcomes
    (one transaction, REPEATABLE READ on PostgreSQL; SQLite's transactions are snapshots).
    Inside a transaction already (tests), it adds nothing."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        yield


def job_progress(job: Job, *, failures: int = 20) -> dict[str, Any]:
    """What the console shows: counters from the job row, plus the latest failures."""
    finished = job.items_done + job.items_failed
    cancelled = job.items_total - finished - job.items_remaining
    fresh = Q(lease_until__gte=_fresh_after(timezone.now()))
    held = (
        JobItem.objects.filter(job=job, status=ItemStatus.RUNNING).aggregate(
            running=Count("pk"),
            # Items whose chunk stopped renewing their lease: its worker died or hung. They
            # wait for the lease to run out; the job's other items do not.
            lost=Count("pk", filter=~fresh),
            lost_until=Max("lease_until", filter=~fresh),
            chunks=Count("lease_token", distinct=True, filter=fresh),
        )
        if job.items_remaining
        else {"running": 0, "lost": 0, "lost_until": None, "chunks": 0}
    )
    # Deferred items: pending, waiting for their time (a provider's batch being polled).
    waiting = (
        JobItem.objects.filter(
            job=job, status=ItemStatus.PENDING, not_before__gt=timezone.now()
        ).count()
        if job.items_remaining
        else 0
    )
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "total": job.items_total,
        "done": job.items_done,
        "failed": job.items_failed,
        "cancelled": cancelled,
        "remaining": job.items_remaining,
        "running": held["running"],
        "waiting": waiting,
        "lost": held["lost"],
        "lost_until": held["lost_until"],
        "chunks": held["chunks"],
        "pace": _pace_words(job.pace or {}),
        "percent": _percent(job.items_total - job.items_remaining, job.items_total),
        "tokens_in": job.tokens_in,
        "tokens_out": job.tokens_out,
        "cost": job.cost,
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "resume_at": job.resume_at,
        "last_error": job.last_error,
        "failures": list(
            JobItem.objects.filter(job=job, status=ItemStatus.FAILED)
            .order_by("-finished_at", "-pk")
            .values("key", "last_error", "attempts")[:failures]
        ),
    }


def _pace_words(stored: dict[str, Any]) -> dict[str, Any]:
    """The stored pace as the console says it: chunks, requests in flight each, and for a
    limited model the requests a minute allowed and the seconds an answer took."""
    if not stored.get("chunks"):
        return {}
    return {
        "chunks": stored["chunks"],
        "slots": stored.get("slots", 0),
        "per_minute": round(float(stored.get("rate") or 0) * 60),
        "latency_s": float(stored.get("latency_s") or 0),
    }


def _percent(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 100.0


# ---------------------------------------------------------------------------------------------
# Claiming and recording.


@dataclass(frozen=True)
class Claim:
    job: Job
    token: str
    items: list[JobItem]


def _claimable(now: datetime) -> Q:
    return _ready(now) | Q(status=ItemStatus.RUNNING, lease_until__lt=now)


def _ready(now: datetime) -> Q:
    """Pending items that may start now (a deferred one once its time has come)."""
    return Q(status=ItemStatus.PENDING) & (Q(not_before__isnull=True) | Q(not_before__lte=now))


def _finish_if_over(job_id: int, now: datetime) -> None:
    """A job whose remaining counter reached zero is done (or stays cancelled, now finished)."""
    Job.objects.filter(pk=job_id, items_remaining=0, status__in=ACTIVE).update(
        status=JobStatus.DONE, finished_at=now
    )
    Job.objects.filter(
        pk=job_id, items_remaining=0, status=JobStatus.CANCELLED, finished_at=None
    ).update(finished_at=now)


def _fail_worn_out(job_id: int, max_attempts: int, now: datetime) -> int:
    """Fail the items whose lease expired after their last allowed attempt: a worker died or
    hung on each of them that many times, so one more would likely do the same."""
    failed = JobItem.objects.filter(
        job_id=job_id,
        status=ItemStatus.RUNNING,
        lease_until__lt=now,
        attempts__gte=max_attempts,
    ).update(
        status=ItemStatus.FAILED,
        lease_token="",
        finished_at=now,
        last_error=f"lease expired on each of {max_attempts} attempts "
        "(the worker died or hung on this item)",
    )
    if failed:
        Job.objects.filter(pk=job_id).update(
            items_failed=F("items_failed") + failed, items_remaining=F("items_remaining") - failed
        )
        _finish_if_over(job_id, now)
    return failed


def item_claim_chunk(
    *,
    job_id: int,
    now: datetime | None = None,
    token: str = "",
    limit: int | None = None,
) -> Claim | None:
    """Lease up to `limit` of the job's pending items (or running ones whose lease expired):
    by default a chunk's worth (the kind's chunk size, or the items in progress its pace
    gives a chunk, whichever is more). A running chunk claims more under its own `token`;
    the Claim then holds only the items claimed now.

    None when the job is not running or nothing is left to claim."""
    now = now or timezone.now()
    with transaction.atomic():
        job = Job.objects.filter(pk=job_id, status__in=ACTIVE).first()
        if job is None:
            return None
        spec = get_kind(job.kind)
        if limit is None:
            limit = spec.chunk_size
            if job.pace:
                limit = max(limit, pace_of(job, spec).slots * ITEMS_PER_REQUEST_SLOT)
        _fail_worn_out(job.pk, spec.max_attempts, now)
        candidates = JobItem.objects.filter(_claimable(now), job=job).order_by("pk")
        if token:  # never its own items again, even were their lease to have run out
            candidates = candidates.exclude(lease_token=token)
        if connection.vendor == "postgresql":
            # Concurrent chunks pass over each other's rows instead of queueing on them;
            # SQLite's IMMEDIATE transactions serialize the claimers instead.
            candidates = candidates.select_for_update(skip_locked=True)
        ids = list(candidates.values_list("pk", flat=True)[:limit])
        if not ids:
            return None
        claimed_before = bool(token)
        token = token or uuid.uuid4().hex
        # The same condition again: the UPDATE takes only rows still claimable.
        JobItem.objects.filter(_claimable(now), pk__in=ids).update(
            status=ItemStatus.RUNNING,
            lease_token=token,
            attempts=F("attempts") + 1,
            lease_until=now + timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS),
        )
        if not claimed_before:
            Job.objects.filter(pk=job.pk, status=JobStatus.QUEUED).update(status=JobStatus.RUNNING)
            Job.objects.filter(pk=job.pk, started_at=None).update(started_at=now)
    items = list(JobItem.objects.filter(pk__in=ids, lease_token=token).order_by("pk"))
    return Claim(job, token, items) if items else None


ItemOutcome = ItemResult | ItemFailed | ItemDeferred | Exception


def _outcome_fields(outcome: ItemOutcome) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the item's new fields, what its calls spent) for an outcome."""
    if isinstance(outcome, ItemResult):
        return (
            {"status": ItemStatus.DONE, "result": outcome.result, "last_error": ""},
            {
                "tokens_in": outcome.tokens_in,
                "tokens_out": outcome.tokens_out,
                "cost": outcome.cost,
            },
        )
    usage = (
        outcome.usage
        if isinstance(outcome, ItemFailed)
        else {"tokens_in": 0, "tokens_out": 0, "cost": Decimal("0")}
    )
    return (
        {
            "status": ItemStatus.FAILED,
            "last_error": _reason(outcome)[:_MAX_ERROR],
            "raw_output": getattr(outcome, "raw_output", ""),
        },
        usage,
    )


def item_record(
    *, item_id: int, token: str, outcome: ItemOutcome, now: datetime | None = None
) -> bool:
    """Record an item's outcome, once: only while it is running under `token`. A second
    recording, or one by a chunk whose lease was taken over, changes nothing (False)."""
    job_id = JobItem.objects.filter(pk=item_id).values_list("job_id", flat=True).first()
    if job_id is None:
        return False
    return items_record(job_id=job_id, token=token, outcomes=[(item_id, outcome)], now=now) == 1


@transaction.atomic
def items_record(
    *,
    job_id: int,
    token: str,
    outcomes: Sequence[tuple[int, ItemOutcome]],
    now: datetime | None = None,
) -> int:
    """Record outcomes of items of one job, each once (as item_record), in one transaction with
    one update of the job's counters: how a chunk records what finished meanwhile. Returns how
    many were recorded.

    A fixed number of statements whatever the batch holds: one read of the items still
    running under `token` (locked on PostgreSQL until the commit, so no other chunk takes them
    over meanwhile), then one UPDATE per kind of outcome (done, failed, deferred), each item's
    own values in a CASE. One UPDATE per item made the recording most of the database thread's
    time (bench/llm_throughput.py)."""
    now = now or timezone.now()
    running = JobItem.objects.filter(
        job_id=job_id,
        status=ItemStatus.RUNNING,
        lease_token=token,
        pk__in={item_id for item_id, _ in outcomes},
    )
    if connection.vendor == "postgresql":
        running = running.select_for_update()
    live = set(running.values_list("pk", flat=True))
    # kind -> {item id: {field: value}}, the fields every item of the kind sets
    groups: dict[str, dict[int, dict[str, Any]]] = {"done": {}, "failed": {}, "deferred": {}}
    for item_id, outcome in outcomes:
        if item_id not in live:
            continue  # recorded already, or its lease was taken over: it changes nothing
        live.discard(item_id)  # once, even when a batch names an item twice
        if isinstance(outcome, ItemDeferred):
            # Back to pending until its time, the attempt given back: waiting is no failure.
            groups["deferred"][item_id] = {
                "result": outcome.state,
                "not_before": now + timedelta(seconds=outcome.seconds),
                **outcome.usage,
            }
        else:
            fields, usage = _outcome_fields(outcome)
            kind = "done" if fields.pop("status") == ItemStatus.DONE else "failed"
            groups[kind][item_id] = {**fields, **usage}
    common: dict[str, dict[str, Any]] = {
        "done": {"status": ItemStatus.DONE, "lease_until": None, "finished_at": now},
        "failed": {"status": ItemStatus.FAILED, "lease_until": None, "finished_at": now},
        "deferred": {
            "status": ItemStatus.PENDING,
            "lease_until": None,
            "lease_token": "",
            "attempts": F("attempts") - 1,
        },
    }
    totals: dict[str, Any] = {"tokens_in": 0, "tokens_out": 0, "cost": Decimal("0")}
    for kind, items in groups.items():
        if not items:
            continue
        values = _per_item(items)
        JobItem.objects.filter(pk__in=list(items)).update(**common[kind], **values)
        for fields in items.values():
            for key in totals:
                totals[key] += fields[key]
    done, failed = len(groups["done"]), len(groups["failed"])
    if done or failed or groups["deferred"]:
        Job.objects.filter(pk=job_id).update(
            items_done=F("items_done") + done,
            items_failed=F("items_failed") + failed,
            items_remaining=F("items_remaining") - (done + failed),
            **{key: F(key) + value for key, value in totals.items()},
        )
        _finish_if_over(job_id, now)
    return done + failed


_SPENT = ("tokens_in", "tokens_out", "cost")


def _per_item(items: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The UPDATE's values for items that each set the same fields: a plain value where every
    item has the same one, else a CASE on the item's id; what the calls spent is added to what
    the item spent before (a deferred item's earlier runs)."""
    values: dict[str, Any] = {}
    for name in next(iter(items.values())):
        by_item = {pk: fields[name] for pk, fields in items.items()}
        distinct = set(map(_hashable, by_item.values()))
        field = JobItem._meta.get_field(name)
        if len(distinct) == 1:
            value = next(iter(by_item.values()))
            if name in _SPENT:
                if value:
                    values[name] = F(name) + Value(value, output_field=field)
                continue
            values[name] = value
            continue
        case: Any = Case(
            *(When(pk=pk, then=Value(value, output_field=field)) for pk, value in by_item.items()),
            output_field=field,
        )
        if connection.features.requires_casted_case_in_updates:
            case = Cast(case, output_field=field)
        values[name] = F(name) + case if name in _SPENT else case
    return values


def _hashable(value: Any) -> Any:
    return repr(value) if isinstance(value, dict | list) else value


def item_renew_leases(*, job_id: int, token: str, now: datetime | None = None) -> int:
    """A live chunk's heartbeat: extend the lease of its items still running under `token`, so
    that items slower than a lease are not handed to another chunk while this one is alive.
    Returns how many were extended (0: the chunk has nothing left, or lost it all)."""
    now = now or timezone.now()
    return JobItem.objects.filter(
        job_id=job_id, status=ItemStatus.RUNNING, lease_token=token
    ).update(lease_until=now + timedelta(seconds=settings.LLM_JOB_LEASE_SECONDS))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ItemFailed):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@transaction.atomic
def job_park_for_quota(*, claim: Claim, error: QuotaExhausted, now: datetime | None = None) -> None:
    """A daily quota is spent: the chunk's unfinished items go back to pending without using
    up an attempt, and the job waits until the quota is expected back."""
    now = now or timezone.now()
    job = Job.objects.select_for_update().get(pk=claim.job.pk)
    unfinished = JobItem.objects.filter(job=job, lease_token=claim.token, status=ItemStatus.RUNNING)
    if job.status == JobStatus.CANCELLED:
        # Cancelled meanwhile: these would never run again, so they end here.
        n = unfinished.update(
            status=ItemStatus.CANCELLED, lease_token="", lease_until=None, finished_at=now
        )
        Job.objects.filter(pk=job.pk).update(items_remaining=F("items_remaining") - n)
        _finish_if_over(job.pk, now)
        return
    unfinished.update(
        status=ItemStatus.PENDING, lease_token="", lease_until=None, attempts=F("attempts") - 1
    )
    delay = error.retry_delay or settings.LLM_JOB_QUOTA_PAUSE_SECONDS
    Job.objects.filter(pk=job.pk, status__in=(*ACTIVE, JobStatus.WAITING_FOR_QUOTA)).update(
        status=JobStatus.WAITING_FOR_QUOTA,
        resume_at=now + timedelta(seconds=delay),
        last_error=str(error),
    )


@transaction.atomic
def job_fail(*, job_id: int, reason: str, now: datetime | None = None) -> None:
    """The job cannot run at all (its kind is unknown here): it fails, its items untouched."""
    Job.objects.filter(pk=job_id).exclude(status__in=OVER).update(
        status=JobStatus.FAILED, last_error=reason, finished_at=now or timezone.now()
    )


def jobs_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Periodic: requeue items whose lease expired (failing those out of attempts), resume
    jobs whose quota pause is over, and send chunk tasks to every job with ready items that
    runs fewer chunks than its pace (its messages were lost, its worker was killed, or its
    chunks all ended): see job_top_up. `enqueued` counts the jobs sent chunks."""
    now = now or timezone.now()
    counts = {"requeued": 0, "failed": 0, "resumed": 0, "enqueued": 0}
    for job in Job.objects.filter(status__in=(*ACTIVE, JobStatus.CANCELLED), items_remaining__gt=0):
        with transaction.atomic():
            counts["failed"] += _fail_worn_out(job.pk, _max_attempts(job.kind), now)
            counts["requeued"] += _requeue_expired(job, now)
    with transaction.atomic():
        counts["resumed"] = Job.objects.filter(
            status=JobStatus.WAITING_FOR_QUOTA, resume_at__lte=now
        ).update(status=JobStatus.QUEUED, resume_at=None)
    items = JobItem.objects.filter(job=OuterRef("pk"))
    for job in Job.objects.filter(Exists(items.filter(_ready(now))), status__in=ACTIVE):
        spec = _registry.get(job.kind)
        if spec is None:  # its chunk fails the job with the reason
            _send_now(job.pk, 1)
            counts["enqueued"] += 1
            continue
        alive = bool(_live_chunks(job.pk, now))
        if job_top_up(job=job, spec=spec, now=now, at_least=0 if alive else 1):
            counts["enqueued"] += 1
    return counts


def _max_attempts(kind: str) -> int:
    spec = _registry.get(kind)
    return spec.max_attempts if spec else settings.LLM_JOB_MAX_ATTEMPTS


def _requeue_expired(job: Job, now: datetime) -> int:
    expired = JobItem.objects.filter(job=job, status=ItemStatus.RUNNING, lease_until__lt=now)
    if job.status != JobStatus.CANCELLED:
        return expired.update(status=ItemStatus.PENDING, lease_token="", lease_until=None)
    # A cancelled job's lost items will never run: they end as cancelled.
    n = expired.update(
        status=ItemStatus.CANCELLED, lease_token="", lease_until=None, finished_at=now
    )
    Job.objects.filter(pk=job.pk).update(items_remaining=F("items_remaining") - n)
    _finish_if_over(job.pk, now)
    return n


# ---------------------------------------------------------------------------------------------
# Running a chunk (the body of the Celery task).


def job_run_chunk(*, job_id: int, gateway_factory: Callable[[], Gateway]) -> int:
    """One chunk's turn: claim items, run their handlers concurrently through one gateway
    (claiming more as slots free up, for TURN_SECONDS), record each outcome as it comes, then
    send the successor while items remain. Returns the items claimed."""
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.status not in ACTIVE:
        return 0
    try:
        spec = get_kind(job.kind)
    except JobError as exc:
        job_fail(job_id=job_id, reason=str(exc))
        return 0
    claim = item_claim_chunk(job_id=job_id)
    if claim is None:
        return 0
    turn = _Turn(spec, claim)
    try:
        _run_in_own_loop(lambda: turn.run(gateway_factory))
    except QuotaExhausted as exc:
        log.warning("job %s waits for quota: %s", job_id, exc)
        job_park_for_quota(claim=claim, error=exc)
        return turn.claimed
    _enqueue_next(job_id, claim.token)
    return turn.claimed


def _enqueue_next(job_id: int, token: str) -> None:
    """After a chunk: while items are ready, its successor, and the chunks the job misses (see
    job_top_up; none when the job's other chunks are its pace already), else one due when the
    earliest deferred item may run (nothing while items of other chunks are still running:
    those chunks decide when they end)."""
    now = timezone.now()
    job = Job.objects.filter(pk=job_id, status__in=ACTIVE).first()
    if job is None:
        return
    if JobItem.objects.filter(_ready(now), job_id=job_id).exists():
        job_top_up(job=job, spec=get_kind(job.kind), now=now, leaving=token, at_least=1)
        return
    wake = JobItem.objects.filter(
        job_id=job_id, status=ItemStatus.PENDING, not_before__gt=now
    ).aggregate(at=Min("not_before"))["at"]
    if (
        wake is not None
        and not JobItem.objects.filter(job_id=job_id, status=ItemStatus.RUNNING).exists()
    ):
        _enqueue_later(job_id, (wake - now).total_seconds())


def _in_database_thread(work: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """`work` through asgiref's database thread; after an outage error there, the broken
    connection is closed, so the next try opens a new one."""

    def run(**kwargs: Any) -> Any:
        try:
            return work(**kwargs)
        except OUTAGE_ERRORS:
            forget_broken_connection()
            raise

    return sync_to_async(run)


# How long the recorder gathers outcomes before it writes them: a handful of batches a second
# whatever the rate. Writing each outcome the moment it came made batches of 4-8 items at 300
# calls a second, and their UPDATEs a sixth of the job system's CPU per call
# (bench/llm_throughput.py); a tenth of a second later on the job page costs nothing.
RECORD_EVERY_S = 0.1


class _Recorder:
    """Records a chunk's outcomes as they come, in batches: what finishes within
    RECORD_EVERY_S of the first outcome waiting goes into one transaction and one trip to the
    database thread (not one per item), and the calls' slots free up at once. Closing writes
    what is left without waiting. A batch the database refuses for an outage waits for it
    (DATABASE_PATIENCE_S): the items stay leased to this chunk meanwhile, so none runs twice."""

    def __init__(self, claim: Claim) -> None:
        self._claim = claim
        self._pending: list[tuple[int, ItemOutcome]] = []
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self._closing = False
        self._write = _in_database_thread(items_record)
        self._task = asyncio.create_task(self._run())

    def add(self, item: JobItem, outcome: ItemOutcome) -> None:
        self._pending.append((item.pk, outcome))
        self._wake.set()

    async def close(self) -> None:
        """Write what is left, then stop."""
        self._closing = True
        self._closed.set()
        self._wake.set()
        await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        outage_started: float | None = None
        failures = 0
        while not (self._closing and not self._pending):
            await self._wake.wait()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), RECORD_EVERY_S)
            self._wake.clear()
            batch, self._pending = self._pending, []
            if not batch:
                continue
            try:
                await self._write(
                    job_id=self._claim.job.pk, token=self._claim.token, outcomes=batch
                )
                outage_started, failures = None, 0
            except DatabaseError as exc:
                outage_started = outage_started or loop.time()
                if is_outage(exc) and loop.time() - outage_started < DATABASE_PATIENCE_S:
                    failures += 1
                    if failures == 1:
                        log.warning(
                            "job %s: %d outcome(s) wait for the database: %s",
                            self._claim.job.pk,
                            len(batch),
                            exc,
                        )
                    self._pending = batch + self._pending
                    self._wake.set()
                    await asyncio.sleep(outage_pause(failures))
                    continue
                # The items stay leased to this chunk; once it ends, the sweeper requeues them.
                log.exception(
                    "job %s: could not record %d outcome(s)", self._claim.job.pk, len(batch)
                )


# How long a chunk claims more items before it finishes what it holds and hands over to its
# successor: long enough that its start and end are a small part of it, short enough that jobs
# sharing the workers take turns, and that each turn starts from the job's latest pace.
TURN_SECONDS = 60.0
# How often a chunk looks at what its gateway saw, to grow its slots to the job's pace.
PACE_EVERY_S = 1.0


class _Turn:
    """One chunk task's run: its items through one gateway, at most `slots` requests at the
    providers and twice as many items in progress, more items claimed under the same token as
    they free up; beside them, the heartbeat that renews the leases, keeps the job's pace, and
    sends the chunks the job misses."""

    def __init__(self, spec: JobKind, claim: Claim) -> None:
        self.spec, self.claim = spec, claim
        self.job_id, self.token = claim.job.pk, claim.token
        self.pace = pace_of(claim.job, spec)
        self.slots = self.pace.slots
        self.claimed = len(claim.items)
        self.claiming = True  # False once the turn is over, nothing is ready, or one too many
        self.queue: deque[JobItem] = deque(claim.items)
        self.running: set[asyncio.Task[None]] = set()
        self.gateway: Gateway | None = None
        self.recorder: _Recorder | None = None

    @property
    def capacity(self) -> int:
        return self.slots * ITEMS_PER_REQUEST_SLOT

    async def run(self, gateway_factory: Callable[[], Gateway]) -> None:
        self.recorder = _Recorder(self.claim)
        heartbeat: asyncio.Task[None] | None = None
        try:
            async with gateway_factory() as gateway:
                self.gateway = gateway
                gateway.limit_in_flight(self.slots)
                self.wake = asyncio.Event()
                heartbeat = asyncio.create_task(self._heartbeat())
                await self._items()
        finally:
            # Outcomes first (a parked job's finished items count), then the heartbeat.
            await self.recorder.close()
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            # The recording thread's connection belongs to this chunk; close it rather than
            # leak one per chunk (and PostgreSQL test databases refuse to drop with one open).
            await sync_to_async(connections.close_all)()

    async def _items(self) -> None:
        loop = asyncio.get_running_loop()
        ends_at = loop.time() + TURN_SECONDS
        claim_after = 0.0
        try:
            while True:
                while self.queue and len(self.running) < self.capacity:
                    self.running.add(asyncio.create_task(self._one(self.queue.popleft())))
                room = self.capacity - len(self.running)
                now = loop.time()
                if (
                    self.claiming
                    and not self.queue
                    and room >= max(1, self.capacity // 4)
                    and now >= claim_after
                ):
                    if now >= ends_at:
                        self.claiming = False
                    elif await self._claim_more(room):
                        continue
                    else:
                        claim_after = loop.time() + 1.0  # the database did not answer
                if not self.running:
                    return
                self.wake.clear()
                waker = asyncio.create_task(self.wake.wait())
                done, _ = await asyncio.wait(
                    {*self.running, waker}, return_when=asyncio.FIRST_COMPLETED
                )
                waker.cancel()
                for task in done - {waker}:
                    self.running.discard(task)
                    task.result()  # QuotaExhausted only: each item's own failure is recorded
        except BaseException:
            for task in self.running:
                task.cancel()
            await asyncio.gather(*self.running, return_exceptions=True)
            raise

    async def _claim_more(self, room: int) -> bool:
        """Items for the free room, under this chunk's token. False when none came: nothing is
        ready (the turn then ends as its items finish) or the database did not answer."""
        try:
            more = await _in_database_thread(item_claim_chunk)(
                job_id=self.job_id, token=self.token, limit=room
            )
        except OUTAGE_ERRORS as exc:
            log.warning("job %s: a chunk could not claim more items: %s", self.job_id, exc)
            return False
        if more is None:
            self.claiming = False
            return False
        self.queue.extend(more.items)
        self.claimed += len(more.items)
        return True

    async def _one(self, item: JobItem) -> None:
        claim, spec = self.claim, self.spec
        # An open item's result is what its last deferral kept (None otherwise).
        current_item.set(
            JobContext(
                claim.job.pk,
                item.key,
                claim.job.params,
                item.result,
                fresh=bool(claim.job.params.get("fresh") or item.payload.get(RETRY_FRESH)),
            )
        )
        ledger_item.set(item.key)  # the item's ledger rows say whose calls they were
        answers = ItemAnswers()
        item_answers.set(answers)
        loop = asyncio.get_running_loop()
        outage_started: float | None = None
        while True:
            try:
                returned = await spec.handler(self.gateway, item.payload)  # type: ignore[arg-type]
                outcome: ItemOutcome = (
                    returned if isinstance(returned, ItemResult) else ItemResult(returned)
                )
            except QuotaExhausted:
                raise  # parks the whole job: see job_park_for_quota
            except ItemDeferred as deferred:
                outcome = deferred
            except Exception as exc:
                if is_outage(exc):
                    outage_started = outage_started or loop.time()
                left = DATABASE_PATIENCE_S - (loop.time() - (outage_started or loop.time()))
                if is_outage(exc) and left > 0:
                    # The handler's own read or write met a database outage: the item runs
                    # again once the database answers, given the answers its calls already
                    # got (ItemAnswers): no call twice, no cost lost, no failure.
                    log.warning(
                        "job %s item %s: the database did not answer (%s); the item runs "
                        "again once it does",
                        claim.job.pk,
                        item.key,
                        exc,
                    )
                    if await database_back(patience=left):
                        answers.next_run()
                        continue
                log.info("job %s item %s failed: %s", claim.job.pk, item.key, _reason(exc))
                outcome = exc  # the item's own failure, recorded with its reason
            break
        assert self.recorder is not None
        self.recorder.add(item, outcome)

    async def _heartbeat(self) -> None:
        """Every PACE_EVERY_S, the job's pace from what the gateway saw (stored on the job
        when it changed, this chunk's slots grown to it); every heartbeat_seconds(), the
        leases renewed, and the job's live chunks looked at: this chunk stops claiming when
        it is one more than the pace wants, and the first of them sends the chunks missing.
        A chunk whose process dies or whose loop blocks stops renewing: the job's other chunks
        and the sweep count it lost within two heartbeats, and the sweeper takes its items
        back once their lease runs out."""
        loop = asyncio.get_running_loop()
        beat = heartbeat_seconds()
        renew_at = loop.time() + beat
        failing_since: float | None = None
        while True:
            await asyncio.sleep(min(PACE_EVERY_S, beat))
            try:
                await self._keep_pace()
                if loop.time() >= renew_at:
                    await self._renew_and_look()
                    renew_at = loop.time() + beat
            except DatabaseError as exc:
                # A missed beat: the lease still has most of its time to go. Try again soon.
                if failing_since is None:
                    failing_since = loop.time()
                    log.warning("job %s: a chunk's heartbeat failed: %s", self.job_id, exc)
                renew_at = loop.time() + min(1.0, beat)
                continue
            if failing_since is not None:
                log.warning(
                    "job %s: a chunk's heartbeat goes on after %.1f s",
                    self.job_id,
                    loop.time() - failing_since,
                )
                failing_since = None

    async def _keep_pace(self) -> None:
        assert self.gateway is not None
        pace = job_pace(
            spec=self.spec, observed=self.gateway.observed(), items=self.claim.job.items_remaining
        )
        if not pace.rate and not self.pace.rate and not self.claim.job.pace:
            return  # no limits seen: the kind's own pace stands
        if not pace.differs_from(self.pace) and self.claim.job.pace:
            return
        self.pace = pace
        self.claim.job.pace = pace.as_json()
        await _in_database_thread(_store_pace)(job_id=self.job_id, pace=pace)
        if self.claiming and pace.slots > self.slots:
            self.gateway.grow_in_flight(pace.slots)
            self.slots = pace.slots
            self.wake.set()  # room for more items now

    async def _renew_and_look(self) -> None:
        await _in_database_thread(item_renew_leases)(job_id=self.job_id, token=self.token)
        live = await _in_database_thread(_live_chunks)(job_id=self.job_id, now=timezone.now())
        rank = live.index(self.token) if self.token in live else 0
        if rank >= self.pace.chunks and self.claiming:
            log.info("job %s: a chunk beyond its pace finishes what it holds", self.job_id)
            self.claiming = False
        if rank == 0 and len(live) < self.pace.chunks:
            # Off the database thread: asking the broker may take seconds when it is down,
            # and the chunk's ledger rows and outcomes must not wait for that.
            await sync_to_async(_top_up_from_chunk, thread_sensitive=False)(job_id=self.job_id)


def _store_pace(*, job_id: int, pace: Pace) -> None:
    Job.objects.filter(pk=job_id).update(pace=pace.as_json())


def _top_up_from_chunk(*, job_id: int) -> None:
    try:
        job = Job.objects.filter(pk=job_id, status__in=ACTIVE).first()
        if job is not None:
            job_top_up(job=job, spec=get_kind(job.kind), now=timezone.now())
    finally:
        connection.close()  # a thread of the loop's pool: its connection goes with the call


def _run_in_own_loop(make: Callable[[], Awaitable[Any]]) -> Any:
    """A fresh event loop in a thread of its own: the gateway's clients belong to one loop,
    and the calling thread may already run one (browser tests leave Playwright's)."""

    async def main() -> Any:
        return await make()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="job-chunk") as pool:
        return pool.submit(asyncio.run, main()).result()
