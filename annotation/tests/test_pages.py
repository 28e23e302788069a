"""Pages a person can find and read: error pages with the menu and a way on, the menu that
marks where one is, the images list, and history and labels in words on every page."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.urls import reverse

from annotation.labels import describe_event, words
from annotation.models import AuditEvent
from annotation.questions import services as question_services
from annotation.review import services

HTMX = {"HTTP_HX_REQUEST": "true"}


def login(client, user):
    client.force_login(user)
    return client


def menu(body: str) -> list[str]:
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', body, re.S).group(1)
    return re.findall(r">([^<]+)</a>", nav)


def current(body: str) -> list[str]:
    nav = re.search(r'<nav aria-label="Main">(.*?)</nav>', body, re.S).group(1)
    return re.findall(r'aria-current="page">([^<]+)</a>', nav)


# --- error pages ----------------------------------------------------------------------------


def test_get_on_a_post_only_address_explains_itself(client, alice, make_image):
    _, (c,) = make_image()
    response = login(client, alice).get(reverse("review_submit", args=[c.pk]))
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    body = response.content.decode()
    assert "This address is not a page to visit" in body
    assert "receives what a page's form sends" in body
    assert 'href="/review/"' in body  # the way on: the review page above it
    assert menu(body) == ["Review", "My work"]


def test_the_apis_405_and_htmxs_stay_as_they_were(client, alice, make_image):
    _, (c,) = make_image()
    login(client, alice)
    api = client.get(reverse("api_review_create", args=[c.pk]))
    assert api.status_code == 405 and api["Content-Type"] == "application/json"
    bare = client.get(reverse("review_submit", args=[c.pk]), **HTMX)
    assert bare.status_code == 405 and bare.content == b""


def test_403_says_the_views_own_message_with_the_menu(client, alice):
    response = login(client, alice).get(reverse("pipeline"))
    assert response.status_code == 403
    body = response.content.decode()
    assert '<p data-testid="error-message">This page is for admins.</p>' in body
    assert menu(body) == ["Review", "My work"]
    assert "Your home page" in body


def test_404_names_the_address_and_the_page_above(client, root):
    response = login(client, root).get("/images/no-such-image/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "There is nothing at this address" in body
    assert "<code>/images/no-such-image/</code>" in body
    assert 'href="/images/">Go up to /images/</a>' in body
    # POST-only, no such version, and the page is for rubric revisers: refused either way.
    deep = client.get("/rubrics/versions/999999/checks/1/text/")
    assert deep.status_code in (403, 404, 405)
    nowhere = client.get("/no/such/place/")
    assert nowhere.status_code == 404
    assert 'href="/">Your home page</a>' in nowhere.content.decode()


def test_404_under_debug_is_the_sites_own_page(client, root, settings):
    """`make run` runs with DEBUG on: a mistyped address (or a view's own 404) still shows the
    site's not-found page, not Django's debug page listing every address."""
    settings.DEBUG = True
    login(client, root)
    nowhere = client.get("/no/such/place/")
    assert nowhere.status_code == 404
    body = nowhere.content.decode()
    assert "There is nothing at this address" in body
    assert "URLconf" not in body and "DEBUG = True" not in body
    raised = client.get("/images/no-such-image/")  # the view's get_object_or_404
    assert raised.status_code == 404
    assert "There is nothing at this address" in raised.content.decode()
    assert "DEBUG = True" not in raised.content.decode()
    api = client.get("/api/no/such/thing/")
    assert api.status_code == 404 and api.json() == {"detail": "Not found."}
    # A missing slash is still added by the redirect before anything is refused.
    assert client.get("/images").status_code == 301


def test_500_is_a_page_without_the_database(client, root, monkeypatch):
    def broken():
        raise RuntimeError("the report failed")

    monkeypatch.setattr("annotation.analysis.views.agreement_report", broken)
    client.raise_request_exception = False
    response = login(client, root).get(reverse("agreement"))
    assert response.status_code == 500
    body = response.content.decode()
    assert "Something went wrong on our side" in body
    assert "the report failed" not in body  # nothing of the server's internals
    assert 'aria-label="Main"' not in body  # no menu: it would read the database


# --- the menu -------------------------------------------------------------------------------


def test_the_menu_marks_the_current_page(client, root):
    login(client, root)
    assert current(client.get(reverse("pipeline")).content.decode()) == ["Pipeline"]
    assert current(client.get(reverse("images")).content.decode()) == ["Images"]
    assert current(client.get(reverse("results_judges")).content.decode()) == ["Leaderboard"]
    assert current(client.get(reverse("home")).content.decode()) == []


def test_admins_get_review_and_rubrics_where_they_hold_those_roles(client, root):
    login(client, root)
    before = menu(client.get(reverse("home")).content.decode())
    assert "Review" not in before and "Rubrics" not in before and "Images" in before
    for name in ("annotator", "rubric_reviser"):
        root.groups.add(Group.objects.get_or_create(name=name)[0])
    client.force_login(User.objects.get(pk=root.pk))
    after = menu(client.get(reverse("home")).content.decode())
    assert after[:5] == ["Review", "My work", "Rubrics", "Audit rounds", "Spot checks"]
    assert client.get(reverse("review")).status_code == 200
    assert client.get(reverse("rubrics_queue")).status_code == 200


# --- the images list ------------------------------------------------------------------------


@pytest.fixture
def images(make_image, alice, bob, root):
    """Four images, one in each state."""
    needs, _ = make_image("cat-001", [], entity="Tabby cat", domain="animals", popularity="head")
    review, _ = make_image(
        "coffee-002",
        ["What is the foam pattern called?"],
        entity="Cappuccino",
        domain="food",
        popularity="torso",
    )
    guard, (accepted,) = make_image(
        "rocket-003",
        ["Which rocket is this?"],
        entity="Falcon 9",
        domain="vehicles",
        popularity="tail",
    )
    question, (promoted,) = make_image(
        "coins-004",
        ["Which city minted these coins?"],
        entity="Greek coins",
        domain="objects",
        popularity="tail",
    )
    for candidate in (accepted, promoted):
        services.review_submit(user=alice, candidate_id=candidate.pk, decision="accept")
        services.review_submit(user=bob, candidate_id=candidate.pk, decision="accept")
    question_services.final_question_promote(user=root, candidate_id=promoted.pk)
    return needs, review, guard, question


def listed(response) -> list[str]:
    assert response.status_code == 200, response.content
    return re.findall(r'<tr data-source-id="([^"]+)">', response.content.decode())


def test_images_list_search_and_filters(client, root, images):
    login(client, root)
    url = reverse("images")
    assert listed(client.get(url)) == ["cat-001", "coffee-002", "coins-004", "rocket-003"]
    assert listed(client.get(url, {"q": "COFFEE"})) == ["coffee-002"]  # source id
    assert listed(client.get(url, {"q": "falcon"})) == ["rocket-003"]  # entity
    assert listed(client.get(url, {"q": "foam pattern"})) == ["coffee-002"]  # a candidate
    assert listed(client.get(url, {"q": "minted"})) == ["coins-004"]  # the question
    assert listed(client.get(url, {"domain": "vehicles"})) == ["rocket-003"]
    assert listed(client.get(url, {"popularity": "tail"})) == ["coins-004", "rocket-003"]
    assert listed(client.get(url, {"state": "needs_candidates"})) == ["cat-001"]
    assert listed(client.get(url, {"state": "in_review"})) == ["coffee-002"]
    assert listed(client.get(url, {"state": "awaiting_guard"})) == ["rocket-003"]
    assert listed(client.get(url, {"state": "has_question"})) == ["coins-004"]
    assert listed(client.get(url, {"candidates": "open"})) == ["coffee-002"]
    assert listed(client.get(url, {"popularity": "tail", "state": "has_question"})) == ["coins-004"]
    body = client.get(url, {"state": "awaiting_guard"}).content.decode()
    assert '<a href="/images/rocket-003/">rocket-003</a>' in body
    assert "<td>Awaiting the guard</td>" in body


def test_images_list_refuses_a_bad_filter_by_name(client, root, images):
    response = login(client, root).get(reverse("images"), {"state": "lost", "popularity": "x"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "popularity: &#x27;x&#x27; is not one of head, torso, tail, unknown." in body
    assert "state: &#x27;lost&#x27; is not one of needs_candidates" in body


def test_images_list_pages_keep_the_filters(client, root, make_image, settings, monkeypatch):
    monkeypatch.setattr("annotation.images.views.IMAGES_PER_PAGE", 2)
    for n in range(5):
        make_image(f"img-{n}", [], domain="food")
    body = login(client, root).get(reverse("images"), {"domain": "food", "page": 2}).content
    assert re.findall(rb'data-source-id="([^"]+)"', body) == [b"img-2", b"img-3"]
    assert b'href="?domain=food&amp;page=3">Next' in body
    assert b"Page 2 of 3" in body


@pytest.mark.parametrize("n_images", [1, 30])
def test_images_list_query_count_is_constant(
    client, root, make_image, n_images, django_assert_num_queries
):
    for n in range(n_images):
        make_image(f"img-{n}", ["A question?"])
    login(client, root)
    # session, user, their groups; the page's count, its rows and the domains
    with django_assert_num_queries(6):
        assert (
            client.get(reverse("images"), {"q": "question", "state": "in_review"}).status_code
            == 200
        )


def test_images_list_is_for_admins(client, alice, mallory):
    for person in (alice, mallory):
        assert login(client, person).get(reverse("images")).status_code == 403
    client.logout()
    assert client.get(reverse("images")).status_code == 302


def test_pipeline_counts_link_to_the_filtered_lists(client, root, images):
    body = login(client, root).get(reverse("pipeline")).content.decode()
    assert (
        '<tr data-state="awaiting_guard"><th><a href="/images/?state=awaiting_guard">'
        'Awaiting the guard</a></th><td><a href="/images/?state=awaiting_guard">1</a>' in body
    )
    assert 'href="/images/?candidates=accepted"' in body
    assert '<a href="/images/?state=has_question">1</a>' in body


# --- history and labels in words --------------------------------------------------------------


def test_image_history_in_words(client, root, alice, bob, make_image):
    image, (c,) = make_image("img-1", ["What is this?"])
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(
        user=bob,
        candidate_id=c.pk,
        decision="discard",
        reasons=["not_research_intensive", "too_long"],
    )
    body = login(client, root).get(reverse("image", args=["img-1"])).content.decode()
    assert "{&#x27;" not in body and "{'" not in body
    assert "not_research_intensive" not in body
    assert f"Candidate {c.pk}: open → disputed (accept against discard)" in body
    assert (
        'bob: discard <span class="small">(Not research-intensive; Too long or several '
        "questions)</span>" in body
    )
    assert "<td>Disputed</td>" in body


def test_every_event_reads_as_a_sentence(alice):
    samples = [
        AuditEvent(
            action="candidate.status",
            candidate_id=4,
            data={"from": "open", "to": "accepted", "reason": "two acceptances"},
        ),
        AuditEvent(
            action="images.import",
            data={"imported": 3, "skipped": ["a"], "file": "m.jsonl", "source": "web"},
        ),
        AuditEvent(
            action="question.correct.entity",
            data={"old": "Latte", "new": "Cappuccino", "reason": "typo"},
        ),
        AuditEvent(
            action="guard.verdict", candidate_id=7, data={"selected": True, "reason": "clear"}
        ),
        AuditEvent(action="llm.generate", data={"job": 2, "result": {"candidates": [1, 2]}}),
        AuditEvent(action="audit.review.agree", candidate_id=5, data={"review": 9, "note": ""}),
        AuditEvent(
            action="audit.review.overturn", candidate_id=5, data={"review": 9, "note": "vague"}
        ),
        AuditEvent(action="review.undo", candidate_id=6, data={"decision": "accept"}),
        AuditEvent(action="training.failed", data={"agreed": 1, "of": 4}),
    ]
    assert [describe_event(e) for e in samples] == [
        "Candidate 4: open → accepted (two acceptances)",
        "Imported 3 image(s) from m.jsonl (web); 1 already there, skipped",
        "Ground-truth entity corrected from “Latte” to “Cappuccino”: typo",
        "Guard on candidate 7: selected (clear)",
        "Generation (job 2) wrote 2 candidate(s)",
        "Audit: agreed with review 9 of candidate 5",
        "Audit: overturned review 9 of candidate 5: vague",
        "Review of candidate 6 taken back (the decision was accept)",
        "Training failed: 1 of 4 as the expert",
    ]
    assert words("partially_meets") == "partially meets"
    assert words("answer_critical") == "answer-critical"
    assert words("text_only") == "text-only"
    assert words("something_new") == "something new"


# Visible text of a page, without what is code on purpose (<code>, <pre>, <kbd>) or not shown.
HIDDEN = re.compile(r"<(script|style|code|pre|kbd|textarea)\b[^>]*>.*?</\1>", re.S)
RAW_KEY = re.compile(r"\{'|\b[a-z]+_[a-z_]+\b")


def visible_text(body: str) -> str:
    return re.sub(r"<[^>]+>", " ", HIDDEN.sub(" ", body))


def demo_pages() -> list[str]:
    """Every page of the demo, with an object for each page that shows one."""
    from annotation.models import Candidate
    from rubrics.models import Rubric, RubricVersion

    version = RubricVersion.objects.order_by("id").first()
    return [
        "/",
        "/review/",
        "/me/",
        "/adjudicate/",
        "/pipeline/",
        "/agreement/",
        "/import/",
        "/images/",
        "/images/demo-coffee/",
        "/rubrics/",
        f"/rubrics/{Rubric.objects.first().pk}/",
        f"/rubrics/versions/{version.pk}/",
        "/jobs/",
        "/prompts/",
        "/leaderboard/",
        "/judging/runs/",
        "/judging/spot-checks/",
        "/judging/spot-checks/results/",
        "/leaderboard/settings/",
        "/leaderboard/judges/",
        "/leaderboard/questions/",
        "/leaderboard/questions/demo-coffee/",
        f"/review/{Candidate.objects.first().pk}/",  # a GET on a POST-only address: 405
        "/no-such-page/",
    ]


@pytest.mark.django_db
def test_no_page_shows_a_raw_key_for_any_demo_role(client, capsys):
    call_command("load_demo")
    capsys.readouterr()
    # The demo's history holds a status change with reasons as well.
    alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
    from annotation.models import Candidate

    candidate = Candidate.objects.filter(image__source_id="demo-chelsea").first()
    services.review_submit(user=alice, candidate_id=candidate.pk, decision="accept")
    services.review_submit(
        user=bob, candidate_id=candidate.pk, decision="discard", reasons=["not_research_intensive"]
    )
    seen = set()
    for person in User.objects.order_by("username"):
        client.force_login(person)
        for url in demo_pages() + ["/images/demo-chelsea/"]:
            response = client.get(url)
            assert response.status_code in (200, 403, 404, 405), (person, url)
            seen.add(response.status_code)
            text = visible_text(response.content.decode())
            raw = sorted(set(RAW_KEY.findall(text)))
            assert raw == [], (person.username, url, raw)
            assert [w for w in BANNED if w in text] == [], (person.username, url)
    assert seen == {200, 403, 404, 405}


# Words the issue found on pages (issue 24, section 3), none of which may come back.
BANNED = [
    "revised_text",
    "(the form sent",
    "rule gives",
    "give --revision",
    "LLM_BATCH_POLL_SECONDS",
    "1 final questions",
    "of the two)",
    "audit review agree",
    "review undo",
    "manage.py axes",
    "strict_list.item",
]


def refusal_texts(client, alice, root, make_image) -> list[str]:
    """The messages of refused page actions, as a person sees them: htmx error fragments and,
    after a plain post, the message on the page the redirect shows."""
    from annotation.models import FinalQuestion

    image, (c1, c2) = make_image("img-1", ["One?", "Two?"])
    shown = []
    login(client, alice)
    client.post(reverse("review"), **HTMX)
    for data in (
        {"decision": ""},
        {"decision": "maybe"},
        {"decision": "revise", "revised_text": "x" * 2001},
        {"decision": "revise", "revised_text": ""},
        {"decision": "accept", "comment": "y" * 5001},
    ):
        body = client.post(reverse("review_submit", args=[c1.pk]), data, **HTMX).content
        shown.append(re.search(r'data-testid="error"[^>]*>([^<]*)<', body.decode()).group(1))
    question = FinalQuestion.objects.create(image=image, candidate=c2, text=c2.text, method="m")
    login(client, root)
    page = client.post(
        reverse("question_correct", args=[question.pk]),
        {"field": "text", "value": "z" * 2001, "reason": "kept"},
        follow=True,
    ).content.decode()
    shown.append(re.search(r'<li class="error"[^>]*>([^<]*)<', page).group(1))
    # What was typed comes back in the form after the reload; then the form is as before.
    assert "z" * 2001 in page and 'value="kept"' in page
    again = client.get(reverse("image", args=[image.source_id])).content.decode()
    assert "z" * 2001 not in again
    return shown


def test_refusals_speak_the_pages_words(client, alice, root, make_image):
    texts = refusal_texts(client, alice, root, make_image)
    assert texts == [
        "Choose a decision: Accept, Revise or Discard.",
        "“maybe” is not a decision: choose Accept, Revise or Discard.",
        "The revised question is longer than 2,000 characters (2,001 sent): shorten it.",
        "The revised question is empty: write it, or choose another decision.",
        "The comment is longer than 5,000 characters (5,001 sent): shorten it.",
        "The new value is longer than 2,000 characters (2,001 sent): shorten it.",
    ]
    for text in texts:
        assert RAW_KEY.search(text) is None, text
        assert not any(word in text for word in BANNED), text


def test_every_text_field_shows_the_servers_limit(client, alice, make_image):
    """Each text field of the review page carries its service's limit as maxlength, with the
    limit written beside it (app.js makes it a live counter)."""
    from core.text import MAX_COMMENT, MAX_QUESTION_TEXT

    make_image("img-1", ["One?"])
    login(client, alice)
    body = client.post(reverse("review"), **HTMX).content.decode()
    for name, limit in (("revised_text", MAX_QUESTION_TEXT), ("comment", MAX_COMMENT)):
        field = re.search(rf'<(?:textarea|input) name="{name}"[^>]*>', body).group(0)
        assert f'maxlength="{limit}"' in field, field
        after = body[body.index(field) :]
        assert re.search(
            rf'^<(?:/textarea>)?.*?<small class="limit" data-limit="{limit}"', after, re.S
        )


# --- an annotator's own page ------------------------------------------------------------------


def test_my_work_counts_today_week_median_and_the_adjudicators_agreement(
    client, alice, bob, carol, make_image, django_assert_num_queries
):
    from datetime import timedelta

    from django.utils import timezone

    _, (agreed, overturned, old, waiting) = make_image("img-1", ["One?", "Two?", "Three?", "Four?"])
    services.review_submit(user=alice, candidate_id=agreed.pk, decision="accept", seconds=10)
    services.review_submit(user=bob, candidate_id=agreed.pk, decision="discard")
    services.adjudication_resolve(user=carol, candidate_id=agreed.pk, decision="accept")
    services.review_submit(user=alice, candidate_id=overturned.pk, decision="discard", seconds=40)
    services.review_submit(user=bob, candidate_id=overturned.pk, decision="accept")
    services.adjudication_resolve(user=carol, candidate_id=overturned.pk, decision="accept")
    services.review_submit(
        user=alice,
        candidate_id=old.pk,
        decision="accept",
        seconds=99,
        now=timezone.now() - timedelta(days=8),
    )
    login(client, alice)
    # session, user, their groups; the figures, the week's seconds, the waiting and held counts
    with django_assert_num_queries(7):
        body = client.get(reverse("my_work")).content.decode()
    assert '<p class="big" data-testid="today">2</p>' in body
    assert '<p class="big" data-testid="week">2</p>' in body
    assert "3 in all" in body
    assert '<p class="big" data-testid="median">25 s</p>' in body  # of 10 and 40
    assert '<p class="big" data-testid="agreed">50%</p>' in body
    assert "took your decision on 1 of the 2 candidates" in body
    assert '<progress value="2" max="3"' in body  # two done today, one (waiting) left
    assert menu(body)[:2] == ["Review", "My work"]
    assert current(body) == ["My work"]


def test_my_work_is_for_annotators(client, carol, root, mallory):
    for person in (carol, root, mallory):
        assert login(client, person).get(reverse("my_work")).status_code == 403


def test_the_review_page_shows_the_sessions_bar(client, alice, bob, make_image):
    _, (first, second) = make_image("img-1", ["One?", "Two?"])
    services.review_submit(user=alice, candidate_id=first.pk, decision="accept")
    body = login(client, alice).get(reverse("review")).content.decode()
    assert re.search(r'<progress class="session" value="1" max="2"', body)


def test_a_stale_form_gets_a_page_that_says_what_to_do(alice, make_image):
    from django.test import Client

    _, (c,) = make_image()
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    response = client.post(reverse("review_submit", args=[c.pk]), {"decision": "accept"})
    assert response.status_code == 403
    body = response.content.decode()
    assert "<h1>This form is out of date</h1>" in body
    assert "This form was sent from a page that is out of date" in body
    assert 'href="/review/"' in body
    assert menu(body) == ["Review", "My work"]


def test_job_pages_name_the_job_and_its_items_in_words(client, root):
    """ "Generate candidates", not "annotation.generate"; "Question 3", not "q3"; the payload
    and the result as fields, not Python dicts."""
    import annotation.questions.llm_jobs  # noqa: F401  (registers the kinds)
    import rubrics.llm_jobs  # noqa: F401
    from llm.models import Job, JobItem

    generate = Job.objects.create(kind="annotation.generate", items_total=1)
    refine = Job.objects.create(kind="rubrics.refine", items_total=1)
    item = JobItem.objects.create(
        job=refine,
        key="q3",
        payload={"question_id": 3, "round": 1, "stages": ["draft", "refined"]},
        result={"version_id": 9, "dropped": [{"id": "I2", "why": "duplicate"}]},
    )
    login(client, root)
    listing = visible_text(client.get(reverse("jobs")).content.decode())
    assert "Generate candidates" in listing and "Refine rubrics" in listing
    assert "annotation.generate" not in listing and "rubrics.refine" not in listing
    page = client.get(reverse("job", args=[generate.pk])).content.decode()
    assert '<h1 data-testid="job-title">Generate candidates' in page
    body = client.get(reverse("job_item", args=[refine.pk, item.pk])).content.decode()
    assert '<h1 data-testid="item-title">Question 3</h1>' in body
    assert "<dt>Question id</dt><dd>3</dd>" in body
    assert "<dt>Stages</dt><dd>draft, refined</dd>" in body
    assert "{&#x27;" not in body and "&#x27;question_id&#x27;" not in body
