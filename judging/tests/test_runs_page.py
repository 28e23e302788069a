"""The judging runs page: who may use it, the estimates, and launches."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

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


def _post(client, name, data, **headers):
    return client.post(reverse(name), data, **headers)


@pytest.mark.parametrize("name", ["judging_runs", "judging_runs_estimate", "judging_runs_launch"])
def test_only_admins(client, alice, carol, dave, name):
    method = client.get if name == "judging_runs" else client.post
    assert method(reverse(name)).status_code == 302  # anonymous: to the login page
    for person in (alice, carol, dave):
        client.force_login(person)
        assert method(reverse(name)).status_code == 403


def test_page_lists_models_judges_and_explains_when_there_are_none(client, root):
    client.force_login(root)
    page = client.get(reverse("judging_runs")).content.decode()
    assert 'data-testid="no-evaluated"' in page and 'data-testid="no-judges"' in page
    # What to set, said before any form is offered.
    assert "Judging → Evaluated models" in page and "Judging → Judges" in page
    assert "GEMINI_API_KEY" in page


def test_collect_estimate_then_launch(client, root, setup):
    evaluated, judge, questions = setup
    Response.objects.create(
        model=evaluated, question=questions[0], setting="text_only", text="already"
    )
    client.force_login(root)
    data = {"what": "collect", "collect-model": evaluated.pk, "collect-setting": "text_only"}
    partial = _post(client, "judging_runs_estimate", data, HTTP_HX_REQUEST="true")
    body = partial.content.decode()
    assert '<td data-field="items">2</td>' in body  # q1 is answered already
    assert '<td data-field="calls">2</td>' in body
    assert "<html" not in body  # the partial only
    # 2 calls x (150 in, 1,500 out) at 1 and 10 per million tokens.
    assert '<td data-field="cost">0.0303</td>' in body
    assert 'name="collect-setting" value="text_only"' in body  # carried to the launch

    launched = _post(client, "judging_runs_launch", data)
    job = Job.objects.get()
    assert launched.status_code == 302 and launched["Location"] == reverse("job", args=[job.pk])
    assert job.kind == "judging.collect" and job.items_total == 2
    assert job.params["setting"] == "text_only" and job.launched_by == root


def test_judge_estimate_counts_checks_and_refuses_unknown_ids(client, root, setup):
    evaluated, judge, questions = setup
    for question in questions[:2]:
        Response.objects.create(
            model=evaluated, question=question, setting="multimodal", text="An answer."
        )
    client.force_login(root)
    data = {"what": "judge", "judge-judge": judge.pk}
    body = _post(client, "judging_runs_estimate", data).content.decode()
    assert '<td data-field="calls">6</td>' in body  # 2 responses x 3 checks
    assert "2 response(s) in scope" in body
    body = _post(
        client, "judging_runs_estimate", {**data, "judge-ids": "q1\nnope\nq9"}
    ).content.decode()
    assert "No final question for 2 source id(s): nope, q9" in body
    body = _post(
        client, "judging_runs_estimate", {**data, "judge-settings": ["text_only"]}
    ).content.decode()
    assert 'data-testid="estimate-error"' in body and "Every response in scope" in body
    # Fresh calls judge nothing already judged, and the page says so, with the way to re-judge.
    fresh = _post(
        client,
        "judging_runs_estimate",
        {**data, "judge-settings": ["text_only"], "judge-fresh": "on"},
    ).content.decode()
    assert "Fresh calls judge only checks without a verdict" in fresh
    assert "add a judge under a new name" in fresh
    page = client.get(reverse("judging_runs")).content.decode()
    assert "ignore the ledger's cache and earlier verdicts" not in page
    assert "Fresh calls for the checks still without a verdict" in page
    launched = _post(client, "judging_runs_launch", {**data, "judge-ids": "q2"})
    assert launched.status_code == 302
    job = Job.objects.get()
    assert job.kind == "judging.judge" and job.items_total == 1
    assert job.params["judge"] == "judge-a"


def test_launch_needs_the_csrf_token(root, setup):
    evaluated, _, _ = setup
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(root)
    answer = strict.post(
        reverse("judging_runs_launch"),
        {"what": "collect", "collect-model": evaluated.pk, "collect-setting": "multimodal"},
    )
    assert answer.status_code == 403 and not Job.objects.exists()


def test_batch_judging_from_the_page(client, root, setup):
    evaluated, judge, questions = setup
    for question in questions:
        Response.objects.create(
            model=evaluated, question=question, setting="text_only", text="An answer."
        )
    client.force_login(root)
    data = {"what": "judge", "judge-judge": judge.pk, "judge-batch": "on"}
    body = _post(client, "judging_runs_estimate", data).content.decode()
    assert '<td data-field="items">1</td>' in body  # three responses in one batch
    assert '<td data-field="calls">9</td>' in body and "half the price" in body
    # 9 calls x (2,200 in, 80 out) at 1 and 10 per million, halved.
    assert '<td data-field="cost">0.0135</td>' in body
    _post(client, "judging_runs_launch", data)
    job = Job.objects.get()
    assert job.kind == "judging.judge_batch" and job.params["batch"] is True
    judge.llm_model = LLMModel.objects.create(name="qwen", provider="openai", model="qwen")
    judge.save()
    body = _post(client, "judging_runs_estimate", data).content.decode()
    assert "The Batch API is Gemini&#x27;s" in body
