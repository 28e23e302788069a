"""Blind review (issue 21, item 3; ../shared/spec/review-workflow.md, stage 1 step 2): until a
candidate is resolved, an annotator learns only that their own review is in, whatever page,
partial, message, status code, button or API answer they look at."""

import json
import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import CandidateStatus, Review
from annotation.review import services

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}

# What differs between two drawings of the same page: one-time tokens and the clock.
VOLATILE = [
    (r'name="csrfmiddlewaretoken" value="[^"]+"', ""),
    (r'"X-CSRFToken": "[^"]+"', ""),
    (r'name="submission_key" value="[^"]+"', ""),
    (r'data-shown-at="\d+"', ""),
    (r'data-lease-left="\d+"', ""),
    # a review taken back and written again is a new row, at a new minute maybe
    (r'my-review-\d+"', 'my-review-ID"'),
    (r'name="review_id" value="\d+"', ""),
    (r"<td>\d\d:\d\d</td>", ""),
]


def _annotator(name: str) -> User:
    person = User.objects.create_user(name, password=f"{name}-pass")
    person.groups.add(Group.objects.get_or_create(name="annotator")[0])
    return person


def _shape(response) -> tuple[int, str]:
    """A response as an annotator reads it: its status and its body, tokens and times out."""
    if response.get("Content-Type", "").startswith("application/json"):
        body = response.json() if response.content else None
        if isinstance(body, dict) and "lease" in body:
            body = {**body, "lease": None}
        text = json.dumps(body, sort_keys=True)
        # her review, taken back and written again: a new id and time, the same review
        text = re.sub(r'"(created_at|id)": "[^"]+"', "", text)
        return response.status_code, text
    text = response.content.decode()
    for pattern, by in VOLATILE:
        text = re.sub(pattern, by, text)
    return response.status_code, text


def _everything_alice_gets(page: Client, api: APIClient, alice, candidate, image) -> dict:
    """Every page, partial, refusal and API answer an annotator can get that bears on the
    candidate she reviewed (the ones that change something leave it as it was)."""
    seen = {
        "home": page.get("/"),
        "the review page": page.get("/review/"),
        "the review panel (a claim)": page.post("/review/", **HTMX),
        "her reviews of today": page.get("/review/mine/"),
        "my work": page.get("/me/"),
        "a second review, on the page": page.post(
            f"/review/{candidate.pk}/", {"decision": "discard"}, **HTMX
        ),
        "a second review, without JavaScript": page.post(
            f"/review/{candidate.pk}/", {"decision": "discard"}, follow=True
        ),
        "skip": page.post(f"/review/{candidate.pk}/skip/", **HTMX),
        "the candidate over the API": api.get(f"/api/candidates/{candidate.pk}/"),
        "the image over the API": api.get(f"/api/images/{image.source_id}/"),
        "a second review over the API": api.post(
            f"/api/candidates/{candidate.pk}/reviews/", {"decision": "discard"}, format="json"
        ),
        "a claim over the API": api.post("/api/review/claim/"),
        "her training over the API": api.get("/api/training/me/"),
    }
    # Undo, from the page's button and from the list: the review is taken back and written
    # again as it was (at its time, which orders her queue), so that all stands as before.
    written = Review.objects.get(candidate=candidate, annotator=alice).created_at
    seen["undo (u)"] = page.post("/review/undo/", **HTMX)
    services.review_submit(user=alice, candidate_id=candidate.pk, now=written, **ACCEPT)
    mine = Review.objects.get(candidate=candidate, annotator=alice)
    seen["Change, from her list"] = page.post("/review/undo/", {"review_id": mine.pk}, follow=True)
    services.review_submit(user=alice, candidate_id=candidate.pk, now=written, **ACCEPT)
    return {what: _shape(response) for what, response in seen.items()}


ACCEPT = {"decision": "accept", "comment": "fine as it is"}


