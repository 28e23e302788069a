"""Judging runs over the API: the runs page's estimates and launches, as JSON (admins)."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import EvaluatedModel, Judge, Response
from judging.tests.conftest import make_question
from llm.models import Job, LLMModel
from llm.tasks import run_job_chunk

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_workers(monkeypatch):
    monkeypatch.setattr(run_job_chunk, "delay_on_commit", lambda job_id: None)


@pytest.fixture
def setup(db):
    llm = LLMModel.objects.create(
        name="flash",
        provider="gemini",
        model="gemini-2.5-flash",
        price_input_per_million=1,
        price_output_per_million=10,
    )
    evaluated = EvaluatedModel.objects.create(name="model-a", llm_model=llm)
    judge = Judge.objects.create(name="judge-a", llm_model=llm)
    questions = [make_question(f"q{i}") for i in (1, 2, 3)]
    return evaluated, judge, questions


def post(root, name: str, body):
    client = APIClient()
    client.force_authenticate(root)
    return client.post(reverse(name), body, format="json")


def test_collect_estimate_then_launch(root, setup):
    evaluated, _, questions = setup
    Response.objects.create(
        model=evaluated, question=questions[0], setting="text_only", text="already"
    )
    body = {"what": "collect", "model": "model-a", "setting": "text_only"}
    estimate = post(root, "api_judging_run_estimate", body)
    assert estimate.status_code == 200, estimate.json()
    # 2 calls x (150 in, 1,500 out) at 1 and 10 per million tokens, as the page says.
    assert {k: estimate.json()[k] for k in ("items", "calls", "cost", "model")} == {
        "items": 2,
        "calls": 2,
        "cost": 0.0303,
        "model": "flash",
    }
    launched = post(root, "api_judging_run_launch", {**body, "fresh": True})
    assert launched.status_code == 201
    job = Job.objects.get()
    assert launched.json()["job"]["id"] == job.pk and launched.json()["job"]["total"] == 2
    assert job.kind == "judging.collect" and job.launched_by == root
    assert job.params["setting"] == "text_only" and job.params["fresh"] is True


def test_judge_estimate_then_launch_a_chosen_scope(root, setup):
    evaluated, _, questions = setup
    for question in questions[:2]:
        Response.objects.create(
            model=evaluated, question=question, setting="multimodal", text="An answer."
        )
    body = {"what": "judge", "judge": "judge-a", "models": ["model-a"], "settings": ["multimodal"]}
    assert post(root, "api_judging_run_estimate", body).json()["calls"] == 6
    launched = post(root, "api_judging_run_launch", {**body, "ids": ["q2"]})
    assert launched.status_code == 201
    assert Job.objects.get().items_total == 1


@pytest.mark.parametrize(
    "body, status, field, words",
    [
        ({"what": "collect", "setting": "multimodal"}, 400, "model", "collect needs model"),
        ({"what": "collect", "model": "model-a"}, 400, "setting", "collect needs setting"),
        (
            {"what": "collect", "model": "ghost", "setting": "multimodal"},
            400,
            "model",
            "does not exist",
        ),
        (
            {"what": "collect", "model": "model-a", "setting": "sideways"},
            400,
            "setting",
            "not a valid choice",
        ),
        ({"what": "judge"}, 400, "judge", "judge needs judge"),
        (
            {"what": "judge", "judge": "judge-a", "settings": ["upside"]},
            400,
            "settings",
            "unknown setting 'upside'",
        ),
        (
            {"what": "judge", "judge": "judge-a", "ids": ["q1", "nope"]},
            400,
            "ids",
            "No final question for 1 source id(s): nope",
        ),
        ({"what": "judge", "judge": "judge-a"}, 409, "what", "Every response in scope"),
        ({"what": "grade"}, 400, "what", "not a valid choice"),
        ("collect", 400, None, "JSON object"),
    ],
)
@pytest.mark.parametrize("name", ["api_judging_run_estimate", "api_judging_run_launch"])
def test_refusals_name_the_field(root, setup, name, body, status, field, words):
    response = post(root, name, body)
    assert response.status_code == status, response.json()
    assert response.json().get("field") == field and words in response.json()["detail"]
    assert not Job.objects.exists()


def test_batch_needs_a_gemini_judge(root, setup):
    evaluated, judge, questions = setup
    Response.objects.create(
        model=evaluated, question=questions[0], setting="text_only", text="An answer."
    )
    judge.llm_model = LLMModel.objects.create(name="qwen", provider="openai", model="qwen")
    judge.save()
    refused = post(
        root, "api_judging_run_estimate", {"what": "judge", "judge": "judge-a", "batch": True}
    )
    assert refused.status_code == 400 and refused.json()["field"] == "batch"


def test_a_run_launched_while_the_task_queue_is_down_is_a_503_and_saves_nothing(
    root, setup, monkeypatch
):
    from django.test import Client

    from conftest import reset_broker_pools
    from gamut_site.celery import app
    from llm.tasks import QueuedTask

    # The real delay_on_commit, and a broker on a port nobody listens on.
    monkeypatch.setattr(
        run_job_chunk,
        "delay_on_commit",
        QueuedTask.delay_on_commit.__get__(run_job_chunk._get_current_object()),
    )
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    reset_broker_pools(app)
    evaluated = setup[0]
    body = {"what": "collect", "model": "model-a", "setting": "text_only"}
    launched = post(root, "api_judging_run_launch", body)
    assert launched.status_code == 503
    assert "task queue" in launched.json()["detail"]
    page = Client()
    page.force_login(root)
    form = {"what": "collect", "collect-model": evaluated.pk, "collect-setting": "text_only"}
    answer = page.post(reverse("judging_runs_launch"), form)
    assert answer.status_code == 503 and "task queue" in answer.content.decode()
    assert not Job.objects.exists()
    reset_broker_pools(app)
