"""The session engine (SESSION_ENGINE): Django's database sessions, with the session read by a
query compiled once (core.prepared), as every request reads it."""

from __future__ import annotations

from datetime import datetime

from django.contrib.sessions.backends.db import SessionStore as DatabaseStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from core.prepared import Prepared

_SESSION = Prepared(
    lambda key, now: Session.objects.filter(session_key=key, expire_date__gt=now),
    key=str,
    now=datetime,
)


class SessionStore(DatabaseStore):
    def _get_session_from_db(self):
        session = _SESSION.first(key=self.session_key, now=timezone.now())
        if session is None:
            self._session_key = None
        return session
