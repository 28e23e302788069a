"""Evaluate a model on a release from the judging runs page and the API (issue 25, section 2):
admins only, POST with CSRF, estimate then launch, the run's page with each step and the
result, the API's 400 with the field at fault, and the page's query counts."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from judging.models import Response
from judging.runs import evaluate as ev
from judging.tests.test_evaluate import (  # noqa: F401 (fixtures)
    answer_calls,
    bench,
    drain,
    harness,
    judge_calls,
)
from llm.models import Job
from tests.fake_llm import fake_llm  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

FIXED = 3  # the session, the user and their groups (the menu's roles)
FORM = {"evaluate-model": "model-new", "evaluate-release": "v1.0"}


def post(client: Client, name: str, data: dict, **headers):
    return client.post(reverse(name), data, **headers)


# --- who may -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["judging_evaluate_estimate", "judging_evaluate_launch"])
def test_only_admins_post(client, bench, alice, carol, dave, mallory, root, name):
    assert post(client, name, FORM).status_code == 302  # anonymous: to the login page
    for person in (alice, carol, dave, mallory):
        client.force_login(person)
        assert post(client, name, FORM).status_code == 403
    client.force_login(root)
    assert client.get(reverse(name)).status_code == 405  # state changes only on POST
    assert Job.objects.count() == 0


def test_the_run_page_is_for_admins(client, bench, alice, mallory, root):
    harness, *_ = bench
    plan = ev.evaluate_plan(model="model-new", release="v1.0", settings=["text_only"])
    job = ev.evaluate_launch(user=None, plan=plan)
    url = reverse("judging_evaluation", args=[job.pk])
    for person in (alice, mallory):
        client.force_login(person)
        assert client.get(url).status_code == 403
    client.force_login(root)
    assert client.get(url).status_code == 200
    # Another kind of job has no evaluation page.
    other = Job.objects.create(kind="judging.collect")
    assert client.get(reverse("judging_evaluation", args=[other.pk])).status_code == 404


def test_launch_needs_the_csrf_token(bench, root):
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    assert post(client, "judging_evaluate_launch", FORM).status_code == 403
    assert Job.objects.count() == 0


# --- the page ----------------------------------------------------------------------------------


def test_runs_page_offers_the_form(client, root, bench, django_assert_num_queries):
    client.force_login(root)
    # The other two forms' and lists' 11 (the judge form's release choices among them), and
    # the evaluate form's 4: whether a release exists, its models, releases and judges.
    with django_assert_num_queries(FIXED + 11 + 4):
        page = client.get(reverse("judging_runs")).content.decode()
    assert 'data-testid="evaluate"' in page and "Evaluate a model on a release" in page
    assert 'value="v1.0"' in page and "Settings (none ticked: both)" in page
    assert "manage.py evaluate MODEL --release NAME" in page


def test_estimate_then_launch_then_the_result(client, root, bench, django_assert_num_queries):
    harness, release, judge, new = bench
    client.force_login(root)
    data = {**FORM, "evaluate-settings": ["text_only"]}
    partial = post(client, "judging_evaluate_estimate", data, HTTP_HX_REQUEST="true")
    body = partial.content.decode()
    assert "<html" not in body  # the partial only
    assert '<td data-field="items">6</td>' in body and '<td data-field="calls">24</td>' in body
    assert '<td data-field="time">about 2 s</td>' in body  # 18 judge calls at 600 a minute
    assert "no request limit" in body  # the answerer's
    assert 'name="evaluate-settings" value="text_only"' in body  # carried to the launch
    assert Job.objects.count() == 0 and harness.fake.requests == []

    launched = post(client, "judging_evaluate_launch", data)
    job = Job.objects.get()
    assert launched.status_code == 302
    assert launched["Location"] == reverse("judging_evaluation", args=[job.pk])
    assert job.kind == "judging.evaluate" and job.items_total == 6 and job.launched_by == root

    url = reverse("judging_evaluation", args=[job.pk])
    # the job, its judges, model and release; the release's versions, the answers, and the
    # judge's scope (its responses and the checks per version: no verdict counts yet)
    with django_assert_num_queries(FIXED + 8):
        running = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' in running and "The result shows here" in running
    assert "answers of model-new" in running and "0 of 6" in running

    drain(harness, job)
    assert (answer_calls(harness.fake), judge_calls(harness.fake)) == (6, 18)
    # the verdict counts of the judge's scope now; and the result, per judge and setting: the
    # board's questions, responses, model names, counts and the audit's pairs
    with django_assert_num_queries(FIXED + 8 + 1 + 5):
        page = client.get(url).content.decode()
    assert 'hx-trigger="every 2s"' not in page
    result = ev.evaluate_result(ev.plan_of(job))[0]
    assert f'<td class="num" data-field="rank">{result.rank} of 3</td>' in page
    assert f"{result.row.gamut:.1f}" in page and "6 of 6" in page
    for n in result.neighbours:
        assert f'data-neighbour="{n.model}"' in page
    assert "text_only" not in page.replace('data-setting="text_only"', "")  # plain words
    # htmx's poll of an over run stops it (286)
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 286


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"evaluate-model": "nobody"}, "Evaluated model: Select a valid choice."),
        (
            {"evaluate-judges": ["nobody"]},
            "Judges (none ticked: every judge that scored the release and calls a model): "
            "Select a valid choice. nobody is not one of the available choices.",
        ),
    ],
)
def test_estimate_says_what_is_wrong_and_where(client, root, bench, data, said):
    client.force_login(root)
    body = post(client, "judging_evaluate_estimate", {**FORM, **data}).content.decode()
    assert said in body


def test_estimate_refuses_a_judge_that_never_scored_the_release(client, root, bench):
    from judging.models import Judge

    Judge.objects.create(name="fresh-judge")
    client.force_login(root)
    data = {**FORM, "evaluate-judges": ["fresh-judge"]}
    body = post(client, "judging_evaluate_estimate", data, HTTP_HX_REQUEST="true").content.decode()
    assert "Judges (none ticked" in body and "fresh-judge never scored release v1.0" in body
    launched = post(client, "judging_evaluate_launch", data)
    assert launched.status_code == 400 and Job.objects.count() == 0


# --- the API -----------------------------------------------------------------------------------


def api(client: Client, name: str, body: dict, **kwargs):
    return client.post(reverse(name, **kwargs), body, content_type="application/json")


def test_api_estimate_launch_and_result(client, root, bench):
    harness, release, judge, new = bench
    client.force_login(root)
    body = {"model": "model-new", "release": "v1.0", "settings": ["multimodal"]}
    est = api(client, "api_judging_evaluate_estimate", body)
    assert est.status_code == 200, est.content
    data = est.json()
    assert (data["items"], data["calls"]) == (6, 24)
    assert [s["step"] for s in data["steps"]] == ["collect", "judge"]
    assert {q["model"]: q["seconds"] for q in data["quotas"]} == {
        "answerer": None,
        "judge-llm": pytest.approx(1.8),
    }
    assert Job.objects.count() == 0

    launched = api(client, "api_judging_evaluate_launch", body)
    assert launched.status_code == 201, launched.content
    job = Job.objects.get()
    assert launched.json()["evaluation"] == reverse("api_judging_evaluation", args=[job.pk])
    before = client.get(launched.json()["evaluation"]).json()
    assert before["result"] is None and before["steps"][0]["done"] == 0

    drain(harness, job)
    after = client.get(launched.json()["evaluation"]).json()
    assert after["job"]["status"] == "done"
    assert [s["done"] for s in after["steps"]] == [6, 6]
    [row] = after["result"]
    expected = ev.result_dict(ev.evaluate_result(ev.plan_of(job))[0])
    assert row == expected
    assert row["ranked"] == 3 and row["scored"] == 6 and row["neighbours"]
    # Nothing left to do: 409, not a second job.
    again = api(client, "api_judging_evaluate_launch", body)
    assert again.status_code == 409 and "nothing to do" in again.json()["detail"]
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "field", "said"),
    [
        ({"release": "v1.0"}, "model", "required"),
        ({"model": "nobody", "release": "v1.0"}, "model", "No evaluated model is named"),
        ({"model": "model-new", "release": "v9"}, "release", "No release is named 'v9'"),
        (
            {"model": "model-new", "release": "v1.0", "settings": ["sideways"]},
            "settings",
            "Unknown setting",
        ),
        ({"model": "model-new", "release": "v1.0", "judges": ["x"]}, "judges", "No judge"),
        ({"model": "model-new", "release": "v1.0", "judges": "judge-g"}, "judges", "list"),
        ({"model": ["model-new"], "release": "v1.0"}, "model", "valid string"),
    ],
)
def test_api_bad_input_is_a_400_naming_the_field(client, root, bench, body, field, said):
    client.force_login(root)
    for name in ("api_judging_evaluate_estimate", "api_judging_evaluate_launch"):
        answer = api(client, name, body)
        assert answer.status_code == 400, answer.content
        assert answer.json()["field"] == field and said in answer.json()["detail"]
    assert Job.objects.count() == 0


def test_api_is_for_admins(client, bench, alice, root):
    body = {"model": "model-new", "release": "v1.0"}
    client.force_login(alice)
    for name in ("api_judging_evaluate_estimate", "api_judging_evaluate_launch"):
        answer = api(client, name, body)
        assert answer.status_code == 403 and "admins" in answer.json()["detail"]
    plan = ev.evaluate_plan(model="model-new", release="v1.0")
    job = ev.evaluate_launch(user=None, plan=plan)
    url = reverse("api_judging_evaluation", args=[job.pk])
    assert client.get(url).status_code == 403
    client.force_login(root)
    assert client.get(url).status_code == 200
    assert client.get(reverse("api_judging_evaluation", args=[job.pk + 1])).status_code == 404
    assert Response.objects.filter(model__name="model-new").count() == 0
