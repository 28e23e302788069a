"""Training and audits over the API: who may call each endpoint, the same refusals as the pages
(own work 403, a second verdict 409, no note 400, bad ids 404, bad bodies 400 and never 500),
answers that match the schema, and the GETs' query counts."""

import io
import json

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import GoldItem, ReviewAudit, RoundAudit, TrainingState
from annotation.review import services
from annotation.review.api import review_public_id
from annotation.tests.quality import draw, make_gold, set_rates
from annotation.training import audits
from tests.schema_match import response_mismatches

pytestmark = pytest.mark.django_db

ME = "/api/training/me/"
LIST = "/api/training/"
GOLD = "/api/gold/import/"
REVIEWS = "/api/audits/reviews/"
ROUNDS = "/api/audits/rounds/"


@pytest.fixture
def schema(root):
    response = api(root).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def matches(schema, path: str, method: str, response) -> None:
    assert response_mismatches(schema, path, method, response) == [], (path, response.json())


def resolved(make_image, first, second, n):
    for i in range(n):
        _, (candidate,) = make_image(f"img-{i}", [f"Q {i}?"])
        services.review_submit(user=first, candidate_id=candidate.pk, decision="accept")
        services.review_submit(user=second, candidate_id=candidate.pk, decision="accept")


def reviser(name: str) -> User:
    person = User.objects.create_user(name)
    person.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    return person


def completed_round(dave, source_id="q-1"):
    """A human round dave completed on top of an LLM version: one check reworded, one added."""
    from rubrics.models import Rubric, RubricCheck, RubricVersion
    from rubrics.tests.conftest import make_question

    rubric = Rubric.objects.create(question=make_question(source_id))
    parent = RubricVersion.objects.create(rubric=rubric, stage="llm_refined_1", meta_rubric={})
    version = RubricVersion.objects.create(
        rubric=rubric,
        stage="human_1",
        parent=parent,
        meta_rubric={},
        made_by=dave,
        frozen_at=timezone.now(),
    )
    for v, position, check_id, text in (
        (parent, 1, "C1", "Names the dish."),
        (version, 1, "C1", "Names the dish as bourguignon."),
        (version, 2, "H1", "Says it is stewed in red wine."),
    ):
        RubricCheck.objects.create(
            version=v,
            position=position,
            check_id=check_id,
            kind="fact",
            tier="answer_critical",
            text=text,
        )
    return version


# --- who may call what ------------------------------------------------------------------------


def test_each_endpoint_is_for_its_role_alone(alice, carol, dave, root, mallory):
    calls = [
        ("get", ME, {alice}),
        ("get", LIST, {root}),
        ("post", f"/api/training/{alice.pk}/", {root}),
        ("post", GOLD, {root}),
        ("get", REVIEWS, {carol}),
        ("post", REVIEWS, {carol}),
        ("post", f"{REVIEWS}1/", {carol}),
        ("get", ROUNDS, {dave}),
        ("post", ROUNDS, {dave}),
        ("post", f"{ROUNDS}1/", {dave}),
    ]
    for method, path, allowed in calls:
        assert getattr(api(), method)(path).status_code == 401, path
        for person in {alice, carol, dave, root, mallory} - allowed:
            response = getattr(api(person), method)(path)
            assert response.status_code == 403, (path, person.username, response.status_code)
            assert response.json()["detail"]
        for person in allowed:
            assert getattr(api(person), method)(path).status_code != 403, (path, person.username)


# --- training ---------------------------------------------------------------------------------


def test_an_annotator_reads_their_own_standing(
    schema, make_image, root, alice, bob, django_assert_num_queries
):
    image, _ = make_image()
    set_rates(training_pass_share=1.0)
    first = make_gold(root, image, text="G1?", training=True, decision="discard")
    make_gold(root, image, text="G2?", training=True, decision="accept")
    before = api(alice).get(ME)
    assert before.json() == {
        "standing": "not_started",
        "attempt": 1,
        "total": 2,
        "answered": 0,
        "agreed": 0,
        "share": None,
        "threshold": 1.0,
        "required": True,
        "blocked": False,
    }
    draw(alice, first)
    services.review_submit(user=alice, candidate_id=first.candidate_id, decision="accept")
    # config, state, items, answers (the roles were read once, by the call above)
    with django_assert_num_queries(4):
        response = api(alice).get(ME)
    body = response.json()
    assert body["standing"] == "in_training" and (body["answered"], body["agreed"]) == (1, 0)
    assert body["share"] == 0.0 and body["required"] and not body["blocked"]
    matches(schema, ME, "get", response)
    # bob's answers are not alice's
    assert api(bob).get(ME).json()["answered"] == 0


