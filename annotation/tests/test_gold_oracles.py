"""Gold items that cannot be told apart or harvested (issue 21, item 4): each oracle of the
issue probed as a scripted annotator would, and found closed. A gold item is answered only
when drawn for the person, its expert answer shown only after that answer, and every answer
an annotator gets before it is the one a real candidate gives."""

import re
import uuid

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from rest_framework.test import APIClient

from annotation.models import CandidateStatus, GoldReview, Review
from annotation.review import services
from annotation.tests.quality import GOLD_NOTE, make_gold, set_rates

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
NOTICE = re.compile(r'<span class="notice[^"]*" role="status"[^>]*>([^<]*)<')
ERROR = re.compile(r'data-testid="error" data-field="([^"]*)">([^<]*)<')


def _annotator(name: str) -> User:
    person = User.objects.create_user(name)
    person.groups.add(Group.objects.get_or_create(name="annotator")[0])
    return person


def _people(alice):
    page = Client()
    page.force_login(alice)
    api = APIClient()
    api.force_authenticate(alice)
    return page, api


def _said(response) -> tuple:
    """What a probe learns from the review page's answer: its status and the words shown."""
    html = response.content.decode()
    notice, error = NOTICE.search(html), ERROR.search(html)
    return (
        response.status_code,
        notice.group(1) if notice else None,
        error.groups() if error else None,
        GOLD_NOTE in html or "expert" in html.lower(),
    )


def _answered(response) -> tuple:
    return response.status_code, response.json()


@pytest.fixture
def world(make_image, root, alice):
    """alice has reviewed `done` with a form's key; `real` waits for review, `full` is open
    with both its slots held by two others, `gold` is a gold item never drawn for alice."""
    image, (done, real, full) = make_image(texts=["Done?", "Real?", "Full?"])
    gold = make_gold(root, image, text="Gold?", decision="discard")
    set_rates(gold_rate=0.0)
    for other in (_annotator("frank"), _annotator("gina")):
        assert services.review_claim(user=other, skip=[done.pk, real.pk]).candidate == full
    key = uuid.uuid4()
    services.review_submit(user=alice, candidate_id=done.pk, decision="accept", submission_key=key)
    return {"done": done, "real": real, "full": full, "gold": gold.candidate, "key": key}


def test_oracle_1_a_used_key_and_a_bad_decision_answer_alike(world, alice):
    """The issue's probe: a used key with decision=nonsense answered "belongs to another
    review" on a real candidate and "Choose a decision" on a gold item, on any id, before it
    was offered. Now the same answer, with the same status, on both."""
    page, api = _people(alice)
    probes = {
        "used key, bad decision": {"decision": "nonsense", "submission_key": world["key"]},
        "no key, bad decision": {"decision": "nonsense"},
        "no key, the question as its revision": {"decision": "revise", "revised_text": None},
    }
    for name, data in probes.items():
        for target in ("real", "full"):
            answers = {}
            for which in (target, "gold"):
                body = {k: str(v) for k, v in data.items()}
                if "revised_text" in body:
                    body["revised_text"] = world[which].text
                answers[which] = (
                    _said(page.post(f"/review/{world[which].pk}/", body, **HTMX)),
                    _answered(api.post(f"/api/candidates/{world[which].pk}/reviews/", body)),
                )
            assert answers["gold"] == answers[target], (name, target)
            assert answers["gold"][0][0] in (200, 400) and answers["gold"][1][0] in (400, 409)
    # a valid answer to a gold item not drawn: refused as a real candidate with no slot left
    answer = {"decision": "accept"}
    gold_page = _said(page.post(f"/review/{world['gold'].pk}/", answer, **HTMX))
    full_page = _said(page.post(f"/review/{world['full'].pk}/", answer, **HTMX))
    assert gold_page == full_page and gold_page[0] == 200 and not gold_page[3]
    gold_api = _answered(api.post(f"/api/candidates/{world['gold'].pk}/reviews/", answer))
    full_api = _answered(api.post(f"/api/candidates/{world['full'].pk}/reviews/", answer))
    assert gold_api == full_api and gold_api[0] == 409
    assert not GoldReview.objects.exists()
    assert Review.objects.filter(annotator=alice).count() == 1  # the first, unchanged