def test_an_annotator_learns_only_that_her_own_review_is_in(make_image, alice, bob, carol):
    image, (one, two) = make_image(texts=["One?", "Two?"])
    _, (full,) = make_image("img-full", ["Full?"])
    erin, frank, gina = (_annotator(name) for name in ("erin", "frank", "gina"))
    page = Client()
    page.force_login(alice)
    api = APIClient()
    api.force_authenticate(alice)

    services.review_submit(user=alice, candidate_id=one.pk, **ACCEPT)
    assert services.review_claim(user=alice).candidate == two  # she holds the next one
    before = _everything_alice_gets(page, api, alice, one, image)

    services.review_submit(user=bob, candidate_id=one.pk, decision="discard")
    one.refresh_from_db()
    assert one.status == CandidateStatus.DISPUTED  # the case itself: carol has it to settle
    assert services.adjudication_claim(user=carol).candidate == one
    after = _everything_alice_gets(page, api, alice, one, image)
    one.refresh_from_db()
    assert one.status == CandidateStatus.DISPUTED  # her undo and review again: as it stood

    for what, (status, body) in after.items():
        assert "disput" not in body.lower(), what
        assert (status, body) == before[what], what  # nothing tells bob's review is in
    assert 'id="undo-form"' in after["the review page"][1]  # Undo stays
    assert ">Change</button>" in after["her reviews of today"][1]  # and Change

    # bob, the second reviewer, sees his review as in review as well, with his Undo.
    bob_page = Client()
    bob_page.force_login(bob)
    bob_api = APIClient()
    bob_api.force_authenticate(bob)
    for response in (
        bob_page.get("/review/"),
        bob_page.get("/review/mine/"),
        bob_page.get("/me/"),
        bob_page.get("/"),
        bob_api.get(f"/api/candidates/{one.pk}/"),
    ):
        assert "disput" not in response.content.decode().lower()
    assert 'id="undo-form"' in bob_page.get("/review/").content.decode()
    detail = bob_api.get(f"/api/candidates/{one.pk}/").json()
    assert detail["status"] == "open" and [r["annotator"] for r in detail["reviews"]] == ["bob"]

    # A third annotator is refused in the same words, with the same status, as for an open
    # candidate whose two slots others hold.
    for other in (frank, gina):
        assert services.review_claim(user=other, skip=[two.pk]).candidate == full
    erin_page = Client()
    erin_page.force_login(erin)
    erin_api = APIClient()
    erin_api.force_authenticate(erin)
    refusals = {}
    for candidate in (one, full):
        on_page = erin_page.post(f"/review/{candidate.pk}/", {"decision": "accept"}, **HTMX)
        notice = re.search(
            r'<span class="notice[^"]*" role="status"[^>]*>([^<]*)<', on_page.content.decode()
        )
        by_api = erin_api.post(
            f"/api/candidates/{candidate.pk}/reviews/", {"decision": "accept"}, format="json"
        )
        shown = erin_api.get(f"/api/candidates/{candidate.pk}/").json()
        refusals[candidate.text] = (
            on_page.status_code,
            notice.group(1),
            by_api.status_code,
            by_api.json(),
            (shown["status"], shown["reviews"]),
        )
    assert refusals["One?"] == refusals["Full?"]
    assert "disput" not in json.dumps(refusals).lower()
    assert refusals["One?"][2] == 409 and refusals["One?"][4] == ("open", [])

    # Once resolved, it may be known: her list says how.
    services.adjudication_resolve(user=carol, candidate_id=one.pk, decision="accept")
    assert "resolved: accepted" in page.get("/review/mine/").content.decode()


def test_undo_of_a_disputed_review_puts_the_candidate_back_in_review(make_image, alice, bob):
    """What makes the Undo button safe to keep: taking a review back from a disputed candidate
    reopens it (out of the adjudicators' queue), and the review written again decides anew, in
    the free slot."""
    _, (c,) = make_image()
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=c.pk, decision="discard")
    services.review_undo(user=alice)
    c.refresh_from_db()
    assert c.status == CandidateStatus.OPEN and c.reviews.get().annotator == bob
    assert services.review_claim(user=alice).candidate == c  # hers again, first
    services.review_submit(user=alice, candidate_id=c.pk, decision="discard")
    c.refresh_from_db()
    assert c.status == CandidateStatus.DISCARDED
    assert sorted(c.reviews.values_list("slot", flat=True)) == [1, 2]
    statuses = [e.data["to"] for e in c.events.filter(action="candidate.status")]
    assert statuses == ["disputed", "open", "discarded"]
