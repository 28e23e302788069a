"""The API contract as scripts use it, the refusals for every role, and blind review."""

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from annotation.models import CandidateStatus, Review
from annotation.questions import services as question_services
from annotation.review import services
from annotation.review.api import review_public_id

pytestmark = pytest.mark.django_db


@pytest.fixture
def as_user():
    def client_for(user=None, token=False) -> APIClient:
        client = APIClient()
        if user is not None:
            if token:
                _, key = AuthToken.objects.create(user=user)
                client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
            else:
                client.force_authenticate(user)
        return client

    return client_for


def post_review(client, candidate, **body):
    return client.post(f"/api/candidates/{candidate.pk}/reviews/", body, format="json")


# --- claim ----------------------------------------------------------------------------------


def test_claim_returns_the_candidate_and_a_lease(as_user, alice, make_image):
    image, (c,) = make_image()
    response = as_user(alice, token=True).post("/api/review/claim/")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == c.pk and body["text"] == c.text and body["round"] == 1
    assert body["image"]["source_id"] == "img-1"
    assert body["image"]["entity"] == image.entity and body["image"]["domain"] == "food"
    assert body["image"]["url"].endswith("/images/img-1/photo")
    assert body["lease"]["seconds"] == 1800 and body["lease"]["expires_at"]


def test_claim_204_when_nothing_is_left(as_user, alice):
    assert as_user(alice).post("/api/review/claim/").status_code == 204


@pytest.mark.parametrize("who", ["carol", "mallory", "root"])
def test_claim_refused_to_non_annotators(as_user, request, who):
    response = as_user(request.getfixturevalue(who)).post("/api/review/claim/")
    assert response.status_code == 403


def test_anonymous_gets_nothing(as_user, make_image):
    _, (c,) = make_image()
    client = as_user()
    assert client.post("/api/review/claim/").status_code in (401, 403)
    assert client.get(f"/api/candidates/{c.pk}/").status_code in (401, 403)
    assert client.get("/api/images/img-1/").status_code in (401, 403)
    assert post_review(client, c, decision="accept").status_code in (401, 403)
    assert client.post("/api/adjudication/claim/").status_code in (401, 403)
    assert client.get("/api/schema/").status_code in (401, 403)


def test_bad_token_is_refused(make_image):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert client.post("/api/review/claim/").status_code == 401


# --- submit ---------------------------------------------------------------------------------