def test_a_failed_trainee_reads_blocked_and_a_reset_opens_a_new_attempt(make_image, root, alice):
    image, _ = make_image()
    set_rates(training_pass_share=1.0)
    item = make_gold(root, image, training=True, decision="discard")
    draw(alice, item)
    services.review_submit(user=alice, candidate_id=item.candidate_id, decision="accept")
    body = api(alice).get(ME).json()
    assert body["standing"] == "failed" and body["blocked"] and body["required"]
    reset = api(root).post(f"/api/training/{alice.pk}/", {"action": "reset"}, format="json")
    assert reset.status_code == 200 and reset.json()["attempt"] == 2
    body = api(alice).get(ME).json()
    assert (body["standing"], body["attempt"], body["answered"]) == ("not_started", 2, 0)
    assert not body["blocked"]


def test_without_a_training_set_nothing_is_required(alice):
    body = api(alice).get(ME).json()
    assert body["total"] == 0 and not body["required"] and body["standing"] == "not_started"


def test_an_admin_lists_resets_and_lets_through(
    schema, make_image, root, alice, bob, carol, django_assert_num_queries
):
    image, _ = make_image()
    set_rates(training_pass_share=0.5)
    item = make_gold(root, image, training=True, decision="discard")
    make_gold(root, image, text="Not training?")
    draw(alice, item)
    services.review_submit(user=alice, candidate_id=item.candidate_id, decision="discard")
    api(root).get(LIST)
    with django_assert_num_queries(5):  # config, items, annotators, states, answers
        response = api(root).get(LIST)
    matches(schema, LIST, "get", response)
    body = response.json()
    assert body["items"] == {"active": 2, "training": 1}
    assert body["config"]["training_pass_share"] == 0.5 and body["config"]["gold_rate"] == 0.1
    rows = {row["username"]: row for row in body["annotators"]}
    assert set(rows) == {"alice", "bob"}  # carol adjudicates: no training
    assert rows["alice"]["standing"] == "passed" and rows["alice"]["share"] == 1.0
    assert rows["bob"]["standing"] == "not_started" and rows["bob"]["share"] is None
    assert rows["alice"]["id"] == alice.pk

    path = "/api/training/{user_id}/"
    reset = api(root).post(f"/api/training/{alice.pk}/", {"action": "reset"}, format="json")
    matches(schema, path, "post", reset)
    assert reset.json()["standing"] == "not_started" and reset.json()["attempt"] == 2
    assert TrainingState.objects.get(user=alice).attempt == 2
    through = api(root).post(f"/api/training/{bob.pk}/", {"action": "pass"}, format="json")
    assert through.status_code == 200 and through.json()["standing"] == "passed"
    again = api(root).post(f"/api/training/{bob.pk}/", {"action": "pass"}, format="json")
    assert again.status_code == 409 and "passed the training already" in again.json()["detail"]
    matches(schema, path, "post", again)
    for user_id in (carol.pk, 999999):  # carol is no annotator; nobody has that id
        missing = api(root).post(f"/api/training/{user_id}/", {"action": "pass"}, format="json")
        assert missing.status_code == 404, user_id
        matches(schema, path, "post", missing)
    for body in ({"action": "promote"}, {}, {"action": ["reset"]}, {"action": None}):
        bad = api(root).post(f"/api/training/{bob.pk}/", body, format="json")
        assert bad.status_code == 400 and bad.json()["field"] == "action", body
        matches(schema, path, "post", bad)


def _file(data: bytes, name="gold.jsonl"):
    upload = io.BytesIO(data)
    upload.name = name
    return upload


