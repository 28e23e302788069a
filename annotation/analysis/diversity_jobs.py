"""The diversity report as a background job of the job system (llm/jobs.py): one job of kind
`annotation.diversity` with one item per scope ("final", "candidates"), each item's result the
report of its scope with the seconds its analysis took. The page and the API show the latest
job that is over; "Recompute" launches a new one (one at a time).

The analysis itself makes no model call: the handler reads the scope's rows through the
database thread, as every handler does, and runs the clustering in a thread of its own, so the
chunk keeps renewing its lease meanwhile."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async

from llm import jobs
from llm.gateway import Gateway
from llm.models import ItemStatus, Job, JobItem, JobStatus

from .diversity_report import SCOPES, build, gather

DIVERSITY = "annotation.diversity"


async def compute(gateway: Gateway, payload: dict[str, Any]) -> dict[str, Any]:
    """One scope's report: {"scope", "seconds", "questions", "report"}."""
    scope = payload["scope"]
    start = time.perf_counter()
    questions, prompts = await sync_to_async(gather)(scope)
    report = await asyncio.to_thread(build, scope, questions, prompts)
    return {
        "scope": scope,
        "seconds": round(time.perf_counter() - start, 3),
        "questions": len(questions),
        "report": report,
    }


jobs.register_kind(
    DIVERSITY,
    compute,
    chunk_size=len(SCOPES),
    concurrency=1,
    title="Compute the question diversity",
    item_noun="part",
)


AlreadyRunning = jobs.AlreadyRunning


def launch(user: Any) -> Job:
    """A new computation of both scopes, unless one is queued or running (AlreadyRunning)."""
    jobs.refuse_if_running(DIVERSITY)
    return jobs.job_launch(
        kind=DIVERSITY, items=[(scope, {"scope": scope}) for scope in SCOPES], user=user
    )


@dataclass
class Stored:
    """What the page and the API show: the latest computation that is over, its reports by
    scope (a scope whose item failed is missing, with the reason in `failed`), and the one
    running now, if any."""

    job: Job | None = None
    reports: dict[str, dict] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    running: Job | None = None

    @property
    def computed_at(self) -> datetime | None:
        return self.job.finished_at if self.job else None

    @property
    def took(self) -> float | None:
        """Seconds from the job's start to its end (the analyses and the wait between)."""
        if self.job is None or not (self.job.started_at and self.job.finished_at):
            return None
        return (self.job.finished_at - self.job.started_at).total_seconds()


def stored() -> Stored:
    """Three queries: the running job, the latest one over, its items."""
    result = Stored(
        running=Job.objects.filter(kind=DIVERSITY, status__in=jobs.ACTIVE).first(),
        job=Job.objects.filter(kind=DIVERSITY, status=JobStatus.DONE)
        .select_related("launched_by")
        .first(),
    )
    if result.job is None:
        return result
    for key, status, item_result, error in JobItem.objects.filter(job=result.job).values_list(
        "key", "status", "result", "last_error"
    ):
        if status == ItemStatus.DONE and item_result:
            result.reports[key] = item_result["report"]
            result.seconds[key] = item_result["seconds"]
        else:
            result.failed[key] = error or status
    return result


def with_times(scope: str, found: Stored) -> dict | None:
    """A scope's stored report with when it was computed and how long its analysis took (the
    JSON of the page and the API), or None when it has none."""
    report = found.reports.get(scope)
    if report is None:
        return None
    return {
        **report,
        "computed_at": found.computed_at.isoformat() if found.computed_at else None,
        "seconds": found.seconds[scope],
        "job": found.job.pk,
    }
