"""A launch while the task queue (the Celery broker) is down: a clear 503 and nothing saved,
on the API, the console and `launch_job` (retrying is then safe: no second job). The broker is
pointed at a closed port, not mocked; task_always_eager stays off."""

from __future__ import annotations

import logging

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.questions.llm_jobs import GUARD
from conftest import reset_broker_pools
from llm import tasks
from llm.models import ItemStatus, Job, JobItem

pytestmark = pytest.mark.django_db
CLOSED = "redis://127.0.0.1:1/0"


@pytest.fixture
def broker_down():
    from gamut_site.celery import app

    saved = (app.conf.broker_url, app.conf.task_always_eager)
    app.conf.broker_url, app.conf.task_always_eager = CLOSED, False
    reset_broker_pools(app)
    try:
        yield app
    finally:
        app.conf.broker_url, app.conf.task_always_eager = saved
        reset_broker_pools(app)


@pytest.fixture
def guard_ready(make_image, model):
    from annotation.models import Candidate, CandidateStatus

    _, candidates = make_image("img-0")
    Candidate.objects.filter(pk=candidates[0].pk).update(status=CandidateStatus.ACCEPTED)


BODY = {"stage": "guard", "scope": "ids", "ids": ["img-0"]}


def test_the_api_answers_503_and_saves_nothing(root, guard_ready, broker_down):
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(reverse("api_job_launch"), BODY, format="json")
    assert response.status_code == 503
    assert response.json() == {"detail": tasks.QUEUE_UNREACHABLE}
    assert not Job.objects.exists() and not JobItem.objects.exists()


def test_the_console_answers_503_with_the_reason_and_saves_nothing(root, guard_ready, broker_down):
    client = Client()
    client.force_login(root)
    page = client.post(
        reverse("job_launch"), {"launcher": "guard", "scope": "chosen", "ids": "img-0"}
    )
    assert page.status_code == 503
    assert "The task queue (the Celery broker, Redis) is unreachable" in page.content.decode()
    assert not Job.objects.exists()


def test_launch_job_exits_3_and_saves_nothing(root, guard_ready, broker_down, capsys):
    with pytest.raises(CommandError, match="task queue .* is unreachable") as info:
        call_command("launch_job", "guard", "--ids", "img-0", "--user", root.username)
    assert info.value.returncode == 3
    assert not Job.objects.exists()


def test_a_retry_while_the_queue_is_down_changes_nothing(root, guard_ready, broker_down):
    job = Job.objects.create(kind=GUARD, items_total=1, items_failed=1, status="failed")
    JobItem.objects.create(job=job, key="img-0", payload={}, status=ItemStatus.FAILED)
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(reverse("api_job_retry", args=[job.pk]))
    assert response.status_code == 503, response.json()
    job.refresh_from_db()
    assert job.status == "failed" and job.items_failed == 1
    assert JobItem.objects.get().status == ItemStatus.FAILED


def test_a_send_that_fails_after_the_commit_keeps_the_job_for_the_sweep(
    root, guard_ready, broker_down, monkeypatch, caplog, django_capture_on_commit_callbacks
):
    # The broker answered the check, then went away before the commit's send.
    monkeypatch.setattr(tasks, "queue_check", lambda app: None)
    client = APIClient()
    client.force_authenticate(root)
    with (
        caplog.at_level(logging.WARNING, logger="llm.tasks"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = client.post(reverse("api_job_launch"), BODY, format="json")
    assert response.status_code == 201
    job = Job.objects.get()
    assert job.status == "queued" and job.items_remaining == 1
    assert "not sent (the sweep sends it later)" in caplog.text