def test_an_admin_imports_gold_items_with_line_numbered_refusals(
    schema, make_image, root, settings
):
    make_image("img-1")
    good = b'{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n'
    bad = good + b'{"image": "nope", "text": "Q2?", "decision": "accept", "note": "n"}\nnot json\n'
    refused = api(root).post(GOLD, {"gold": _file(bad)}, format="multipart")
    assert refused.status_code == 400
    body = refused.json()
    assert body["errors"] == [
        "line 2: there is no image 'nope'",
        "line 3: not JSON (Expecting value)",
    ]
    assert body["more"] == 0 and body["field"] == "gold"
    matches(schema, GOLD, "post", refused)
    assert not GoldItem.objects.exists()
    for upload in (_file(b"\xff\xfe"), _file(b"\n\n")):
        assert api(root).post(GOLD, {"gold": upload}, format="multipart").status_code == 400
    missing = api(root).post(GOLD, {}, format="multipart")
    assert missing.status_code == 400 and missing.json()["field"] == "gold"
    made = api(root).post(
        GOLD,
        {"gold": _file(good.replace(b'"n"}', b'"n", "training": true}'))},
        format="multipart",
    )
    assert made.status_code == 201
    matches(schema, GOLD, "post", made)
    item = GoldItem.objects.get()
    assert made.json() == {
        "imported": 1,
        "items": [{"id": item.pk, "candidate": item.candidate_id, "training": True}],
    }
    settings.IMPORT_MAX_MANIFEST_BYTES = 10
    too_big = api(root).post(GOLD, {"gold": _file(good)}, format="multipart")
    assert too_big.status_code == 413 and "IMPORT_MAX_MANIFEST_BYTES" in too_big.json()["detail"]
    matches(schema, GOLD, "post", too_big)


# --- audits of reviews ------------------------------------------------------------------------


def test_an_adjudicator_lists_the_drawn_reviews_and_gives_verdicts(
    schema, make_image, alice, bob, carol, django_assert_num_queries
):
    resolved(make_image, alice, bob, 4)
    set_rates(review_audit_rate=0.5)
    assert api(carol).get(REVIEWS).json() == {"waiting": 0, "audits": []}  # GET draws nothing
    first = api(carol).post(REVIEWS)  # draws 2 of alice's and 2 of bob's
    matches(schema, REVIEWS, "post", first)
    assert first.status_code == 200 and ReviewAudit.objects.count() == 4
    # the audits, their candidates' reviews, the count (a GET draws nothing: the draw's config,
    # counts and savepoint were 5 more before)
    with django_assert_num_queries(3):
        response = api(carol).get(REVIEWS)
    matches(schema, REVIEWS, "get", response)
    body = response.json()
    assert body["waiting"] == 4 and len(body["audits"]) == 4
    audit = ReviewAudit.objects.select_related("review__candidate").order_by("id").first()
    shown = body["audits"][0]
    assert shown["id"] == audit.pk
    assert shown["review"]["id"] == review_public_id(audit.review)
    assert shown["review"]["annotator"] == audit.annotator.username
    assert shown["candidate"]["text"] == audit.review.candidate.text
    assert shown["candidate"]["outcome"] == "accepted" and not shown["candidate"]["adjudicated"]
    assert shown["candidate"]["image"]["url"].endswith("/photo")
    assert shown["others"] == ["accept"]

    path = "/api/audits/reviews/{audit_id}/"
    url = f"{REVIEWS}{audit.pk}/"
    no_note = api(carol).post(url, {"verdict": "overturn"}, format="json")
    assert no_note.status_code == 400 and no_note.json()["field"] == "note"
    matches(schema, path, "post", no_note)
    done = api(carol).post(url, {"verdict": "overturn", "note": "Boilerplate."}, format="json")
    assert done.status_code == 200
    matches(schema, path, "post", done)
    assert done.json()["verdict"] == "overturn" and done.json()["auditor"] == "carol"
    assert done.json()["review"] == audit.review_id
    audit.refresh_from_db()
    assert (audit.verdict, audit.note, audit.auditor) == ("overturn", "Boilerplate.", carol)
    twice = api(carol).post(url, {"verdict": "agree"}, format="json")
    assert twice.status_code == 409 and "audited already" in twice.json()["detail"]
    matches(schema, path, "post", twice)
    assert api(carol).get(REVIEWS).json()["waiting"] == 3
    missing = api(carol).post(f"{REVIEWS}999999/", {"verdict": "agree"}, format="json")
    assert missing.status_code == 404
    matches(schema, path, "post", missing)


