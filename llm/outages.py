"""Waiting out a database outage in a chunk's event loop (a PostgreSQL restart, a failover).

A chunk's work that reaches the database (the ledger's cache lookups and rows, the items'
outcomes, a handler's own reads and writes) waits for the database to answer again rather than
failing: a call already paid for is recorded once the database is back, and an item is never
failed, nor run twice, for an outage of seconds. Waiting is bounded (DATABASE_PATIENCE_S); past
it the error goes on as before.
"""

from __future__ import annotations

import asyncio
import random

from asgiref.sync import sync_to_async
from django.db import InterfaceError, OperationalError, connection

# How long a chunk waits for the database before it gives up on a piece of work: longer than a
# restart or a failover, shorter than the task's time limit.
DATABASE_PATIENCE_S = 300.0
_PAUSE_CAP_S = 5.0

# What a database that went away raises: the server refused or dropped the connection
# (OperationalError), or the connection is already closed (InterfaceError). Errors of the
# query itself (IntegrityError, ProgrammingError) are not waited out.
OUTAGE_ERRORS = (OperationalError, InterfaceError)


def is_outage(exc: BaseException) -> bool:
    return isinstance(exc, OUTAGE_ERRORS)


def forget_broken_connection() -> None:
    """After an outage error, in the thread whose connection raised it: close the connection if
    it no longer works, so the next query opens a new one (Django reopens a connection only
    once the old one is closed)."""
    connection.close_if_unusable_or_obsolete()


def pause(failures: int) -> float:
    """Seconds before trying again after `failures` outage errors in a row: 0.25 s doubling,
    at most 5 s, with jitter."""
    ceiling = min(_PAUSE_CAP_S, 0.25 * 2 ** max(0, failures - 1))
    return random.uniform(ceiling / 2, ceiling)


def _answers() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except OUTAGE_ERRORS:
        forget_broken_connection()
        raise


async def database_back(*, patience: float = DATABASE_PATIENCE_S) -> bool:
    """Wait until the database answers a trivial query (from asgiref's database thread, where
    the chunk's queries run); False when it did not within `patience` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + patience
    failures = 0
    while True:
        try:
            await sync_to_async(_answers)()
            return True
        except OUTAGE_ERRORS:
            failures += 1
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(pause(failures))
