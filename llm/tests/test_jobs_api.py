"""The jobs API: the console's estimate, launch, progress, cancel and retry for scripts, admins
only, with `{"detail", "field"}` refusals; and the judging runs the same way."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.questions.llm_jobs import GENERATE, GUARD
from llm import jobs
from llm.models import ItemStatus, Job, JobItem

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sent")]


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def post(user, name: str, body, **kwargs):
    return api(user).post(reverse(name, kwargs=kwargs or None), body, format="json")


def test_estimate_then_launch_the_same_scope(
    root, make_image, model, sent, django_capture_on_commit_callbacks
):
    from annotation.models import Candidate, CandidateStatus

    for n in range(2):
        _, candidates = make_image(f"img-{n}")
        Candidate.objects.filter(pk=candidates[0].pk).update(status=CandidateStatus.ACCEPTED)
    make_image("img-open")  # its candidate is still in review: nothing for the guard
    body = {"stage": "guard", "scope": "ids", "ids": ["img-0", "img-1", "img-open"]}
    estimate = post(root, "api_job_estimate", body)
    assert estimate.status_code == 200, estimate.json()
    assert estimate.json() == {
        "stage": "guard",
        "model": "gemini-test",
        "items": 2,
        "matched": 3,
        "skipped": 1,
        "calls_min": 2,
        "calls_max": 6,  # up to LLM_MAX_REPAIRS (2) repairs an item
        "tokens_in_min": 3_000,
        "tokens_in_max": 9_000,
        "tokens_out_min": 1_200,
        "tokens_out_max": 3_600,
        "cost_min": 0.01575,
        "cost_max": 0.04725,
    }
    with django_capture_on_commit_callbacks(execute=True):
        launched = post(root, "api_job_launch", {**body, "fresh": True})
    assert launched.status_code == 201
    job = Job.objects.get()
    assert launched.json()["estimate"] == estimate.json()
    shown = launched.json()["job"]
    assert (shown["id"], shown["kind"], shown["status"], shown["total"], shown["over"]) == (
        job.pk,
        GUARD,
        "queued",
        2,
        False,
    )
    assert shown["params"]["fresh"] is True and job.params["fresh"] is True
    assert sorted(JobItem.objects.values_list("key", flat=True)) == ["img-0", "img-1"]
    assert sent == [job.pk]  # its chunk task went out after the commit


def test_filter_scope(root, make_image, model):
    make_image("img-food", [], domain="food")
    make_image("img-cars", [], domain="vehicles")
    body = {"stage": "generate", "scope": "filter", "domain": "vehicles"}
    assert post(root, "api_job_estimate", body).json()["items"] == 1
    post(root, "api_job_launch", body)
    assert list(JobItem.objects.values_list("key", flat=True)) == ["img-cars"]


@pytest.mark.parametrize(
    "body, status, field, words",
    [
        ({"stage": "nope"}, 400, "stage", "is not a valid choice"),
        ({}, 400, "stage", "required"),
        ({"stage": "generate", "scope": "some"}, 400, "scope", "is not a valid choice"),
        ({"stage": "generate", "scope": "ids"}, 400, "ids", "Give the source ids"),
        ({"stage": "generate", "ids": ["img-1"]}, 400, "ids", "scope ids only"),
        (
            {"stage": "generate", "scope": "ids", "ids": ["img-1", "ghost"]},
            400,
            "ids",
            "Unknown for Generate candidates (A.1) (1): ghost",
        ),
        ({"stage": "generate", "scope": "filter"}, 400, "scope", "Choose a domain, a state"),
        (
            {"stage": "generate", "scope": "filter", "domain": "moon"},
            400,
            "domain",
            "Unknown domain 'moon'",
        ),
        (
            {"stage": "generate", "scope": "filter", "state": "lost"},
            400,
            "state",
            "Unknown state 'lost'",
        ),
        ({"stage": "generate", "fresh": "maybe"}, 400, "fresh", "valid boolean"),
        ({"stage": "guard"}, 409, "stage", "Nothing in this scope is eligible"),
        ([1, 2], 400, None, "JSON object"),
    ],
)
@pytest.mark.parametrize("name", ["api_job_estimate", "api_job_launch"])
def test_refusals_name_the_field_and_launch_nothing(
    root, make_image, model, name, body, status, field, words
):
    make_image("img-1", [])
    response = post(root, name, body)
    assert response.status_code == status, response.json()
    assert response.json().get("field") == field
    assert words in response.json()["detail"]
    assert not Job.objects.exists()


def test_a_stage_without_a_model_is_409_saying_what_to_set(root, make_image, settings):
    make_image("img-1", [])
    settings.LLM_MODEL_GENERATION = ""
    response = post(root, "api_job_estimate", {"stage": "generate"})
    assert response.status_code == 409 and "LLM_MODEL_GENERATION" in response.json()["detail"]


def test_admins_only(alice, dave, mallory, make_image, model):
    make_image("img-1", [])
    job = jobs.job_launch(kind=GENERATE, items=[("img-1", {"image_id": 1})])
    calls = [
        ("get", reverse("api_jobs")),
        ("get", reverse("api_job_stages")),
        ("get", reverse("api_job", args=[job.pk])),
        ("post", reverse("api_job_estimate")),
        ("post", reverse("api_job_launch")),
        ("post", reverse("api_job_cancel", args=[job.pk])),
        ("post", reverse("api_job_retry", args=[job.pk])),
        ("post", reverse("api_judging_run_estimate")),
        ("post", reverse("api_judging_run_launch")),
    ]
    for method, address in calls:
        assert getattr(api(), method)(
            address, {"stage": "generate"}, format="json"
        ).status_code in (401, 403)
        for user in (alice, dave, mallory):
            refused = getattr(api(user), method)(address, {"stage": "generate"}, format="json")
            assert refused.status_code == 403, address
            assert refused.json()["detail"] == "Only admins run LLM jobs."
    job.refresh_from_db()
    assert (Job.objects.count(), job.status) == (1, "queued")


def test_progress_cancel_and_retry(root, make_image, model, django_assert_num_queries):
    job = jobs.job_launch(kind=GENERATE, items=[("a", {}), ("b", {}), ("c", {})])
    JobItem.objects.filter(key="a").update(status=ItemStatus.FAILED, last_error="boom: bad")
    Job.objects.filter(pk=job.pk).update(
        items_failed=1, items_remaining=2, tokens_in=10, cost=Decimal("0.5")
    )
    client = api(root)
    # The job, its running and waiting counts, its failures.
    with django_assert_num_queries(4):
        shown = client.get(reverse("api_job", args=[job.pk])).json()
    assert (shown["failed"], shown["remaining"], shown["tokens_in"], shown["cost"]) == (
        1,
        2,
        10,
        0.5,
    )
    assert shown["failures"] == [{"key": "a", "error": "boom: bad", "attempts": 0}]
    assert shown["page"] == f"/jobs/{job.pk}/"
    retried = client.post(reverse("api_job_retry", args=[job.pk])).json()
    assert retried["retried"] == 1 and retried["job"]["failed"] == 0
    assert retried["job"]["remaining"] == 3
    cancelled = client.post(reverse("api_job_cancel", args=[job.pk]))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["over"] is True
    again = client.post(reverse("api_job_cancel", args=[job.pk]))
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]
    assert client.post(reverse("api_job_retry", args=[job.pk])).status_code == 409
    assert client.get(reverse("api_job", args=[999999])).status_code == 404
    listed = client.get(reverse("api_jobs"), {"status": "cancelled"}).json()
    assert [j["id"] for j in listed] == [job.pk]
    assert client.get(reverse("api_jobs"), {"status": "done"}).json() == []


def test_stages_list_what_the_console_offers(root):
    stages = {s["key"]: s for s in api(root).get(reverse("api_job_stages")).json()}
    assert list(stages) == ["propose_entities", "generate", "guard", "build", "refine1", "refine2"]
    assert "no_candidates" in stages["generate"]["states"]
    assert stages["build"]["scope_noun"] == "questions"


def test_the_schema_has_the_jobs_api(root):
    schema = api(root).get(reverse("schema"), {"format": "json"}).json()
    for path in (
        "/api/jobs/",
        "/api/jobs/estimate/",
        "/api/jobs/launch/",
        "/api/jobs/{job_id}/",
        "/api/jobs/{job_id}/cancel/",
        "/api/jobs/{job_id}/retry/",
        "/api/judging/runs/estimate/",
        "/api/judging/runs/launch/",
        "/api/rubrics/versions/{version_id}/checks/{check_pk}/",
    ):
        assert path in schema["paths"], path
