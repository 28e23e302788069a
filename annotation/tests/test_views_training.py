"""The training and audit pages: who may open them, what they show, their query counts, the
review page's gold item (nothing in its HTML gives it away) and the expert's answer after it,
and the agreement page's figures on gold and audits with their CSV and JSON."""

import csv
import io
import json
import re

import pytest
from django.urls import reverse

from annotation.models import GoldItem, ReviewAudit, ReviewClaim, TrainingState
from annotation.review import services
from annotation.tests.quality import GOLD_NOTE, draw, make_gold, set_rates
from annotation.training import audits

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
# A visit of an audit page that shows drawn work (it no longer draws: a POST does).
COUNT_AUDIT_PAGE = 7
COUNT_ROUND_AUDIT_PAGE = 8


def _panel_shape(html: str) -> str:
    """The review panel with what differs between any two candidates taken out: the id in
    its addresses, the wording, the moment it was drawn, the form's one-time keys."""
    html = html[html.index('<div id="panel"') :]
    for pattern, by in (
        (r"/review/\d+/", "/review/ID/"),
        (r'data-shown-at="\d+"', ""),
        (r'data-lease-left="\d+"', ""),
        (r'name="submission_key" value="[^"]+"', ""),
        (r'name="csrfmiddlewaretoken" value="[^"]+"', ""),
        (r"Next question: [^\"]*\"", ""),
        (r"<blockquote[^>]*>[^<]*</blockquote>", ""),
        (r'data-original="[^"]*"', ""),
        (r"<textarea([^>]*)>[^<]*</textarea>", r"<textarea\1></textarea>"),
    ):
        html = re.sub(pattern, by, html)
    return html


def test_a_gold_item_reads_in_the_html_as_any_candidate(client, make_image, root, alice):
    image, (real, spare) = make_image(texts=["What is this dish?", "Where is it from?"])
    item = make_gold(root, image, text="Which dish is this and where does it come from?")
    client.force_login(alice)
    set_rates(gold_rate=0.0)
    real_html = client.post(reverse("review"), follow=True).content.decode()  # one of two real
    assert real.text in real_html
    # The same queue with the gold item in the place of the second real candidate.
    ReviewClaim.objects.all().delete()
    spare.delete()
    set_rates(gold_rate=1.0)
    gold_html = client.post(reverse("review"), follow=True).content.decode()
    assert item.candidate.text in gold_html
    assert "gold" not in gold_html.lower() and "expert" not in gold_html.lower()
    assert _panel_shape(gold_html) == _panel_shape(real_html)


def test_after_a_gold_item_the_expert_answer_is_shown(client, make_image, root, alice):
    image, _ = make_image()
    item = make_gold(root, image, decision="discard", reasons=["leading"])
    set_rates(gold_rate=1.0)
    client.force_login(alice)
    client.post(reverse("review"))
    response = client.post(
        reverse("review_submit", args=[item.candidate_id]), {"decision": "accept"}, **HTMX
    )
    html = response.content.decode()
    assert 'data-testid="gold-feedback"' in html
    assert "The expert decided otherwise" in html and GOLD_NOTE in html
    assert "Leading (fails the stranger test)" in html  # the reason in words, not its key
    # Read alone, with Continue: nothing is claimed until the person goes on.
    assert 'data-testid="question"' not in html and 'data-testid="continue"' in html
    assert not ReviewClaim.objects.filter(annotator=alice).exists()
    client.post(reverse("review"))  # Continue
    # Without htmx: post, redirect, and the answer shown once on the page after it.
    item2 = make_gold(root, image, text="Second gold?", decision="accept")
    held = ReviewClaim.objects.get(annotator=alice).candidate_id  # the real one, drawn next
    client.post(reverse("review_skip", args=[held]))  # and the next drawn: the gold one
    assert ReviewClaim.objects.get(annotator=alice).candidate_id == item2.candidate_id
    response = client.post(
        reverse("review_submit", args=[item2.candidate_id]), {"decision": "accept"}
    )
    assert response.status_code == 302
    page = client.get(reverse("review")).content.decode()
    assert "You decided as the expert did" in page
    assert 'data-testid="continue"' in page and 'data-testid="claiming"' not in page
    assert "You decided as the expert did" not in client.get(reverse("review")).content.decode()


def test_a_trainee_sees_their_progress_and_then_the_refusal(client, make_image, root, alice):
    image, _ = make_image()
    set_rates(training_pass_share=1.0)
    item = make_gold(root, image, training=True)
    client.force_login(alice)
    page = client.post(reverse("review"), follow=True).content.decode()
    assert "Training: 0 of 1 answered" in page and item.candidate.text in page
    client.post(reverse("review_submit", args=[item.candidate_id]), {"decision": "accept"})
    page = client.get(reverse("review")).content.decode()
    assert "You did not pass the training" in page and 'data-testid="continue"' in page
    page = client.get(reverse("review")).content.decode()  # the answer was shown once
    assert "You did not pass the training" in page and 'data-testid="claiming"' in page
    page = client.post(reverse("review"), **HTMX).content.decode()
    assert "You did not pass the training" in page and 'data-testid="empty"' in page