def test_nobody_audits_their_own_review_over_the_api(make_image, alice, bob, carol):
    resolved(make_image, alice, bob, 2)
    audits.review_audits_draw(rate=1.0)
    alice.groups.add(Group.objects.get(name="adjudicator"))
    assert api(alice).get(REVIEWS).json() == {"waiting": 0, "audits": []}
    for audit in ReviewAudit.objects.all():  # hers, and bob's beside hers
        refused = api(alice).post(f"{REVIEWS}{audit.pk}/", {"verdict": "agree"}, format="json")
        assert refused.status_code == 403 and "own work" in refused.json()["detail"]
        audit.refresh_from_db()
        assert audit.verdict == ""


def test_bad_verdict_bodies_answer_400_and_write_nothing(make_image, alice, bob, carol):
    resolved(make_image, alice, bob, 1)
    audits.review_audits_draw(rate=1.0)
    url = f"{REVIEWS}{ReviewAudit.objects.first().pk}/"
    for body, field in (
        ({}, "verdict"),
        ({"verdict": "accept"}, "verdict"),  # a round's verdict, not a review's
        ({"verdict": ["agree"]}, "verdict"),
        ({"verdict": "agree", "note": ["x"]}, "note"),
        ({"verdict": "agree", "note": "x" * (audits.MAX_NOTE + 1)}, "note"),
        ({"verdict": "overturn", "note": "   "}, "note"),
        ({"verdict": "agree", "note": "bad\x00byte"}, "note"),
    ):
        response = api(carol).post(url, body, format="json")
        assert response.status_code == 400, (body, response.status_code)
        assert response.json()["field"] == field, body
    not_json = api(carol).post(url, "verdict=agree", content_type="text/plain")
    assert not_json.status_code == 415
    assert not ReviewAudit.objects.exclude(verdict="").exists()


# --- audits of rubric rounds ------------------------------------------------------------------


def test_a_second_reviser_lists_the_drawn_rounds_and_flags_one(
    client, schema, dave, django_assert_num_queries
):
    version = completed_round(dave)
    completed_round(dave, "q-2")
    olga = reviser("olga")
    set_rates(round_audit_rate=1.0)
    assert api(dave).get(ROUNDS).json() == {"waiting": 0, "audits": []}  # his own rounds
    api(olga).post(ROUNDS)  # draws
    # the audits, the checks of the rounds and of their parents, the count (a GET draws
    # nothing)
    with django_assert_num_queries(4):
        response = api(olga).get(ROUNDS)
    matches(schema, ROUNDS, "get", response)
    body = response.json()
    assert body["waiting"] == 2
    assert [a["id"] for a in body["audits"]] == sorted(a["id"] for a in body["audits"])
    (shown,) = [a for a in body["audits"] if a["id"] == version.audit.pk]
    assert shown["version"]["made_by"] == "dave" and shown["version"]["stage"] == "human_1"
    assert shown["question"]["source_id"] == "q-1"
    assert [c["check_id"] for c in shown["checks"]] == ["C1", "H1"]
    assert shown["diff"]["parent_stage"] == "llm_refined_1"
    assert shown["diff"]["changed"] == [
        {"check_id": "C1", "before": "Names the dish.", "after": "Names the dish as bourguignon."}
    ]
    assert [c["check_id"] for c in shown["diff"]["added"]] == ["H1"]
    assert shown["diff"]["removed"] == [] and shown["diff"]["retiered"] == []

    path = "/api/audits/rounds/{audit_id}/"
    url = f"{ROUNDS}{version.audit.pk}/"
    own = api(dave).post(url, {"verdict": "accept"}, format="json")
    assert own.status_code == 403 and "your own round" in own.json()["detail"]
    matches(schema, path, "post", own)
    no_note = api(olga).post(url, {"verdict": "flag"}, format="json")
    assert no_note.status_code == 400 and no_note.json()["field"] == "note"
    wrong = api(olga).post(url, {"verdict": "agree"}, format="json")
    assert wrong.status_code == 400 and wrong.json()["field"] == "verdict"
    flagged = api(olga).post(url, {"verdict": "flag", "note": "H1 is vague."}, format="json")
    assert flagged.status_code == 200
    matches(schema, path, "post", flagged)
    assert flagged.json()["version"] == version.pk and flagged.json()["auditor"] == "olga"
    assert RoundAudit.objects.get(pk=version.audit.pk).note == "H1 is vague."
    twice = api(olga).post(url, {"verdict": "accept"}, format="json")
    assert twice.status_code == 409
    matches(schema, path, "post", twice)
    missing = api(olga).post(f"{ROUNDS}999999/", {"verdict": "accept"}, format="json")
    assert missing.status_code == 404
    # the flag is in the rubric's history, as when given on the page
    client.force_login(olga)
    history = client.get(f"/rubrics/{version.rubric_id}/").content.decode()
    assert 'data-testid="round-audit-flag"' in history and "H1 is vague." in history


