"""Sending the job system's Celery tasks, by their registered names: llm/jobs.py sends the
chunk tasks that llm/tasks.py defines and that call llm/jobs.py back, so neither module imports
the other for it (Celery's own registry, `app.tasks[name]`, holds the task)."""

from __future__ import annotations

import logging

from celery import current_app
from kombu.exceptions import OperationalError

log = logging.getLogger(__name__)

CHUNK_TASK = "llm.tasks.run_job_chunk"
BROKER_CHECK_SECONDS = 3


def chunk_task():
    """The registered chunk task (llm.tasks.run_job_chunk): the task object itself, so that
    its delay_on_commit (QueuedTask's) and eager mode in tests work as on the import."""
    return current_app.tasks[CHUNK_TASK]


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
            chunk_task().apply_async((job_id,), retry=True, retry_policy=SEND_RETRY)
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
    app = current_app
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
