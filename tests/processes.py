"""For tests that start other processes (racing annotators, a Celery worker): the address of
the test database that those processes must open."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection


def child_database_url() -> str:
    """DATABASE_URL of the test database, for processes started by a test."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        name = str(db["NAME"])
        if connection.creation.is_in_memory_db(name):
            pytest.skip("the SQLite test database is in memory; other processes can't open it")
        return "sqlite:///" + str(Path(name).resolve())
    if connection.vendor == "postgresql":
        auth = ""
        if db.get("USER"):
            auth = quote(db["USER"], safe="")
            if db.get("PASSWORD"):
                auth += ":" + quote(db["PASSWORD"], safe="")
            auth += "@"
        host = quote(db.get("HOST") or "", safe="")
        port = f":{db['PORT']}" if db.get("PORT") else ""
        return f"postgres://{auth}{host}{port}/{quote(db['NAME'], safe='')}"
    pytest.skip(f"no child-process database URL for {connection.vendor}")
