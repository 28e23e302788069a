"""What a person did is what is recorded (issue 21, item 5): a form's submission key replays
only the same answer; another answer under it is a conflict that says what is recorded and
offers to change it (a notice on the page, 409 over the API); pages holding a form for live
work are never kept in the browser's cache. The browser's own sequence (Back, Forward, another
decision on the old page): tests/test_browser_resubmission.py."""

import re
import uuid

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotation.models import Review
from annotation.review import services
from annotation.tests.quality import make_gold, set_rates

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def _key(html: str) -> str:
    return html.split('name="submission_key" value="')[1].split('"')[0]


def test_the_same_form_with_another_decision_is_a_conflict_not_a_replay(make_image, alice):
    _, (c,) = make_image(texts=["One?"])
    key = uuid.uuid4()
    first = services.review_submit(
        user=alice, candidate_id=c.pk, decision="discard", reasons=["leading"], submission_key=key
    )
    again = services.review_submit(
        user=alice, candidate_id=c.pk, decision="discard", reasons=["leading"], submission_key=key
    )
    assert again.pk == first.pk and again.repeated  # the same answer: replayed
    for changed in (
        {"decision": "accept"},
        {"decision": "discard", "reasons": []},
        {"decision": "discard", "reasons": ["leading"], "comment": "and boilerplate"},
        {"decision": "revise", "revised_text": "One, really?", "reasons": ["leading"]},
    ):
        with pytest.raises(services.SubmissionConflict) as info:
            services.review_submit(user=alice, candidate_id=c.pk, submission_key=key, **changed)
        assert info.value.status == 409 and info.value.field == "submission_key"
        assert info.value.recorded.pk == first.pk and info.value.changeable
        assert "your answer to “One?” is Discard" in info.value.message
        assert "To change it" in info.value.message
    assert list(Review.objects.values_list("decision", flat=True)) == ["discard"]


def test_the_page_says_what_is_recorded_and_offers_to_change_it(client, make_image, alice):
    _, (c1, c2) = make_image(texts=["One?", "Two?"])
    client.force_login(alice)
    key = _key(client.post(reverse("review"), **HTMX).content.decode())
    client.post(
        reverse("review_submit", args=[c1.pk]),
        {"decision": "discard", "submission_key": key},
        **HTMX,
    )
    # The old page's form again (a page brought back from a cache), with accept this time.
    answer = client.post(
        reverse("review_submit", args=[c1.pk]),
        {"decision": "accept", "submission_key": key},
        **HTMX,
    )
    html = answer.content.decode()
    assert answer.status_code == 200 and "Review saved." not in html
    notice = re.search(r'<span class="notice[^"]*" role="status"[^>]*>([^<]*)<', html).group(1)
    assert "your answer to “One?” is Discard" in notice and "was not recorded" in notice
    recorded = Review.objects.get(candidate=c1)
    assert recorded.decision == "discard"
    assert f'name="review_id" value="{recorded.pk}"' in html and "change-recorded" in html
    # Without JavaScript: the message, and the list of today's reviews, where Change is.
    response = client.post(
        reverse("review_submit", args=[c2.pk]), {"decision": "discard", "submission_key": key}
    )
    assert response.status_code == 302 and response.url == reverse("review_mine")
    page = client.get(response.url).content.decode()
    assert "was not recorded" in page and not Review.objects.filter(candidate=c2).exists()
    # Change: taken back, the candidate shown again with what was recorded, to decide anew.
    changed = client.post(reverse("review_undo"), {"review_id": recorded.pk}, **HTMX)
    html = changed.content.decode()
    assert 'data-testid="question">One?<' in html and 'value="discard" data-key="d" checked' in html
    client.post(reverse("review_submit", args=[c1.pk]), {"decision": "accept"}, **HTMX)
    assert Review.objects.get(candidate=c1).decision == "accept"


def test_a_resolved_review_is_said_and_not_offered_for_change(client, make_image, alice, bob):
    _, (c,) = make_image(texts=["One?"])
    key = uuid.uuid4()
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept", submission_key=key)
    services.review_submit(user=bob, candidate_id=c.pk, decision="accept")
    client.force_login(alice)
    html = client.post(
        reverse("review_submit", args=[c.pk]),
        {"decision": "discard", "submission_key": str(key)},
        **HTMX,
    ).content.decode()
    assert "It can no longer be changed." in html and "change-recorded" not in html


def test_over_the_api_a_key_replays_the_same_answer_and_refuses_another(make_image, alice):
    _, (c,) = make_image(texts=["One?"])
    api = APIClient()
    api.force_authenticate(alice)
    url = f"/api/candidates/{c.pk}/reviews/"
    key = str(uuid.uuid4())
    first = api.post(url, {"decision": "discard", "submission_key": key}, format="json")
    again = api.post(url, {"decision": "discard", "submission_key": key}, format="json")
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    other = api.post(url, {"decision": "accept", "submission_key": key}, format="json")
    assert other.status_code == 409 and other.json()["field"] == "submission_key"
    assert "is Discard" in other.json()["detail"]
    assert Review.objects.get().decision == "discard"
    bad = api.post(url, {"decision": "accept", "submission_key": "x"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "submission_key"


def test_a_gold_answer_sent_again_replays_only_the_same(client, make_image, root, alice):
    image, _ = make_image(texts=["Real?"])
    item = make_gold(root, image, text="Gold?", decision="discard")
    set_rates(gold_rate=1.0)
    client.force_login(alice)
    key = _key(client.post(reverse("review"), **HTMX).content.decode())
    data = {"decision": "accept", "submission_key": key}
    for _ in range(2):
        html = client.post(reverse("review_submit", args=[item.candidate_id]), data, **HTMX)
        assert 'data-testid="gold-feedback"' in html.content.decode()
    data["decision"] = "discard"
    html = client.post(reverse("review_submit", args=[item.candidate_id]), data, **HTMX)
    assert "your answer to “Gold?” is Accept" in html.content.decode()
    assert item.gold_reviews.get().decision == "accept"


PAGES = {
    "review": "alice",
    "review_mine": "alice",
    "entities": "alice",
    "adjudicate": "carol",
    "audit": "carol",
    "round_audit": "dave",
    "spot_checks": "dave",
}


# Not "page": pytest-playwright's fixture of that name would make this a browser test.
@pytest.mark.parametrize("address", sorted(PAGES))
def test_pages_of_live_work_are_never_kept_in_the_browsers_cache(
    client, address, alice, carol, dave
):
    client.force_login({"alice": alice, "carol": carol, "dave": dave}[PAGES[address]])
    response = client.get(reverse(address))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
