"""The release pages and API (issue 25): who may see and cut, what they show, refusals, and
the queries each page makes (pinned)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from judging.models import Release
from judging.releases.services import create_release
from judging.tests.conftest import final_checks, make_question
from judging.tests.test_releases import _human_round, _judge_all

pytestmark = pytest.mark.django_db


@pytest.fixture
def benchmark(judge, respond):
    """Two questions answered by two models and judged; a release v1; then a human round
    rewords a check of q0 and is judged again, and a release v2."""
    questions = [make_question(f"q{i}", tiers=("answer_critical", "valuable")) for i in range(2)]
    for question in questions:
        _judge_all(judge, respond(question, "model-a"))
        _judge_all(judge, respond(question, "model-b"), "missing")
    create_release("v1", "the first")
    _human_round(questions[0], edit={1: "a reworded check"})
    return questions


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_annotators_get_the_apps_refusal_everywhere(client, alice, benchmark):
    client.force_login(alice)
    for url in (
        reverse("releases"),
        reverse("release", args=["v1"]),
        reverse("release_diff") + "?a=v1&b=draft",
    ):
        response = client.get(url)
        assert response.status_code == 403
        assert "Only admins read and cut releases." in response.content.decode()
    assert client.post(reverse("release_cut"), {"name": "v9"}).status_code == 403
    api = _api(alice)
    for url in ("/api/releases/", "/api/releases/v1/", "/api/releases/diff/?a=v1&b=draft"):
        response = api.get(url)
        assert response.status_code == 403
        assert response.json() == {"detail": "Only admins read and cut releases."}
    assert api.post("/api/releases/", {"name": "v9"}, format="json").status_code == 403
    assert not Release.objects.filter(name="v9").exists()


def test_anonymous_visitors_are_sent_to_log_in(client, benchmark):
    response = client.get(reverse("releases"))
    assert response.status_code == 302 and "/login" in response["Location"]
    assert APIClient().get("/api/releases/").status_code in (401, 403)


def test_the_list_and_the_cut(client, root, benchmark, django_assert_num_queries):
    client.force_login(root)
    with django_assert_num_queries(4):  # session, user, groups (the menu), the releases
        body = client.get(reverse("releases")).content.decode()
    assert "v1" in body and "the first" in body and "Cut a release" in body
    assert "at most 40 characters" in body and "at most 2000 characters" in body
    assert 'name="csrfmiddlewaretoken"' in body
    assert client.get(reverse("release_cut")).status_code == 405  # state changes only on POST
    response = client.post(reverse("release_cut"), {"name": "v2", "notes": "after round 1"})
    assert response.status_code == 302 and response["Location"] == reverse("release", args=["v2"])
    release = Release.objects.get(name="v2")
    assert release.created_by == root and release.notes == "after round 1"
    # a refusal keeps what was typed and says what is wrong
    response = client.post(reverse("release_cut"), {"name": "v2", "notes": "keep me"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "A release named v2 exists already" in body and "keep me" in body
    assert Release.objects.count() == 2


def test_cutting_needs_the_csrf_token(root, benchmark):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(root)
    assert strict.post(reverse("release_cut"), {"name": "v2"}).status_code == 403
    assert not Release.objects.filter(name="v2").exists()


def test_the_release_page(client, root, judge, benchmark, django_assert_num_queries):
    create_release("v2")
    client.force_login(root)
    # session, user, groups; the release; its questions; the judges; per judge and setting
    # (one judge, two settings) the board's four queries and the estimate's none (the judge
    # has no model to call); the other releases.
    with django_assert_num_queries(14):
        response = client.get(reverse("release", args=["v2"]))
    body = response.content.decode()
    assert response.status_code == 200
    release = Release.objects.get(name="v2")
    assert release.content_hash in body
    assert "λ = 0.5, μ = -2.0" in body
    assert "q0" in body and "q1" in body and "human round 1" in body and ">imported<" in body
    # q0's new check has no verdict yet: both models wait on it
    assert "2 responses still wait for gemini-judge's verdicts on this release" in body
    assert "has no model to call" in body
    v1 = client.get(reverse("release", args=["v1"])).content.decode()
    assert "still wait" not in v1
    assert client.get(reverse("release", args=["nope"])).status_code == 404


def test_the_diff_page(client, root, judge, benchmark, django_assert_num_queries):
    q0 = benchmark[0]
    response = q0.responses.get(model__name="model-a")
    for check in final_checks(q0):
        from judging.verdicts.services import verdict_record

        verdict = "missing" if check.text == "a reworded check" else "meets"
        verdict_record(judge=judge, response=response, check=check, verdict=verdict)
    q1 = benchmark[1]
    q1.dropped_at = timezone.now()
    q1.save()
    client.force_login(root)
    # session, user, groups; the releases (selector) and v1; each side's versions, the source
    # ids, the changed versions' checks, the draft's scoring settings; the judges; then per
    # setting v1's board (questions, responses, model names, counts) and the draft's (the
    # same and its scoring settings).
    with django_assert_num_queries(27):
        response = client.get(reverse("release_diff"), {"a": "v1", "b": "draft"})
    assert response.status_code == 200
    body = response.content.decode()
    assert "From v1 to working draft" in body
    assert "Dropped: q1" in body
    assert "reworded from “check 1” to “a reworded check”" in body
    assert "0 added, 0 removed, 1 reworded, 0 moved to another tier" in body
    # model-a lost the valuable tier on q0: from 100 to 0.6/0.9 = 66.7 there
    assert "model-a" in body and "-33.3" in body
    bad = client.get(reverse("release_diff"), {"a": "nope", "b": "draft"})
    assert bad.status_code == 400 and "There is no release named nope." in bad.content.decode()


def test_the_api(root, judge, benchmark):
    api = _api(root)
    listed = api.get("/api/releases/").json()
    assert [r["name"] for r in listed] == ["v1"]
    assert listed[0]["questions"] == 2
    assert listed[0]["scoring"] == {"lambda": 0.5, "mu": -2.0, "weights": [0.6, 0.3, 0.1]}
    made = api.post("/api/releases/", {"name": "v2", "notes": "n"}, format="json")
    assert made.status_code == 201 and made.json()["created_by"] == "root"
    taken = api.post("/api/releases/", {"name": "v2"}, format="json")
    assert taken.status_code == 409 and taken.json()["field"] == "name"
    for body, field in (
        ({}, "name"),
        ({"name": "a/b"}, "name"),
        ({"name": "x" * 41}, "name"),
        ({"name": "diff"}, "name"),
        ({"name": "ok", "notes": "n" * 2001}, "notes"),
        ({"name": "ok\u0000"}, "name"),
    ):
        refused = api.post("/api/releases/", body, format="json")
        assert refused.status_code == 400, body
        assert refused.json()["field"] == field
    assert api.post("/api/releases/", ["v3"], format="json").status_code == 400
    detail = api.get("/api/releases/v2/").json()
    assert detail["name"] == "v2" and detail["content_hash"].startswith("sha256:")
    (board,) = [b for b in detail["boards"] if b["setting"] == "multimodal"]
    assert board["pending"] == 2 and board["estimate"] is None
    assert {r["model"] for r in board["rows"]} == {"model-a", "model-b"}
    assert api.get("/api/releases/nope/").status_code == 404
    assert api.get("/api/releases/v2/?setting=bad").status_code == 400
    diff = api.get("/api/releases/diff/", {"a": "v1", "b": "v2"}).json()
    assert diff["checks"] == {"added": 0, "removed": 0, "reworded": 1, "re_tiered": 0}
    assert diff["questions_changed"][0]["source_id"] == "q0"
    for query, field in (
        ({"b": "v1"}, "a"),
        ({"a": "v1", "b": "nope"}, "b"),
        ({"a": "v1", "b": "draft", "judge": "nobody"}, "judge"),
        ({"a": "v1", "b": "draft", "setting": "x"}, "setting"),
    ):
        refused = api.get("/api/releases/diff/", query)
        assert refused.status_code == 400 and refused.json()["field"] == field


def test_the_admin_reads_a_release_and_changes_nothing(client, benchmark):
    from django.contrib.auth.models import User

    boss = User.objects.create_superuser("boss", password="x")
    client.force_login(boss)
    release = Release.objects.get(name="v1")
    url = reverse("admin:judging_release_change", args=[release.pk])
    page = client.get(url)
    assert page.status_code == 200 and release.content_hash in page.content.decode()
    assert client.post(url, {"name": "v9", "notes": "x"}).status_code == 403
    assert client.get(reverse("admin:judging_release_add")).status_code == 403
    delete = reverse("admin:judging_release_delete", args=[release.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert Release.objects.get().name == "v1"


def test_the_cut_forms_fields_show_their_limits_and_refuse_in_words(client, root, benchmark):
    """Name and notes each carry their limit (the model's) as maxlength with the live counter
    right after the field; a longer text (a browser that ignores maxlength) is refused by the
    service in the page's words, naming the field, with what was typed kept."""
    client.force_login(root)
    body = client.get(reverse("releases")).content.decode()
    assert re.search(
        r'<input type="text" name="name" maxlength="40"[^>]*>'
        r'<small class="limit" data-limit="40"[^>]*>at most 40 characters</small>',
        body,
    )
    assert re.search(
        r'<textarea name="notes"[^>]*maxlength="2000"[^>]*>\s*</textarea>'
        r'<small class="limit" data-limit="2000"[^>]*>at most 2000 characters</small>',
        body,
    )
    response = client.post(reverse("release_cut"), {"name": "v" * 41, "notes": "keep me"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "The name is longer than 40 characters (41 sent): shorten it." in body
    assert 'value="' + "v" * 41 + '"' in body and "keep me" in body
    response = client.post(reverse("release_cut"), {"name": "v3", "notes": "n" * 2001})
    assert response.status_code == 400
    body = response.content.decode()
    assert "The notes are longer than 2,000 characters (2,001 sent): shorten them." in body
    assert 'value="v3"' in body and "n" * 2001 in body
    assert not Release.objects.filter(name__in=["v3", "v" * 41]).exists()
