"""Issue 24 sections 2 and 4 in a real Chromium, by mouse and by keys: buttons that say what
they will do, tables and charts that look finished, pages that fit a phone, right-to-left text
isolated."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_crag_mm_button_says_check_on_a_dry_run_and_import_otherwise(root, log_in):
    page = log_in("root").page
    page.goto("/import/crag-mm/")
    form = page.locator("#crag-mm-form")
    button = form.get_by_role("button", name="Check")
    expect(button).to_be_visible()
    # By mouse: untick "Dry run", the button now imports.
    form.get_by_label("Dry run (write nothing)").click()
    expect(form.locator("button[type=submit]")).to_have_text("Import")
    # By keys: Space on the focused box ticks it again.
    form.get_by_label("Dry run (write nothing)").focus()
    page.keyboard.press("Space")
    expect(form.locator("button[type=submit]")).to_have_text("Check")


def test_completing_a_round_by_the_c_key_lands_on_the_rubrics_address(dave, log_in):
    from rubrics import services as rubric_services
    from rubrics.models import Stage
    from rubrics.tests.conftest import make_question, sample_meta

    for n in range(2):
        rubric_services.rubric_version_create(
            question=make_question(f"img-{n}"),
            meta_document=sample_meta(),
            stage=Stage.LLM_REFINED_1,
            made_by_model="fake",
        )
    page = log_in("dave").page
    page.goto("/rubrics/")
    page.get_by_role("button", name="Start the next rubric").click()
    expect(page.get_by_role("heading", name="Meta-rubric")).to_be_visible()
    workspace = page.url
    page.once("dialog", lambda dialog: dialog.accept())
    page.keyboard.press("c")
    expect(page.get_by_text("Round complete")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/rubrics/$"))
    assert page.url != workspace
    # Back goes to the workspace (frozen now), not to a stale copy of the list.
    expect(page.get_by_test_id("rubrics-waiting")).to_have_text("1")


def _box(locator) -> dict:
    box = locator.bounding_box()
    assert box is not None
    return box


def test_spot_check_forms_sit_on_one_line_and_the_label_filters_are_apart(root, log_in):
    page = log_in("root").page
    page.goto("/judging/spot-checks/results/")
    draw = page.get_by_label("Draw")
    button = page.get_by_role("button", name="Draw", exact=True)
    # The number box is short, and its button on the same line as it.
    assert _box(draw)["width"] < 140
    assert abs(_box(draw)["y"] - _box(button)["y"]) < 12
    audit = page.get_by_test_id("audit")
    pairs, twice = audit.get_by_label("Add"), audit.get_by_label("graded twice")
    draw_audit = audit.get_by_role("button", name="Draw the audit")
    tops = {round(_box(x)["y"] / 20) for x in (pairs, twice, draw_audit)}
    assert len(tops) == 1, [_box(x) for x in (pairs, twice, draw_audit)]
    # By keys: Tab goes from the count to the share to the button.
    pairs.focus()
    page.keyboard.press("Tab")
    expect(twice).to_be_focused()
    page.keyboard.press("Tab")
    expect(draw_audit).to_be_focused()

    page.goto("/judging/spot-checks/quality/")
    links = page.get_by_test_id("label-filters").get_by_role("link")
    expect(links).to_have_count(3)
    boxes = [_box(links.nth(i)) for i in range(3)]
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert right["x"] >= left["x"] + left["width"] + 4  # a visible gap between the links
    links.nth(1).click()
    expect(links.nth(1)).to_have_attribute("aria-current", "page")


def test_the_judging_forms_read_forwards_and_offer_batch_only_beside_a_gemini_judge(root, log_in):
    from judging.models import EvaluatedModel, Judge
    from llm.models import LLMModel

    prices = {"price_input_per_million": 1, "price_output_per_million": 10}
    flash = LLMModel.objects.create(
        name="flash", provider="gemini", model="gemini-2.5-flash", **prices
    )
    gpt = LLMModel.objects.create(name="gpt", provider="openai", model="gpt-4.1-mini", **prices)
    EvaluatedModel.objects.create(name="model-a", llm_model=flash)
    Judge.objects.create(name="judge-on-gemini", llm_model=flash)
    Judge.objects.create(name="judge-on-openai", llm_model=gpt)
    page = log_in("root").page
    page.goto("/judging/runs/")
    for card, first in (("collect", "Evaluated model"), ("judge", "Judge")):
        labels = page.get_by_test_id(card).locator("form label").all_inner_texts()
        assert labels[0].startswith(first), labels
        assert labels[-2].startswith("Only these images") and labels[-1].startswith("Fresh"), labels
    judge = page.get_by_test_id("judge")
    batch = judge.get_by_label("Through Gemini's Batch API", exact=False)
    # By keys: choose the OpenAI judge in the list; the Batch API is no longer offered.
    judge.get_by_role("combobox", name="Judge").select_option("judge-on-gemini")
    expect(batch).to_be_visible()
    batch.check()
    judge.get_by_role("combobox", name="Judge").focus()
    judge.get_by_role("combobox", name="Judge").select_option(label="judge-on-openai")
    expect(batch).to_be_hidden()
    expect(batch).to_be_disabled()
    expect(batch).not_to_be_checked()
    judge.get_by_role("combobox", name="Judge").select_option(label="judge-on-gemini")
    expect(batch).to_be_visible()
    expect(batch).to_be_enabled()


ARABIC_QUESTION = "ما اسم هذا الطبق؟ (the dish on the plate)"


def test_right_to_left_texts_are_isolated_on_the_adjudication_page(
    make_image, alice, bob, carol, log_in
):
    from annotation.review import services

    _, (candidate,) = make_image("img-rtl", [ARABIC_QUESTION], entity="كسكس Couscous")
    services.review_submit(
        user=alice, candidate_id=candidate.pk, decision="accept", comment="واضح “clear” enough"
    )
    services.review_submit(
        user=bob,
        candidate_id=candidate.pk,
        decision="revise",
        revised_text="ما اسم هذا الطبق المغربي؟ (the Moroccan dish)",
        reasons=["unnatural_wording"],
    )
    page = log_in("carol").page
    page.goto("/adjudicate/")
    question = page.get_by_test_id("question")
    expect(question).to_have_text(ARABIC_QUESTION)
    expect(question).to_have_attribute("dir", "auto")
    direction = "(el) => getComputedStyle(el).direction"
    assert question.evaluate(direction) == "rtl"  # the first strong letter is Arabic
    diff = page.get_by_test_id("review-2").get_by_test_id("diff")
    assert diff.evaluate(direction) == "rtl"
    assert diff.locator("ins").first.evaluate("(el) => getComputedStyle(el).unicodeBidi") == (
        "isolate"
    )
    # The comment sits in a <bdi> between the page's own quotes, which stay outside it.
    comment = page.get_by_test_id("review-1").get_by_test_id("comment")
    expect(comment.locator("bdi")).to_have_text("واضح “clear” enough")
    assert comment.inner_text().startswith("“") and comment.inner_text().endswith("”")
    # The page's own English stays left to right.
    assert page.locator("h3").first.evaluate(direction) == "ltr"
    # The revision box takes its direction from what is in it (the Arabic question now).
    box = page.locator("textarea[name=revised_text]")
    expect(box).to_have_attribute("dir", "auto")
    assert box.evaluate(direction) == "rtl"


PHONE = {"width": 390, "height": 844}
WIDTH = "document.documentElement.scrollWidth"
# What sticks out past the right edge: for the message of a failed assertion.
WIDE = """() => Array.from(document.querySelectorAll("body *")).filter((el) =>
  el.getBoundingClientRect().right > 391).slice(0, 8).map((el) =>
  el.tagName + "." + el.className + " " + Math.round(el.getBoundingClientRect().right))"""


def test_at_390_px_the_daily_pages_fit_and_tables_scroll_in_their_own_box(
    make_image, alice, bob, carol, root, log_in, screenshot
):
    from annotation.models import Image
    from annotation.review import services

    _, (c,) = make_image("img-1", ["What is this dish and how is it made in the region?"])
    services.review_submit(user=alice, candidate_id=c.pk, decision="accept")
    services.review_submit(
        user=bob,
        candidate_id=c.pk,
        decision="revise",
        revised_text="What is this dish, and how is it cooked in the region it comes from?",
    )
    make_image("img-2", ["Which region is this long-named dish from, and since when?"])
    proposed, _ = make_image("img-3", [])
    Image.objects.filter(pk=proposed.pk).update(entity="Citroën 2CV", entity_confirmed=False)
    for username, url in (
        ("alice", "/review/"),
        ("carol", "/adjudicate/"),
        ("alice", "/entities/"),
    ):
        page = log_in(username).page
        page.set_viewport_size(PHONE)
        page.goto(url)
        expect(page.locator("#panel img").first).to_be_visible()
        assert page.evaluate(WIDTH) <= 390, (url, page.evaluate(WIDTH), page.evaluate(WIDE))
        photo = page.locator("#panel img").first.bounding_box()
        assert photo["x"] >= 0 and photo["x"] + photo["width"] <= 390, (url, photo)
        if url != "/entities/":
            question = page.get_by_test_id("question").bounding_box()
            assert question["x"] >= 0 and question["x"] + question["width"] <= 390, url
            keys = page.locator("#panel").get_by_role("button", name="Keys (?)")
            box = keys.bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= 390, (url, box)
        # The menu is compact: the whole top bar takes under a fifth of the screen.
        assert page.locator("header.topbar").bounding_box()["height"] < 844 / 5, url
        screenshot(page, f"phone{url.replace('/', '-')}")
    page = log_in("root").page
    page.set_viewport_size(PHONE)
    for url in ("/pipeline/", "/images/", "/judging/runs/"):
        page.goto(url)
        assert page.evaluate(WIDTH) <= 390, (url, page.evaluate(WIDTH), page.evaluate(WIDE))
        assert page.locator("header.topbar").bounding_box()["height"] < 844 / 5, url
    # A wide table scrolls inside its own box, by mouse wheel or by keys, not the page.
    page.goto("/images/")
    table = page.get_by_test_id("image-list")
    assert table.evaluate("(el) => el.scrollWidth > el.clientWidth") or (
        table.bounding_box()["width"] <= 390
    )
    # The menu's links are all reachable: it scrolls sideways in its own row.
    nav = page.get_by_role("navigation", name="Main")
    last = nav.get_by_role("link").last
    last.focus()
    expect(last).to_be_in_viewport()


def test_leaderboard_names_stay_on_one_line_and_an_unranked_row_says_why(root, log_in):
    from judging.models import EvaluatedModel, Judge, Response
    from judging.tests.conftest import final_checks, make_question
    from judging.verdicts.services import verdict_record

    judge = Judge.objects.create(name="gemini-judge")
    questions = [make_question(f"lq{i}", tiers=("answer_critical", "valuable")) for i in range(4)]
    full = EvaluatedModel.objects.create(name="gemini-2.5-flash-preview-09-2025-multimodal")
    once = EvaluatedModel.objects.create(name="gpt-4.1-mini-2025-04-14-text-only-run")
    for i, question in enumerate(questions):
        for model in (full, once) if i == 0 else (full,):
            response = Response.objects.create(
                model=model, question=question, setting="multimodal", text="An answer."
            )
            for k, check in enumerate(final_checks(question)):
                verdict = "missing" if (model == full and i == k) else "meets"
                verdict_record(judge=judge, response=response, check=check, verdict=verdict)
    page = log_in("root").page
    page.set_viewport_size({"width": 1366, "height": 768})
    page.goto("/leaderboard/")
    table = page.get_by_test_id("leaderboard")
    expect(table.get_by_test_id("rank")).to_have_text(["1", "–"])
    expect(table.get_by_test_id("unranked-why")).to_have_text(
        "not ranked: scored on 1 of 4 questions"
    )
    expect(table.get_by_test_id("interval").nth(1)).to_have_text("n too small")
    # Each model's name is on one line: its text makes one line box, not three.
    lines = """(el) => { const r = document.createRange(); r.selectNodeContents(el.firstChild);
      return new Set(Array.from(r.getClientRects()).map((b) => Math.round(b.top))).size; }"""
    for n in range(2):
        assert table.locator("td.model").nth(n).evaluate(lines) == 1
    # The chart column is narrow beside the names.
    chart = table.locator("th.chart-col").bounding_box()
    assert chart["width"] < 200
