"""Smaller holes of issue 9: an adjudicator's claim is enforced at submit, the status of a
candidate stays blind until it is resolved, the photo URLs of the API open with the API's
token."""

import pytest
from django.contrib.auth.models import Group, User
from knox.models import AuthToken
from rest_framework.test import APIClient

from annotation.models import Adjudication, CandidateStatus
from annotation.review import services
from conftest import png_bytes

pytestmark = pytest.mark.django_db


def api(user=None, token=False) -> APIClient:
    client = APIClient()
    if user is not None and token:
        _, key = AuthToken.objects.create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    elif user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def frank(db):
    """A second adjudicator."""
    user = User.objects.create_user("frank", password="frank-pass")
    user.groups.add(Group.objects.get_or_create(name="adjudicator")[0])
    return user


@pytest.fixture
def disputed(make_image, alice, bob):
    _, (candidate,) = make_image()
    services.review_submit(user=alice, candidate_id=candidate.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=candidate.pk, decision="discard")
    candidate.refresh_from_db()
    assert candidate.status == CandidateStatus.DISPUTED
    return candidate


def test_another_adjudicator_cannot_settle_a_candidate_carol_holds(disputed, carol, frank):
    assert api(carol).post("/api/adjudication/claim/").json()["id"] == disputed.pk
    body = {"decision": "discard"}
    url = f"/api/candidates/{disputed.pk}/adjudication/"
    refused = api(frank).post(url, body, format="json")
    assert refused.status_code == 409
    assert refused.json() == {
        "detail": "Another adjudicator holds this candidate; it is theirs to settle."
    }
    assert not Adjudication.objects.exists()
    assert api(carol).post(url, body, format="json").status_code == 201


def test_a_lapsed_claim_does_not_block_another_adjudicator(disputed, carol, frank, settings):
    from datetime import timedelta

    from django.utils import timezone

    services.adjudication_claim(user=carol, now=timezone.now() - timedelta(hours=2))
    services.adjudication_resolve(user=frank, candidate_id=disputed.pk, decision="discard")
    assert Adjudication.objects.get().adjudicator == frank


def test_an_annotator_sees_no_dispute_until_it_is_resolved(disputed, alice, bob, carol, root):
    url = f"/api/candidates/{disputed.pk}/"
    for annotator in (alice, bob):
        body = api(annotator).get(url).json()
        assert body["status"] == "open"
        assert [r["annotator"] for r in body["reviews"]] == [annotator.username]
    assert api(carol).get(url).json()["status"] == "disputed"
    assert api(root).get(url).json()["status"] == "disputed"
    services.adjudication_resolve(user=carol, candidate_id=disputed.pk, decision="discard")
    body = api(alice).get(url).json()
    assert body["status"] == "discarded" and len(body["reviews"]) == 2


def test_the_photo_url_of_the_api_opens_with_the_api_token(make_image, alice, mallory):
    make_image()
    claimed = api(alice, token=True).post("/api/review/claim/").json()
    url = claimed["image"]["url"]
    photo = api(alice, token=True).get(url)
    assert photo.status_code == 200
    assert b"".join(photo.streaming_content) == png_bytes()
    assert api(mallory, token=True).get(url).status_code == 403
    wrong = APIClient()
    wrong.credentials(HTTP_AUTHORIZATION="Token not-a-key")
    answer = wrong.get(url)
    assert answer.status_code == 401 and answer["WWW-Authenticate"] == "Token"
    assert api().get(url).status_code == 302  # no credentials: the login page, as before
