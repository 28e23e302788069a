"""The diversity report's job in a real Celery worker process on a real Redis: Recompute on the
page sends the chunk task through the broker, the worker (which registers the kind when Django
starts) computes both scopes against the test database, and the page shows what it stored.
With the broker down, Recompute says so and saves nothing."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from annotation.analysis.diversity_jobs import DIVERSITY
from annotation.models import FinalQuestion
from llm.models import Job
from llm.tests.test_queue_down import broker_down  # noqa: F401 (fixture)
from tests.test_worker import celery_app, celery_worker, redis_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_worker_computes_the_report_the_page_shows(
    celery_app,  # noqa: F811
    celery_worker,  # noqa: F811
    make_image,
    root,
    client,
):
    worker, log_path = celery_worker
    for source_id, entity, text in [
        ("w-1", "Vespa", "What is this Vespa, and how fast does it go?"),
        ("w-2", "Unimog", "What is this Unimog, and how fast does it go?"),
    ]:
        image, (candidate,) = make_image(source_id, [text], entity=entity)
        FinalQuestion.objects.create(image=image, candidate=candidate, text=text, method="manual")
    client.force_login(root)
    assert client.post(reverse("diversity")).status_code == 302
    job = Job.objects.get(kind=DIVERSITY)
    deadline = time.monotonic() + 60
    while job.status in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        job.refresh_from_db()
    assert (job.status, job.items_done, job.items_failed) == ("done", 2, 0), log_path.read_text()
    html = client.get(reverse("diversity")).content.decode()
    assert 'data-testid="templates-final">1 template<' in html
    assert worker.poll() is None, f"the worker died:\n{log_path.read_text()}"


def test_with_the_task_queue_down_recompute_says_so_and_saves_nothing(client, root, broker_down):  # noqa: F811
    client.force_login(root)
    page = client.post(reverse("diversity"), follow=True)
    assert "The task queue (the Celery broker, Redis) is unreachable" in page.content.decode()
    answer = client.post(reverse("api_diversity"))
    assert answer.status_code == 503 and "unreachable" in answer.json()["detail"]
    assert not Job.objects.exists()
