"""Training in a real Chromium: a trainee answers the training set with the keys, sees the
expert's decision and note after each gold item, and reaches real work once past the
threshold; an adjudicator audits a drawn review with a, o, c and Enter."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from annotation.models import GoldReview, QualityConfig, Review, ReviewAudit, ReviewClaim
from annotation.review import services
from annotation.training import gold

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_trainee_answers_gold_items_sees_the_expert_and_then_real_work(
    make_image, root, alice, log_in
):
    image, (real,) = make_image("img-1", ["Where was this dish first cooked?"])
    QualityConfig(pk=1, training_pass_share=0.5, gold_rate=0.0).save()
    first = gold.gold_item_create(
        user=root,
        image_id=image.pk,
        text="What is this dish called?",
        decision="discard",
        reasons=["leading"],
        note="The entity is in the photo's caption: the question gives nothing to research.",
        training=True,
    )
    second = gold.gold_item_create(
        user=root,
        image_id=image.pk,
        text="How did this stew become a national dish of France?",
        decision="accept",
        note="Research-intensive and about the pictured entity.",
        training=True,
    )
    page = log_in("alice").page
    page.goto("/review/")
    expect(page.get_by_test_id("training")).to_contain_text("0 of 2 answered")
    expect(page.get_by_test_id("question")).to_have_text(first.candidate.text)

    page.keyboard.press("a")  # accept: not what the expert decided
    page.keyboard.press("Enter")
    feedback = page.get_by_test_id("gold-feedback")
    expect(feedback).to_contain_text("The expert decided otherwise")
    expect(page.get_by_test_id("gold-yours")).to_have_text("Accept")
    expect(page.get_by_test_id("gold-expert")).to_have_text("Discard")
    expect(page.get_by_test_id("gold-note")).to_have_text(first.note)
    expect(feedback).to_contain_text("Leading (fails the stranger test)")
    # Where the eyes are: the expert's answer and the progress at the top of the page, read
    # alone before the next question.
    expect(page.get_by_test_id("training")).to_contain_text("1 of 2 answered")
    assert page.get_by_test_id("training").bounding_box()["y"] < 250
    assert feedback.bounding_box()["y"] < 350
    expect(page.get_by_test_id("question")).to_have_count(0)
    page.keyboard.press("Enter")  # continue, once read
    expect(page.get_by_test_id("question")).to_have_text(second.candidate.text)
    expect(feedback).to_have_count(0)

    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("gold-feedback")).to_contain_text("You decided as the expert did")
    expect(page.get_by_test_id("gold-note")).to_have_text(second.note)
    page.get_by_test_id("continue").click()  # the mouse's way on
    # 1 of 2 as the expert: 50 %, the threshold. Real work now, and no training notice.
    expect(page.get_by_test_id("question")).to_have_text(real.text)
    expect(page.get_by_test_id("training")).to_have_count(0)
    assert GoldReview.objects.filter(annotator=alice).count() == 2
    assert not Review.objects.exists()

    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    expect(page.get_by_test_id("gold-feedback")).to_have_count(0)  # a real review: no answer
    assert Review.objects.get().candidate_id == real.pk


def test_a_training_set_arriving_while_a_real_candidate_is_held_comes_first(
    make_image, root, alice, log_in
):
    """Gold training items imported while alice holds a real candidate: her next item is the
    training item, the real one goes back to the pool (not lost), and the refusal of her
    answer to the real one is not said in the colour of a success."""
    image, (real,) = make_image("img-1", ["Where was this dish first cooked?"])
    QualityConfig(pk=1, training_pass_share=0.5, gold_rate=0.0).save()
    page = log_in("alice").page
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_have_text(real.text)
    item = gold.gold_item_create(
        user=root,
        image_id=image.pk,
        text="What is this dish called?",
        decision="discard",
        note="The question names nothing to research.",
        training=True,
    )
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    notice = page.get_by_test_id("notice")
    expect(notice).to_contain_text("Finish the training first")
    expect(notice).to_have_class("notice refused")
    ok = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--ok')")
    assert notice.evaluate("e => getComputedStyle(e).color") != ok
    expect(page.get_by_test_id("question")).to_have_text(item.candidate.text)
    expect(page.get_by_test_id("training")).to_contain_text("0 of 1 answered")
    assert not ReviewClaim.objects.filter(candidate=real).exists()  # back in the pool
    assert not Review.objects.exists()

    # A reload shows the training item too, never the real candidate held before.
    ReviewClaim.objects.filter(annotator=alice).delete()
    services.review_claim(user=alice)  # the training item, as above
    ReviewClaim.objects.filter(annotator=alice).delete()
    ReviewClaim.objects.create(
        candidate=real, annotator=alice, expires_at=timezone.now() + timedelta(minutes=10)
    )
    page.reload()
    expect(page.get_by_test_id("question")).to_have_text(item.candidate.text)
    assert not ReviewClaim.objects.filter(candidate=real).exists()


def test_an_adjudicator_audits_with_the_keys(make_image, alice, bob, carol, log_in):
    for i in range(2):
        _, (c,) = make_image(f"img-{i}", [f"What is dish {i}?"])
        services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
        services.review_submit(user=bob, candidate_id=c.pk, decision="accept")
    QualityConfig(pk=1, review_audit_rate=0.5).save()
    person = log_in("carol")
    page = person.page
    page.goto("/audit/")
    expect(page.get_by_test_id("waiting")).to_have_text("2")
    page.keyboard.press("o")
    expect(page.locator('#panel input[name="decision"][value="overturn"]')).to_be_checked()
    page.keyboard.press("c")
    page.keyboard.type("Boilerplate: any dish fits it.")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_contain_text("Audit saved.")
    expect(page.get_by_test_id("waiting")).to_have_text("1")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    verdicts = sorted(ReviewAudit.objects.values_list("verdict", "note"))
    assert verdicts == [("agree", ""), ("overturn", "Boilerplate: any dish fits it.")]
    assert person.errors == []
