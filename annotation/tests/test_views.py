"""The pages: who may open them, what they show, the htmx flow, query counts.

Logins and their limit: test_login.py."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from annotation.models import Candidate, FinalQuestion, Review
from annotation.questions import services as question_services
from annotation.review import services

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}


def login(client, user):
    client.force_login(user)
    return client


# --- access ---------------------------------------------------------------------------------

PAGES = {
    "review": {"alice"},
    "adjudicate": {"carol"},
    "pipeline": {"root"},
    "agreement": {"root"},
    "import": {"root"},
}


@pytest.mark.parametrize("page", sorted(PAGES))
def test_pages_refuse_the_wrong_roles(client, page, alice, carol, root, mallory, dave):
    url = reverse(page)
    assert client.get(url).status_code == 302  # anonymous: to the login page
    for person in (alice, carol, root, mallory, dave):
        login(client, person)
        expected = 200 if person.username in PAGES[page] else 403
        assert client.get(url).status_code == expected, (page, person.username)


def test_photo_needs_a_role(client, make_image, alice, mallory):
    make_image()
    url = reverse("image_file", args=["img-1"])
    assert client.get(url).status_code == 302
    login(client, mallory)
    assert client.get(url).status_code == 403
    login(client, alice)
    response = client.get(url)
    assert response.status_code == 200
    assert b"".join(response.streaming_content).startswith(b"\x89PNG")


def test_image_history_page_is_for_admins(client, make_image, alice, root):
    make_image()
    login(client, alice)
    assert client.get(reverse("image", args=["img-1"])).status_code == 403
    login(client, root)
    assert client.get(reverse("image", args=["img-1"])).status_code == 200


def test_home_says_what_is_waiting(client, make_image, alice, bob, carol, dave, mallory, root):
    make_image(texts=["A?", "B?", "C?"])
    login(client, alice)
    body = client.get("/").content.decode()
    assert '<strong id="home-waiting">3</strong> candidate questions waiting' in body
    login(client, carol)
    assert "disputed candidates waiting for you" in client.get("/").content.decode()
    login(client, dave)
    assert "0</strong> rubrics waiting for a human round" in client.get("/").content.decode()
    login(client, mallory)
    assert "no role in this project" in client.get("/").content.decode()
    login(client, root)
    assert "3 candidates" in client.get("/").content.decode()


# --- the annotator's flow -------------------------------------------------------------------


def test_review_page_shows_claimed_candidate_with_guidance(client, make_image, alice):
    _, (c,) = make_image()
    login(client, alice)
    body = client.post(reverse("review"), follow=True).content.decode()
    assert c.text in body and "Beef bourguignon" in body
    assert "stranger test" in body.lower()
    assert f'hx-post="/review/{c.pk}/"' in body


def test_htmx_submission_returns_the_next_candidate_panel(client, make_image, alice):
    _, (c1, c2) = make_image(texts=["First question?", "Second question?"])
    login(client, alice)
    client.get(reverse("review"))
    response = client.post(
        reverse("review_submit", args=[c1.pk]),
        {"decision": "accept", "reasons": ["boilerplate"], "seconds": "12"},
        **HTMX,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in body  # the partial only
    assert "Second question?" in body and "Review saved." in body
    review = Review.objects.get(candidate=c1)
    assert (review.decision, review.reasons, review.seconds) == ("accept", ["boilerplate"], 12)


def test_htmx_error_keeps_what_was_typed(client, make_image, alice):
    _, (c,) = make_image()
    login(client, alice)
    response = client.post(
        reverse("review_submit", args=[c.pk]),
        {"decision": "revise", "revised_text": "", "comment": "keep me"},
        **HTMX,
    )
    body = response.content.decode()
    assert "The revised question is empty: write it, or choose another decision." in body
    assert 'value="keep me"' in body
    assert not Review.objects.exists()


def test_plain_post_redirects(client, make_image, alice):
    _, (c,) = make_image()
    login(client, alice)
    response = client.post(reverse("review_submit", args=[c.pk]), {"decision": "discard"})
    assert response.status_code == 302 and response.url == reverse("review")


def test_review_page_never_shows_the_other_review(client, make_image, alice, bob):
    _, (c,) = make_image()
    services.review_submit(
        user=alice,
        candidate_id=c.pk,
        decision="revise",
        revised_text="Alice's secret wording?",
        comment="alice-comment",
    )
    login(client, bob)
    body = client.post(reverse("review"), follow=True).content.decode()
    assert c.text in body
    assert "secret" not in body and "alice-comment" not in body and "alice" not in body.lower()


def test_csrf_is_enforced(make_image, alice):
    _, (c,) = make_image()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    response = strict.post(reverse("review_submit", args=[c.pk]), {"decision": "accept"}, **HTMX)
    assert response.status_code == 403
    page = strict.get(reverse("review")).content.decode()
    assert 'hx-headers=\'{"X-CSRFToken": "' in page
    token = page.split('"X-CSRFToken": "')[1].split('"')[0]
    response = strict.post(
        reverse("review_submit", args=[c.pk]),
        {"decision": "accept"},
        HTTP_X_CSRFTOKEN=token,
        **HTMX,
    )
    assert response.status_code == 200
    assert Review.objects.filter(candidate=c).exists()


def test_content_security_policy_forbids_inline_scripts(client, alice):
    login(client, alice)
    policy = client.get(reverse("review"))["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy


# --- adjudicator ----------------------------------------------------------------------------


@pytest.fixture
def disputed(alice, bob, make_image):
    _, (c,) = make_image(texts=["What is this?"])
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(
        user=bob,
        candidate_id=c.pk,
        decision="revise",
        revised_text="What dish is this, and how is it cooked?",
        reasons=["not_research_intensive"],
        comment="too thin",
    )
    return c


def test_adjudication_page_shows_both_reviews_and_a_diff(client, carol, disputed):
    login(client, carol)
    body = client.post(reverse("adjudicate"), follow=True).content.decode()
    assert "alice" in body and "bob" in body
    assert "<ins>dish is this, and how is it cooked?</ins>" in body or "<ins>" in body
    assert "Not research-intensive" in body and "too thin" in body
    assert 'value="accept"' in body  # one annotator accepted


def test_adjudication_offers_accept_only_when_an_annotator_accepted(
    client, alice, bob, carol, make_image
):
    _, (c,) = make_image()
    services.review_submit(user=alice, candidate_id=c.pk, decision="discard")
    services.review_submit(
        user=bob, candidate_id=c.pk, decision="revise", revised_text="Another question?"
    )
    login(client, carol)
    body = client.post(reverse("adjudicate"), follow=True).content.decode()
    assert 'value="accept"' not in body and 'value="discard"' in body


def test_htmx_adjudication(client, carol, disputed):
    login(client, carol)
    client.post(reverse("adjudicate"))
    response = client.post(
        reverse("adjudicate_submit", args=[disputed.pk]),
        {"decision": "accept", "seconds": "5"},
        **HTMX,
    )
    assert response.status_code == 200 and "Decision saved." in response.content.decode()
    disputed.refresh_from_db()
    assert disputed.status == "accepted"


# --- admin ----------------------------------------------------------------------------------


def test_pipeline_counts_and_promotion(client, root, alice, bob, make_image):
    _, (c, other) = make_image(texts=["A?", "B?"])
    make_image("img-2", [])
    for cand in (c,):
        services.review_submit(user=alice, candidate_id=cand.pk, decision="accept")
        services.review_submit(user=bob, candidate_id=cand.pk, decision="accept")
    login(client, root)
    body = client.get(reverse("pipeline")).content.decode()
    body = re.sub(r"<a [^>]*>|</a>", "", body)  # the counts link to the images list
    assert '<tr data-state="needs_candidates"><th>Needs candidates</th><td>1</td>' in body
    # img-1 has an accepted candidate and an open one: the guard can take it now, so the images
    # card and the guard's wait say the same 1 (issue 24: they said 0 and 1).
    assert '<tr data-state="in_review"><th>In review</th><td>0</td>' in body
    assert '<tr data-state="awaiting_guard"><th>Awaiting the guard</th><td>1</td>' in body
    assert re.search(r'<tr data-wait="guard"><th>[^<]*</th><td class="num">1</td>', body)
    assert '<tr data-state="accepted"><th>Accepted</th><td>1</td>' in body
    assert '<tr data-state="open"><th>Open</th><td>1</td>' in body
    response = client.post(reverse("candidate_promote", args=[c.pk]))
    assert response.status_code == 302
    assert FinalQuestion.objects.get().candidate == c
    response = client.post(reverse("candidate_promote", args=[other.pk]), follow=True)
    assert "Only an accepted candidate" in response.content.decode()


def test_promotion_refused_to_non_admins(client, alice, bob, make_image):
    _, (c,) = make_image()
    login(client, alice)
    assert client.post(reverse("candidate_promote", args=[c.pk])).status_code == 403


def test_agreement_page(client, root, alice, bob, erin, carol, make_image):
    _, cands = make_image(texts=["A?", "B?", "C?"])
    for cand, (d1, d2) in zip(
        cands, [("accept", "accept"), ("discard", "accept"), ("discard", "discard")], strict=True
    ):
        services.review_submit(user=alice, candidate_id=cand.pk, decision=d1, seconds=10)
        services.review_submit(user=bob, candidate_id=cand.pk, decision=d2, seconds=20)
    services.adjudication_resolve(user=carol, candidate_id=cands[1].pk, decision="discard")
    login(client, root)
    body = client.get(reverse("agreement")).content.decode()
    assert "alice + bob" in body
    assert "1 of 1 (100%)" in body  # bob overturned once
    assert "0 of 1 (0%)" in body  # alice upheld


# --- query counts: constant whatever the data -------------------------------------------------


def _fill(make_image, alice, bob, n_images: int):
    for i in range(n_images):
        _, cands = make_image(f"q-{i}", [f"Question {i}a?", f"Question {i}b?", f"Q {i}c?"])
        services.review_submit(user=alice, candidate_id=cands[0].pk, decision="accept")
        services.review_submit(user=bob, candidate_id=cands[0].pk, decision="discard")
        services.review_submit(user=alice, candidate_id=cands[1].pk, decision="accept")
        services.review_submit(user=bob, candidate_id=cands[1].pk, decision="accept")


@pytest.mark.parametrize("n_images", [1, 8])
def test_review_pages_query_counts(
    client, alice, bob, erin, carol, root, make_image, django_assert_max_num_queries, n_images
):
    _fill(make_image, alice, bob, n_images)
    login(client, erin)
    with django_assert_max_num_queries(18):
        assert client.get(reverse("review")).status_code == 200
    cand = Candidate.objects.filter(status="open").first()
    with django_assert_max_num_queries(30):
        client.post(reverse("review_submit", args=[cand.pk]), {"decision": "accept"}, **HTMX)
    login(client, carol)
    with django_assert_max_num_queries(18):
        assert client.get(reverse("adjudicate")).status_code == 200
    login(client, root)
    with django_assert_max_num_queries(10):
        assert client.get(reverse("pipeline")).status_code == 200
    with django_assert_max_num_queries(10):
        assert client.get(reverse("agreement")).status_code == 200
    with django_assert_max_num_queries(10):
        assert client.get("/").status_code == 200


def test_form_without_javascript_sends_the_box_and_still_works(client, make_image, alice):
    """Without JavaScript the prefilled revision box is always posted; only revise reads it."""
    _, (c1, c2) = make_image(texts=["First question?", "Second question?"])
    login(client, alice)
    client.post(
        reverse("review_submit", args=[c1.pk]),
        {"decision": "accept", "revised_text": "First question?"},
    )
    client.post(
        reverse("review_submit", args=[c2.pk]),
        {"decision": "revise", "revised_text": "A better second question?"},
    )
    assert list(Review.objects.order_by("id").values_list("decision", "revised_text")) == [
        ("accept", ""),
        ("revise", "A better second question?"),
    ]


def test_admin_corrects_drops_and_restores_a_question(client, root, alice, bob, make_image):
    _, (c,) = make_image()
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(user=bob, candidate_id=c.pk, decision="accept")
    question = question_services.final_question_promote(user=root, candidate_id=c.pk)
    url = reverse("question_correct", args=[question.pk])
    login(client, alice)
    assert client.post(url, {"field": "drop", "reason": "x"}).status_code == 403
    login(client, root)
    client.post(url, {"field": "entity", "value": "Boeuf bourguignon", "reason": "typo"})
    response = client.post(url, {"field": "drop", "reason": ""}, follow=True)
    assert "Give a reason: it is kept in the history." in response.content.decode()
    client.post(url, {"field": "drop", "reason": "no sound rubric"})
    question.refresh_from_db()
    assert question.dropped_at is not None and question.image.entity == "Boeuf bourguignon"
    page = client.get(reverse("image", args=["img-1"])).content.decode()
    assert "Restore the question" in page and "no sound rubric" in page
    assert "<del>Beef bourguignon</del> → Boeuf bourguignon" in page
    client.post(url, {"field": "restore", "reason": "rubric found"})
    question.refresh_from_db()
    assert question.dropped_at is None
    assert list(question.corrections.values_list("field", flat=True)) == [
        "entity",
        "drop",
        "restore",
    ]