def test_the_training_page_resets_and_lets_through(
    client, make_image, root, alice, bob, django_assert_num_queries
):
    image, _ = make_image()
    item = make_gold(root, image, training=True)
    draw(alice, item)
    services.review_submit(user=alice, candidate_id=item.candidate_id, decision="discard")
    client.force_login(root)
    client.get(reverse("training"))
    with django_assert_num_queries(
        8
    ):  # session, user, groups, config, items, annotators, states, answers
        page = client.get(reverse("training"))
    html = page.content.decode()
    row = html[html.index('data-testid="standing-alice"') :]
    assert "passed" in row[:200]
    assert 'data-testid="standing-bob"' in html
    client.post(reverse("training_change", args=[alice.pk]), {"action": "reset"})
    assert TrainingState.objects.get(user=alice).attempt == 2
    client.post(reverse("training_change", args=[bob.pk]), {"action": "pass"})
    assert TrainingState.objects.get(user=bob).passed_at is not None
    assert (
        client.post(reverse("training_change", args=[bob.pk]), {"action": "x"}).status_code == 400
    )
    # the annotators' side of it is refused
    client.force_login(alice)
    assert client.get(reverse("training")).status_code == 403
    assert (
        client.post(reverse("training_change", args=[alice.pk]), {"action": "pass"}).status_code
        == 403
    )


def test_the_training_page_imports_gold_items_with_line_numbers(client, make_image, root):
    make_image("img-1")
    client.force_login(root)
    bad = io.BytesIO(
        b'{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n{"image": "nope"}\n'
    )
    bad.name = "gold.jsonl"
    response = client.post(reverse("training"), {"gold": bad})
    assert response.status_code == 400
    assert "line 2:" in response.content.decode()
    assert not GoldItem.objects.exists()
    good = io.BytesIO(b'{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n')
    good.name = "gold.jsonl"
    assert client.post(reverse("training"), {"gold": good}).status_code == 302
    assert GoldItem.objects.count() == 1


def test_the_training_page_refuses_a_gold_file_over_the_cap(client, make_image, root, settings):
    """The API's cap (IMPORT_MAX_MANIFEST_BYTES) on the page too: 413, said on the page,
    nothing imported."""
    make_image("img-1")
    line = b'{"image": "img-1", "text": "Q?", "decision": "accept", "note": "n"}\n'
    settings.IMPORT_MAX_MANIFEST_BYTES = len(line) - 1
    client.force_login(root)
    upload = io.BytesIO(line)
    upload.name = "gold.jsonl"
    response = client.post(reverse("training"), {"gold": upload})
    assert response.status_code == 413
    assert "over the cap" in response.content.decode()
    assert not GoldItem.objects.exists()


def _resolved(make_image, first, second, n):
    for i in range(n):
        _, (c,) = make_image(f"img-{i}", [f"Q {i}?"])
        services.review_submit(user=first, candidate_id=c.pk, decision="accept")
        services.review_submit(user=second, candidate_id=c.pk, decision="accept")


def test_the_audit_page_draws_shows_and_takes_a_verdict(
    client, make_image, alice, bob, carol, django_assert_num_queries
):
    _resolved(make_image, alice, bob, 4)
    set_rates(review_audit_rate=0.5)
    client.force_login(carol)
    client.get(reverse("audit"))  # a visit draws nothing: the page draws on load with a POST
    assert not ReviewAudit.objects.exists()
    client.post(reverse("audit"), **HTMX)  # draws 2 + 2
    assert ReviewAudit.objects.count() == 4
    with django_assert_num_queries(COUNT_AUDIT_PAGE):
        page = client.get(reverse("audit"))
    html = page.content.decode()
    assert 'data-shortcuts="audit"' in html and 'data-key="o"' in html
    audit = ReviewAudit.objects.order_by("id").first()
    response = client.post(
        reverse("audit_submit", args=[audit.pk]), {"decision": "overturn"}, **HTMX
    )
    assert response.status_code == 400 and "Write a note" in response.content.decode()
    response = client.post(
        reverse("audit_submit", args=[audit.pk]),
        {"decision": "overturn", "comment": "Boilerplate."},
        **HTMX,
    )
    assert "Audit saved." in response.content.decode()
    audit.refresh_from_db()
    assert audit.verdict == "overturn" and audit.note == "Boilerplate." and audit.auditor == carol
    client.force_login(alice)
    assert client.get(reverse("audit")).status_code == 403