def test_oracle_2_an_images_status_counts_a_gold_item_as_a_candidate_in_review(
    make_image, root, alice, bob
):
    """The issue's probe: GET /api/images/<id>/ said needs_candidates while listing an open
    candidate (the gold one); a real open candidate would make it in_review."""
    with_gold, (settled,) = make_image("img-gold", ["Settled?"])
    gold = make_gold(root, with_gold, text="Gold?")
    with_real, (settled2, waiting) = make_image("img-real", ["Settled too?", "Waiting?"])
    for candidate in (settled, settled2):
        services.review_submit(user=alice, candidate_id=candidate.pk, decision="discard")
        services.review_submit(user=bob, candidate_id=candidate.pk, decision="discard")
    _, api = _people(alice)
    seen = {}
    for image, pending in ((with_gold, gold.candidate), (with_real, waiting)):
        body = api.get(f"/api/images/{image.source_id}/").json()
        detail = api.get(f"/api/candidates/{pending.pk}/").json()
        seen[image.source_id] = (body["status"], len(body["candidates"]), detail["status"])
    assert seen["img-gold"] == seen["img-real"] == ("in_review", 2, "open")
    admin = APIClient()
    admin.force_authenticate(root)  # admins see it as it is: generation still takes it
    assert admin.get("/api/images/img-gold/").json()["status"] == "needs_candidates"


def test_oracle_3_waiting_is_the_same_on_every_page_while_a_gold_item_is_held(
    make_image, root, alice
):
    """The issue's probe: "Waiting" on /review/ was one higher while a gold item was held than
    on the home page and /me/."""
    image, _ = make_image(texts=["Real one?", "Real two?"])
    gold = make_gold(root, image, text="Gold?")
    set_rates(gold_rate=1.0)
    page, _ = _people(alice)
    panel = page.post("/review/", **HTMX).content.decode()
    assert "Gold?" in panel  # held
    counts = {
        "review panel": re.search(r'data-testid="waiting">(\d+)<', panel).group(1),
        "review page": re.search(
            r'data-testid="waiting">(\d+)<', page.get("/review/").content.decode()
        ).group(1),
        "home": re.search(r'id="home-waiting">(\d+)<', page.get("/").content.decode()).group(1),
        "my work": re.search(
            r"<strong>(\d+)</strong> waiting for you", page.get("/me/").content.decode()
        ).group(1),
    }
    assert set(counts.values()) == {"3"}, counts  # two real ones and the one shown
    services.review_submit(user=alice, candidate_id=gold.candidate_id, decision="discard")
    assert re.search(r'id="home-waiting">(\d+)<', page.get("/").content.decode()).group(1) == "2"


def test_oracle_4_a_gold_item_is_answered_only_when_drawn_and_its_ids_tell_nothing(
    make_image, root, alice, bob
):
    """The issue's probes: POST /review/<gold id>/ answered without being drawn returned the
    expert's decision, reasons and note; over the API a gold answer's id came from a sequence
    of its own (1, 2, ...)."""
    image, (real, other) = make_image(texts=["Real?", "Other?"])
    gold = make_gold(root, image, text="Gold?", decision="discard", reasons=["leading"])
    page, api = _people(alice)
    set_rates(gold_rate=0.0)
    taken = page.post(f"/review/{gold.candidate_id}/", {"decision": "accept"}, **HTMX)
    assert "gold-feedback" not in taken.content.decode()  # no expert's answer handed out
    said = _said(taken)
    assert said[0] == 200 and said[1] == services.NO_SLOT and not said[3]
    plain = page.post(f"/review/{gold.candidate_id}/", {"decision": "accept"}, follow=True)
    assert GOLD_NOTE not in plain.content.decode()
    assert not GoldReview.objects.exists()

    # Drawn for a person, it is answered, and only then is the expert's answer shown (on the
    # page: bob's).
    set_rates(gold_rate=1.0)
    bob_page, bob_api = _people(bob)
    assert "Gold?" in bob_page.post("/review/", **HTMX).content.decode()  # drawn for bob
    shown = bob_page.post(f"/review/{gold.candidate_id}/", {"decision": "accept"}, **HTMX)
    assert GOLD_NOTE in shown.content.decode()

    # Over the API, the ids of a gold answer and of a review are of one kind, in no order.
    reviewed = api.post(f"/api/candidates/{real.pk}/reviews/", {"decision": "accept"})
    erin = _annotator("erin")
    _, erin_api = _people(erin)
    assert erin_api.post("/api/review/claim/").json()["id"] == gold.candidate_id
    answered = erin_api.post(
        f"/api/candidates/{gold.candidate_id}/reviews/", {"decision": "accept"}
    )
    assert reviewed.status_code == answered.status_code == 201
    ids = [reviewed.json()["id"], answered.json()["id"]]
    assert all(re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", i) for i in ids)
    assert set(answered.json()) == set(reviewed.json())
    rows = {str(Review.objects.get().pk), str(GoldReview.objects.get(annotator=erin).pk)}
    assert not rows & set(ids)
    gold.candidate.refresh_from_db()
    assert gold.candidate.status == CandidateStatus.GOLD