def test_every_training_and_audit_operation_is_in_the_schema_with_its_refusals(schema):
    expected = {
        ("/api/training/me/", "get"): {"200", "403"},
        ("/api/training/", "get"): {"200", "403"},
        ("/api/training/{user_id}/", "post"): {"200", "400", "403", "404", "409"},
        ("/api/gold/import/", "post"): {"201", "400", "403", "413"},
        ("/api/audits/reviews/", "get"): {"200", "403"},
        ("/api/audits/reviews/", "post"): {"200", "403"},
        ("/api/audits/reviews/{audit_id}/", "post"): {"200", "400", "403", "404", "409"},
        ("/api/audits/rounds/", "get"): {"200", "403"},
        ("/api/audits/rounds/", "post"): {"200", "403"},
        ("/api/audits/rounds/{audit_id}/", "post"): {"200", "400", "403", "404", "409"},
    }
    for (path, method), codes in expected.items():
        assert codes <= set(schema["paths"][path][method]["responses"]), (path, method)


def test_the_demo_leaves_reviews_for_carol_to_audit(schema, capsys):
    from django.core.management import call_command

    call_command("load_demo")
    assert "demo review(s) drawn for audit" in capsys.readouterr().out
    carol = User.objects.get(username="carol")
    response = api(carol).post(REVIEWS)
    matches(schema, REVIEWS, "post", response)
    drawn = response.json()["waiting"]
    assert drawn == ReviewAudit.objects.count() > 0
    call_command("load_demo")
    assert ReviewAudit.objects.count() == drawn  # drawn once


def test_hostile_strings_in_every_field_answer_below_500(make_image, root, alice, bob, carol, dave):
    from tests.test_hostile_input import HOSTILE

    resolved(make_image, alice, bob, 1)
    audits.review_audits_draw(rate=1.0)
    review_url = f"{REVIEWS}{ReviewAudit.objects.get(annotator=alice).pk}/"
    round_url = (
        f"{ROUNDS}{RoundAudit.objects.create(version=completed_round(dave), reviser=dave).pk}/"
    )
    olga = reviser("olga")
    for text in [*HOSTILE, "\ud800", "a\udfffb"]:
        for person, url, body in (
            (root, f"/api/training/{alice.pk}/", {"action": text}),
            (carol, review_url, {"verdict": text}),
            (carol, review_url, {"verdict": "overturn", "note": text}),
            (olga, round_url, {"verdict": text}),
            (olga, round_url, {"verdict": "flag", "note": text}),
        ):
            raw = json.dumps(body)  # a lone surrogate goes as its JSON escape
            response = api(person).post(url, raw, content_type="application/json")
            assert response.status_code in (200, 400, 409), (url, body, response.status_code)
            if response.status_code == 400:
                assert response.json()["field"] in body, (url, body)