def test_the_round_audit_page_and_the_flag_in_the_history(
    client, dave, root, django_assert_num_queries
):
    from django.contrib.auth.models import Group, User
    from django.utils import timezone

    from rubrics.models import Rubric, RubricCheck, RubricVersion
    from rubrics.tests.conftest import make_question

    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get_or_create(name="rubric_reviser")[0])
    rubric = Rubric.objects.create(question=make_question("q-1"))
    parent = RubricVersion.objects.create(rubric=rubric, stage="llm_refined_1", meta_rubric={})
    version = RubricVersion.objects.create(
        rubric=rubric,
        stage="human_1",
        parent=parent,
        meta_rubric={},
        made_by=dave,
        frozen_at=timezone.now(),
    )
    for v, text in ((parent, "Names the dish."), (version, "Names the dish as bourguignon.")):
        RubricCheck.objects.create(
            version=v, position=1, check_id="C1", kind="fact", tier="answer_critical", text=text
        )
    set_rates(round_audit_rate=1.0)
    client.force_login(dave)
    page = client.post(reverse("round_audit"), follow=True).content.decode()
    assert 'data-testid="empty"' in page
    client.force_login(olga)
    client.post(reverse("round_audit"))  # draws
    # the checks of the round and of its parent: 2
    with django_assert_num_queries(COUNT_ROUND_AUDIT_PAGE):
        page = client.get(reverse("round_audit")).content.decode()
    assert "human round 1 by <strong>dave</strong>" in page
    assert "<del>Names the dish.</del> <ins>Names the dish as bourguignon.</ins>" in page
    audit = version.audit
    client.post(
        reverse("round_audit_submit", args=[audit.pk]),
        {"decision": "flag", "comment": "C2 is vague."},
    )
    history = client.get(reverse("rubric_history", args=[rubric.pk])).content.decode()
    assert 'data-testid="round-audit-flag"' in history and "C2 is vague." in history


def test_the_agreement_page_has_gold_accuracy_and_overturns_with_csv_and_json(
    client, make_image, root, alice, bob, carol, django_assert_num_queries
):
    image, _ = make_image("img-gold", ["Real work, so that gold items are drawn?"])
    right = make_gold(root, image, text="G1?", decision="discard")
    make_gold(root, image, text="G2?", decision="discard")  # answered otherwise
    set_rates(gold_rate=1.0)
    for _ in range(2):  # drawn in either order: one answered as the expert, one not
        drawn = services.review_claim(user=alice).candidate
        decision = "discard" if drawn.pk == right.candidate_id else "accept"
        services.review_submit(user=alice, candidate_id=drawn.pk, decision=decision)
    set_rates(gold_rate=0.0)
    _resolved(make_image, alice, bob, 2)
    audits.review_audits_draw(rate=1.0)
    for audit, verdict in zip(
        ReviewAudit.objects.filter(annotator=alice), ["overturn", "agree"], strict=True
    ):
        audits.review_audit_give(user=carol, audit_id=audit.pk, verdict=verdict, note="why")
    client.force_login(root)
    client.get(reverse("agreement"))
    with django_assert_num_queries(7):
        html = client.get(reverse("agreement")).content.decode()
    # One week of data: no empty chart, a sentence that says why (issue 24).
    assert 'data-testid="trend-chart"' not in html and "<polyline" not in html
    assert "the chart starts with two weeks" in html
    data = json.loads(client.get(reverse("agreement"), {"format": "json"}).content)
    by_name = {row["annotator"]: row for row in data["annotators"]}
    assert by_name["alice"]["gold_accuracy"] == 0.5
    assert by_name["alice"]["overturn_rate"] == 0.5 and by_name["alice"]["audited"] == 2
    assert "bob" not in by_name  # no gold answer, no finished audit
    assert [w["annotator"] for w in data["weeks"]] == ["all", "alice"]
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get(
                    reverse("agreement"), {"format": "csv", "table": "weeks"}
                ).content.decode()
            )
        )
    )
    assert rows[1]["annotator"] == "alice" and rows[1]["overturned"] == "1"
    assert client.get(reverse("agreement"), {"format": "csv", "table": "x"}).status_code == 400


def test_over_the_api_a_gold_item_is_claimed_and_answered_as_any_candidate(make_image, root, alice):
    from rest_framework.test import APIClient

    image, (real,) = make_image()
    item = make_gold(root, image, text="Which dish is this and where does it come from?")
    set_rates(gold_rate=1.0)
    api = APIClient()
    api.force_authenticate(alice)
    claimed = api.post("/api/review/claim/").json()
    assert claimed["id"] == item.candidate_id and set(claimed) == {
        "id",
        "text",
        "round",
        "image",
        "lease",
    }
    detail = api.get(f"/api/candidates/{item.candidate_id}/").json()
    assert detail["status"] == "open" and detail["reviews"] == []
    answer = api.post(
        f"/api/candidates/{item.candidate_id}/reviews/", {"decision": "accept"}, format="json"
    )
    assert answer.status_code == 201 and answer.json()["decision"] == "accept"
    assert item.gold_reviews.get().annotator == alice and not real.reviews.exists()
