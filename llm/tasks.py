"""Celery tasks of the job system: each takes ids (or nothing) and calls llm/jobs.py."""

from __future__ import annotations

from collections.abc import Callable

from celery import shared_task

from . import jobs
from .gateway import Gateway, gateway_from_settings

# What builds a chunk's gateway (inside the chunk's event loop); tests running chunks in their
# own process replace it, e.g. with a gateway on the fake servers and an in-memory limiter.
GATEWAY_FACTORY: Callable[[], Gateway] = gateway_from_settings


@shared_task(name="llm.tasks.run_job_chunk", acks_late=True, ignore_result=True)
def run_job_chunk(job_id: int) -> int:
    """Run one chunk of a job's items; the chunk enqueues the next while items remain.
    Safe to redeliver: claims and recordings are conditional on the item's lease token."""
    return jobs.job_run_chunk(job_id=job_id, gateway_factory=GATEWAY_FACTORY)


@shared_task(name="llm.tasks.sweep_expired_leases", ignore_result=True)
def sweep_expired_leases() -> dict[str, int]:
    """Periodic (beat): requeue expired leases, resume jobs whose quota pause is over."""
    return jobs.jobs_sweep()