def test_submit_201(as_user, alice, make_image):
    _, (c,) = make_image()
    response = post_review(
        as_user(alice, token=True),
        c,
        decision="revise",
        revised_text="What dish is this, and how is it made?",
        reasons=["unnatural_wording"],
        comment="clearer",
        seconds=30,
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["decision"] == "revise" and body["annotator"] == "alice"
    review = Review.objects.get()
    assert review.seconds == 30 and body["id"] == review_public_id(review)


def test_submit_needs_no_claim(as_user, alice, bob, make_image):
    _, (c,) = make_image()
    services.review_claim(user=bob)
    assert post_review(as_user(alice), c, decision="accept").status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decision": "revise"}, "revised_text"),
        ({"decision": "accept", "revised_text": "Other text?"}, "revised_text"),
        ({"decision": "approve"}, "decision"),
        ({}, "decision"),
        ({"decision": "accept", "reasons": ["made_up"]}, "reasons"),
        ({"decision": "accept", "seconds": "abc"}, "seconds"),
    ],
)
def test_submit_400_names_the_field(as_user, alice, make_image, body, field):
    _, (c,) = make_image()
    response = post_review(as_user(alice), c, **body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert field in response.json()["detail"]


def test_submit_400_for_a_body_that_is_not_an_object(as_user, alice, make_image):
    _, (c,) = make_image()
    response = as_user(alice).post(f"/api/candidates/{c.pk}/reviews/", [1, 2], format="json")
    assert response.status_code == 400


@pytest.mark.parametrize("who", ["carol", "mallory", "root", "dave"])
def test_submit_403_for_non_annotators(as_user, request, make_image, who):
    _, (c,) = make_image()
    assert (
        post_review(as_user(request.getfixturevalue(who)), c, decision="accept").status_code == 403
    )
    assert not Review.objects.exists()


def test_submit_403_for_the_author(as_user, alice, make_image):
    _, (c,) = make_image()
    type(c).objects.filter(pk=c.pk).update(author=alice)
    assert post_review(as_user(alice), c, decision="accept").status_code == 403


def test_submit_409_twice_and_when_full(as_user, alice, bob, erin, make_image):
    _, (c,) = make_image()
    assert post_review(as_user(alice), c, decision="accept").status_code == 201
    assert post_review(as_user(alice), c, decision="accept").status_code == 409
    assert post_review(as_user(bob), c, decision="discard").status_code == 201
    assert post_review(as_user(erin), c, decision="accept").status_code == 409


def test_submit_404_for_unknown_candidate(as_user, alice):
    response = as_user(alice).post(
        "/api/candidates/4242/reviews/", {"decision": "accept"}, format="json"
    )
    assert response.status_code == 404


# --- blindness ------------------------------------------------------------------------------


def test_annotator_sees_only_own_review_until_resolved(as_user, alice, bob, erin, make_image):
    _, (c,) = make_image()
    post_review(as_user(alice), c, decision="accept", comment="alice's secret")
    body = as_user(bob).get(f"/api/candidates/{c.pk}/").json()
    assert body["reviews"] == [] and body["status"] == "open"
    assert "secret" not in str(body)
    own = as_user(alice).get(f"/api/candidates/{c.pk}/").json()
    assert [r["annotator"] for r in own["reviews"]] == ["alice"]
    post_review(as_user(bob), c, decision="discard")
    # Disputed is not resolved: still blind, for both and for a third annotator.
    for person in (alice, bob, erin):
        reviews = as_user(person).get(f"/api/candidates/{c.pk}/").json()["reviews"]
        assert {r["annotator"] for r in reviews} <= {person.username}


def test_everyone_sees_both_reviews_once_resolved(as_user, alice, bob, erin, make_image):
    _, (c,) = make_image()
    post_review(as_user(alice), c, decision="accept")
    post_review(as_user(bob), c, decision="accept")
    body = as_user(erin).get(f"/api/candidates/{c.pk}/").json()
    assert body["status"] == "accepted"
    assert sorted(r["annotator"] for r in body["reviews"]) == ["alice", "bob"]


def test_adjudicator_sees_disputed_reviews_admin_sees_all(
    as_user, alice, bob, carol, root, make_image
):
    _, (c, other) = make_image(texts=["A?", "B?"])
    post_review(as_user(alice), c, decision="accept")
    post_review(as_user(alice), other, decision="accept")
    # Open: the adjudicator sees nothing, the admin sees everything.
    assert as_user(carol).get(f"/api/candidates/{other.pk}/").json()["reviews"] == []
    assert len(as_user(root).get(f"/api/candidates/{other.pk}/").json()["reviews"]) == 1
    post_review(as_user(bob), c, decision="discard")
    assert len(as_user(carol).get(f"/api/candidates/{c.pk}/").json()["reviews"]) == 2


def test_member_without_role_cannot_read_candidates(as_user, mallory, make_image):
    _, (c,) = make_image()
    assert as_user(mallory).get(f"/api/candidates/{c.pk}/").status_code == 403
    assert as_user(mallory).get("/api/images/img-1/").status_code == 403


def test_candidate_detail_links_parent_and_children(as_user, alice, bob, make_image):
    _, (c,) = make_image(texts=["What is this?"])
    text = "What is this dish and where is it from?"
    post_review(as_user(alice), c, decision="revise", revised_text=text)
    post_review(as_user(bob), c, decision="revise", revised_text=text)
    body = as_user(alice).get(f"/api/candidates/{c.pk}/").json()
    assert body["status"] == "revised" and len(body["children"]) == 1
    child = as_user(alice).get(f"/api/candidates/{body['children'][0]}/").json()
    assert child["parent"] == c.pk and child["round"] == 2 and child["text"] == text


# --- adjudication ---------------------------------------------------------------------------


@pytest.fixture
def disputed(as_user, alice, bob, make_image):
    _, (c,) = make_image(texts=["What is this?"])
    post_review(as_user(alice), c, decision="discard")
    post_review(as_user(bob), c, decision="revise", revised_text="What dish is this?")
    return c


def test_adjudication_claim_returns_both_reviews(as_user, carol, disputed):
    response = as_user(carol).post("/api/adjudication/claim/")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == disputed.pk
    assert sorted(r["decision"] for r in body["reviews"]) == ["discard", "revise"]


def test_adjudication_claim_204_and_403(as_user, alice, carol):
    assert as_user(carol).post("/api/adjudication/claim/").status_code == 204
    assert as_user(alice).post("/api/adjudication/claim/").status_code == 403


def test_adjudication_contract(as_user, alice, carol, disputed, make_image):
    url = f"/api/candidates/{disputed.pk}/adjudication/"
    carol_client = as_user(carol)
    assert carol_client.post(url, {"decision": "accept"}, format="json").status_code == 400
    assert carol_client.post(url, {"decision": "revise"}, format="json").status_code == 400
    assert as_user(alice).post(url, {"decision": "discard"}, format="json").status_code == 403
    response = carol_client.post(
        url, {"decision": "revise", "revised_text": "What dish is this?"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["candidate_status"] == "revised"
    assert response.json()["new_candidate"]
    assert carol_client.post(url, {"decision": "discard"}, format="json").status_code == 409
    _, (open_one,) = make_image("img-2")
    assert (
        carol_client.post(
            f"/api/candidates/{open_one.pk}/adjudication/", {"decision": "discard"}, format="json"
        ).status_code
        == 409
    )


def test_adjudicator_who_reviewed_gets_403(as_user, alice, bob, make_image):
    from django.contrib.auth.models import Group

    alice.groups.add(Group.objects.get(name="adjudicator"))
    _, (c,) = make_image()
    post_review(as_user(alice), c, decision="accept")
    post_review(as_user(bob), c, decision="discard")
    response = as_user(alice).post(
        f"/api/candidates/{c.pk}/adjudication/", {"decision": "accept"}, format="json"
    )
    assert response.status_code == 403


# --- images ---------------------------------------------------------------------------------


def test_image_detail(as_user, alice, bob, root, make_image):
    _, (c1, c2) = make_image(texts=["A?", "B?"])
    client = as_user(alice)
    body = client.get("/api/images/img-1/").json()
    assert body == {
        "source_id": "img-1",
        "entity": "Beef bourguignon",
        "domain": "food",
        "popularity": "head",
        "status": "in_review",
        "candidates": [c1.pk, c2.pk],
        "question": None,
    }
    for c in (c1, c2):
        post_review(as_user(alice), c, decision="discard")
        post_review(as_user(bob), c, decision="discard")
    assert client.get("/api/images/img-1/").json()["status"] == "needs_candidates"
    assert client.get("/api/images/nope/").status_code == 404


def test_image_question_after_promotion(as_user, alice, bob, root, make_image):
    _, (c,) = make_image()
    post_review(as_user(alice), c, decision="accept")
    post_review(as_user(bob), c, decision="accept")
    c.refresh_from_db()
    assert c.status == CandidateStatus.ACCEPTED
    question_services.final_question_promote(user=root, candidate_id=c.pk)
    body = as_user(alice).get("/api/images/img-1/").json()
    assert body["status"] == "has_question" and body["question"] == c.text


def test_schema_and_docs(as_user, alice):
    client = as_user(alice)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    text = schema.content.decode()
    for path in (
        "/api/review/claim/",
        "/api/candidates/{candidate_id}/reviews/",
        "/api/adjudication/claim/",
        "/api/images/{source_id}/",
    ):
        assert path in text


def test_docs_page_is_self_hosted(client, alice):
    client.force_login(alice)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "swagger-ui" in body and "cdn" not in body.lower()
    assert "<script>" not in body  # the initialiser is a separate file: the CSP holds
