"""The diversity report as a background job: Recompute (POST, admins) launches it, the job's
chunk computes both scopes and stores them, and the page, its CSV and JSON and the API show the
stored report with when it was computed and how long it took; progress while it runs."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from annotation.analysis.diversity_jobs import DIVERSITY
from annotation.models import FinalQuestion
from llm.models import Job

# Every launch's chunk task is dropped and the tests run the jobs here (conftest's run_here).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("run_here")]


@pytest.fixture
def questions(make_image, root):
    texts = [
        ("d-1", "Vespa", "What is this Vespa, and how fast does it go?"),
        ("d-2", "Unimog", "What is this Unimog, and how fast does it go?"),
        ("d-3", "Ramen", "Who invented the broth <script>, and where did it spread?"),
    ]
    for source_id, entity, text in texts:
        image, (candidate,) = make_image(source_id, [text], entity=entity)
        FinalQuestion.objects.create(image=image, candidate=candidate, text=text, method="manual")
    return texts


def recompute(client) -> Job:
    answer = client.post(reverse("diversity"))
    assert answer.status_code == 302 and answer["Location"] == reverse("diversity")
    return Job.objects.filter(kind=DIVERSITY).latest("pk")


def test_recompute_runs_in_the_background_and_the_page_shows_the_stored_report(
    run_here, client, questions, root, django_assert_num_queries
):
    client.force_login(root)
    url = reverse("diversity")
    # session, user, their groups, the running job, the latest one over
    with django_assert_num_queries(5):
        page = client.get(url)
    html = page.content.decode()
    assert 'data-testid="not-computed"' in html and 'data-testid="recompute"' in html
    assert client.get(url, {"format": "json"}).status_code == 404
    assert "not been computed yet" in client.get(url, {"format": "json"}).content.decode()

    job = recompute(client)
    assert (job.status, job.items_total, job.launched_by) == ("queued", 2, root)
    running = client.get(url).content.decode()
    assert 'data-testid="running"' in running and "0 of 2 parts done" in running
    assert 'hx-trigger="every 2s"' in running and 'data-testid="recompute"' not in running
    # A second Recompute while it runs starts nothing.
    again = client.post(url, follow=True)
    assert f"being computed already (job {job.pk})" in again.content.decode()
    assert Job.objects.filter(kind=DIVERSITY).count() == 1
    poll = client.get(url, headers={"HX-Request": "true"})
    assert poll.status_code == 200 and "0 of 2 parts done" in poll.content.decode()

    job = run_here(job)
    assert (job.status, job.items_done, job.items_failed) == ("done", 2, 0)
    result = job.items.get(key="final").result
    assert result["report"]["overall"]["templates"] == 2 and result["seconds"] >= 0
    # The poll stops and reloads the page, which shows the report.
    poll = client.get(url, headers={"HX-Request": "true"})
    assert poll.status_code == 286 and poll["HX-Refresh"] == "true"
    # session, user, their groups, the running job, the latest one over, its items
    with django_assert_num_queries(6):
        page = client.get(url)
    html = page.content.decode()
    assert 'data-testid="templates-final">2 templates' in html
    assert "what is this &lt;entity&gt; and how fast does it go" in html
    assert "&lt;script&gt;" in html and "<script>," not in html  # escaped
    assert reverse("image", args=["d-1"]) in html
    assert 'data-testid="computed-at">Computed ' in html and "started by root" in html
    assert "final questions (not dropped): 3 questions analysed in" in html
    assert 'data-testid="recompute"' in html
    # The job is one of the console's, with its page linked from the report.
    assert reverse("job", args=[job.pk]) in html
    job_page = client.get(reverse("job", args=[job.pk])).content.decode()
    assert "Compute the question diversity" in job_page and "annotation.diversity" not in job_page
    assert f'href="{reverse("job", args=[job.pk])}"' in client.get(reverse("jobs")).content.decode()


def test_the_stored_report_exports_csv_json_and_the_api_says_when(
    run_here, client, questions, root
):
    client.force_login(root)
    url = reverse("diversity")
    run_here(recompute(client))
    data = client.get(url, {"format": "json"}).json()
    assert set(data) == {"final", "candidates"}
    assert data["final"]["overall"]["templates"] == 2
    assert data["final"]["computed_at"] and data["final"]["seconds"] >= 0
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    url, {"format": "csv", "scope": "final", "table": "domains"}
                ).content.decode()
            )
        )
    )
    assert rows[0]["domain"] == "all" and rows[0]["questions"] == "3"
    templates = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    url, {"format": "csv", "scope": "candidates", "table": "templates"}
                ).content.decode()
            )
        )
    )
    assert templates[0]["size"] == "2"
    for bad in (
        {"format": "xml"},
        {"format": "csv", "scope": "all"},
        {"format": "csv", "table": "x"},
    ):
        answer = client.get(url, bad)
        assert answer.status_code == 400
        assert next(iter(set(bad) - {"format"}), "format") in answer.content.decode()
    api = client.get(reverse("api_diversity"), {"scope": "final"}).json()
    assert api["scope"] == "final" and api["overall"]["templates"] == 2
    assert api["templates"][0]["examples"][0]["key"] == "d-1"
    assert api["computed_at"] == data["final"]["computed_at"]
    assert api["job"] == Job.objects.get(kind=DIVERSITY).pk
    bad = client.get(reverse("api_diversity"), {"scope": "everything"})
    assert bad.status_code == 400 and "scope" in json.dumps(bad.json())


def test_the_api_recomputes_and_refuses_a_second_run(run_here, client, questions, root):
    client.force_login(root)
    url = reverse("api_diversity")
    missing = client.get(url)
    assert missing.status_code == 404 and "POST /api/diversity/" in missing.json()["detail"]
    launched = client.post(url)
    assert launched.status_code == 202
    job = Job.objects.get(pk=launched.json()["job"], kind=DIVERSITY)
    assert client.post(url).status_code == 409
    run_here(job)
    assert client.get(url, {"scope": "candidates"}).json()["overall"]["questions"] == 3


def test_only_admins_read_or_recompute(client, questions, alice):
    url = reverse("diversity")
    api = reverse("api_diversity")
    assert client.get(url).status_code == 302  # to the login page
    assert client.post(url).status_code == 302
    assert client.get(api).status_code in (401, 403)
    assert client.post(api).status_code in (401, 403)
    client.force_login(alice)
    assert client.get(url).status_code == 403
    assert client.post(url).status_code == 403
    assert client.get(api).status_code == 403
    assert client.post(api).status_code == 403
    assert not Job.objects.filter(kind=DIVERSITY).exists()
