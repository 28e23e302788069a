"""Celery tasks of the job system: each takes ids (or nothing) and calls llm/jobs.py."""

from __future__ import annotations

import functools
import gc
import logging
from collections.abc import Callable

from celery import shared_task
from celery.contrib.django.task import DjangoTask
from django.db import transaction
from kombu.exceptions import OperationalError

from core.errors import Unavailable

from . import jobs
from .gateway import Gateway, gateway_from_settings
from .outages import OUTAGE_ERRORS
from .sending import BROKER_CHECK_SECONDS

# What builds a chunk's gateway (inside the chunk's event loop); tests running chunks in their
# own process replace it, e.g. with a gateway on the fake servers and an in-memory limiter.
GATEWAY_FACTORY: Callable[[], Gateway] = gateway_from_settings


log = logging.getLogger(__name__)

QUEUE_UNREACHABLE = (
    "The task queue (the Celery broker, Redis) is unreachable, so nothing was launched and "
    "nothing was saved. Try again once it is back."
)


def queue_check(app) -> None:
    """Unavailable (503) unless the broker answers now: checked inside the launch's
    transaction, so a launch that could not start is rolled back whole rather than saved as a
    job nobody will run (and a client retrying a 503 makes no second job)."""
    if app.conf.task_always_eager:
        return
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0, timeout=BROKER_CHECK_SECONDS)
    except (OperationalError, OSError) as exc:
        log.warning("task queue unreachable: %s", exc)
        raise Unavailable(QUEUE_UNREACHABLE) from exc


class QueuedTask(DjangoTask):
    """delay_on_commit that checks the broker before the commit and never turns a send that
    fails after it into an error: the rows are committed by then, and the periodic sweep
    (jobs_sweep) sends a chunk to every job with ready items and no live lease."""

    def delay_on_commit(self, *args, **kwargs) -> None:
        queue_check(self.app)
        transaction.on_commit(functools.partial(self._send_or_log, *args, **kwargs))

    def _send_or_log(self, *args, **kwargs) -> None:
        try:
            self.delay(*args, **kwargs)
        except OperationalError as exc:
            log.warning("%s%s not sent (the sweep sends it later): %s", self.name, args, exc)


_heap_frozen = False


def freeze_loaded_heap() -> bool:
    """Once per process, before its first chunk: collect, then move everything still alive
    (Django, the apps, the SDKs, the schemas) out of the cyclic collector's reach, as
    gamut_site/wsgi.py does in the web workers. True when it froze now.

    A chunk allocates fast (64 calls in flight), so the collector makes a full pass every
    few hundred calls; over the whole heap each pass took 100-200 ms of CPU with the GIL held,
    stalling every call in flight: a third of a millisecond of CPU a call, and the job
    system's rate at 64 in flight (bench/llm_throughput.py). Frozen, a full pass scans only
    what the chunks allocate. What was alive when frozen is still freed when its last
    reference goes; only cycles among those objects are never collected."""
    global _heap_frozen
    if _heap_frozen:
        return False
    gc.collect()
    gc.freeze()
    _heap_frozen = True
    return True


@shared_task(
    name="llm.tasks.run_job_chunk",
    base=QueuedTask,
    acks_late=True,
    ignore_result=True,
    # The database went away at the chunk's claim or after its items (a restart): the task
    # runs again a little later, as the next chunk, instead of ending the job's chain.
    autoretry_for=OUTAGE_ERRORS,
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=20,
)
def run_job_chunk(job_id: int) -> int:
    """Run one chunk of a job's items; the chunk enqueues the next while items remain.
    Safe to redeliver: claims and recordings are conditional on the item's lease token."""
    freeze_loaded_heap()
    return jobs.job_run_chunk(job_id=job_id, gateway_factory=GATEWAY_FACTORY)


@shared_task(name="llm.tasks.sweep_expired_leases", ignore_result=True)
def sweep_expired_leases() -> dict[str, int]:
    """Periodic (beat): requeue expired leases, resume jobs whose quota pause is over."""
    return jobs.jobs_sweep()
