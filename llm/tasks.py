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

# What builds a chunk's gateway (inside the chunk's event loop); tests running chunks in their
# own process replace it, e.g. with a gateway on the fake servers and an in-memory limiter.
GATEWAY_FACTORY: Callable[[], Gateway] = gateway_from_settings


log = logging.getLogger(__name__)

QUEUE_UNREACHABLE = (
    "The task queue (the Celery broker, Redis) is unreachable, so nothing was launched and "
    "nothing was saved. Try again once it is back."
)
BROKER_CHECK_SECONDS = 3


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


# A worker's sends (a chunk's successor, the chunks a job misses): retried by Celery's own
# publish retry for about 13 s (a Redis restart), then left to the sweep.
SEND_RETRY = {"max_retries": 6, "interval_start": 0.5, "interval_step": 1.0, "interval_max": 3.0}


def send_chunks(job_id: int, count: int = 1) -> int:
    """Send `count` chunk tasks of the job from a worker; how many went. One that the broker
    does not take within SEND_RETRY is logged and left to the sweep, not raised: the chunk that
    sends it has recorded its items, and nothing is lost (the web's launch, by contrast,
    refuses when the broker is down: queue_check)."""
    for sent in range(count):
        try:
            run_job_chunk.apply_async((job_id,), retry=True, retry_policy=SEND_RETRY)
        except OperationalError as exc:
            log.warning(
                "job %s: %d chunk task(s) not sent, the task queue did not answer "
                "(the sweep sends them once it does): %s",
                job_id,
                count - sent,
                exc,
            )
            return sent
    return count


def queue_idle() -> bool:
    """Whether no task waits in the broker's default queue, so that a worker process is free
    for one more chunk (a chunk sent while tasks wait would only wait with them). False when
    the broker does not answer."""
    app = run_job_chunk.app
    if app.conf.task_always_eager:
        return True
    with app.connection_for_read() as connection:
        try:
            connection.ensure_connection(max_retries=0, timeout=BROKER_CHECK_SECONDS)
            _, waiting, _ = connection.default_channel.queue_declare(
                queue=app.conf.task_default_queue, passive=True
            )
        except connection.channel_errors:
            return True  # no such queue: Redis drops an empty list
        except (OperationalError, *connection.connection_errors, OSError) as exc:
            log.warning("task queue unreachable, no chunk added: %s", exc)
            return False
    return waiting == 0


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
