"""Shared fixtures: the people of every test (alice and bob annotate, erin too, carol
adjudicates, dave revises rubrics, mallory has no role, root is an admin) and images with a
real photo file."""

from __future__ import annotations

import io
import os

import pytest
from django.contrib.auth.models import Group, User
from django.core.files.base import ContentFile
from PIL import Image as PILImage

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # playwright's loop in browser tests


def png_bytes(color=(200, 120, 40), size=(32, 24)) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(autouse=True)
def _test_settings(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    # Hashing is what a login costs, not what a test checks: the fast hasher keeps tests fast.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def reset_broker_pools(app) -> None:
    """Drop the broker connections cached on the Celery app (after its broker_url changed)."""
    if app._pool is not None:
        app._pool.force_close_all()
    app._pool = None
    if "amqp" in app.__dict__:
        app.amqp._producer_pool = None


@pytest.fixture(autouse=True)
def _in_memory_broker():
    """A launch checks that the broker answers (llm.tasks.queue_check): in tests the broker is
    kombu's in-memory one unless a test points the app at a Redis of its own
    (tests/test_worker.py) or at a closed port (llm/tests/test_queue_down.py)."""
    from gamut_site.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = "memory://"
    reset_broker_pools(app)
    # The in-memory broker's queues outlive a connection: what an earlier test sent would
    # still be waiting (and a job adds chunks only while nothing waits: llm.sending.queue_idle).
    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge(app.conf.task_default_queue)
    yield
    app.conf.broker_url = saved
    reset_broker_pools(app)


def _user(username: str, *groups: str, staff: bool = False) -> User:
    user = User.objects.create_user(username, password=f"{username}-pass", is_staff=staff)
    for name in groups:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def alice(db):
    return _user("alice", "annotator")


@pytest.fixture
def bob(db):
    return _user("bob", "annotator")


@pytest.fixture
def erin(db):
    return _user("erin", "annotator")


@pytest.fixture
def carol(db):
    return _user("carol", "adjudicator")


@pytest.fixture
def dave(db):
    return _user("dave", "rubric_reviser")


@pytest.fixture
def mallory(db):
    return _user("mallory")


@pytest.fixture
def root(db):
    return _user("root", staff=True)


@pytest.fixture
def make_image(db):
    """make_image("img-1", ["question one", ...]) -> (Image, [Candidate, ...])"""
    from annotation.models import Candidate, CandidateOrigin, Image

    def make(source_id: str = "img-1", texts: list[str] | None = None, **fields):
        image = Image(
            source_id=source_id,
            entity=fields.pop("entity", "Beef bourguignon"),
            domain=fields.pop("domain", "food"),
            popularity=fields.pop("popularity", "head"),
            **fields,
        )
        image.file.save(f"{source_id}.png", ContentFile(png_bytes()), save=False)
        image.save()
        candidates = [
            Candidate.objects.create(image=image, text=text, origin=CandidateOrigin.IMPORT)
            for text in (texts if texts is not None else ["What is this dish and how is it made?"])
        ]
        return image, candidates

    return make


@pytest.fixture
def run_here(monkeypatch):
    """Jobs run in the test's thread, standing in for the worker: the chunk task a launch sends
    after its commit is dropped, and `run_here(job or its id)` runs the job's chunks here until
    nothing is left to claim, then gives the job as the database holds it. The handlers record
    from threads of their own: the tests need `django_db(transaction=True)`."""
    from django.db import transaction

    from llm import jobs
    from llm.gateway import Gateway, GatewaySettings
    from llm.models import Job
    from llm.ratelimit import MemoryTokenBucket
    from llm.tasks import run_job_chunk

    monkeypatch.setattr(
        run_job_chunk, "delay_on_commit", lambda job_id: transaction.on_commit(lambda: None)
    )

    def gateway() -> Gateway:
        return Gateway(limiter=MemoryTokenBucket(), conf=GatewaySettings())

    def run(job) -> Job:
        job_id = getattr(job, "pk", job)
        while jobs.job_run_chunk(job_id=job_id, gateway_factory=gateway):
            pass
        return Job.objects.get(pk=job_id)

    return run
