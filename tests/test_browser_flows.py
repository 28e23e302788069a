"""The flows of issue 11 that had no browser test, in a real Chromium with the keys a person
presses: the keys dialog on a busy machine, the leaderboard after a rubric round, the
per-question heatmap, the annotator's own page, image import, today's reviews, the error pages
and the images list."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from annotation.models import Candidate, CandidateStatus, Preference, Review
from judging.tests.test_llm_jobs import verdicts_by_check, with_photo
from llm.tests.conftest import Harness
from tests.fake_llm import fake_llm  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

Q1 = "What is this dish and how is it made?"
Q2 = "Which region of France is this dish traditionally from?"


def slow_cpu(page, rate: int = 20) -> None:
    """Chromium's CPU slowed `rate` times, as on a loaded CI machine: the browser's rendering
    updates (and with them its focus fix-ups) come late."""
    page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": rate})


def test_keys_dialog_closed_with_esc_never_takes_the_next_enter(make_image, alice, log_in):
    """The cause of the flaky test_review_and_adjudicate_with_the_keyboard: after ? and Esc the
    focus stayed on the closed dialog's "Turn them off" button until the browser's next
    rendering update, so on a busy machine Enter pressed it (a full page load to /review/, the
    same question, shortcuts off) instead of submitting the review."""
    make_image("img-1", [Q1, Q2])
    a = log_in("alice")
    page = a.page
    posts: list[str] = []
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_have_text(Q1)  # claimed on load (a POST)
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)

    # Enter in the open dialog closes it (its Close button has the focus), nothing else.
    page.keyboard.press("?")
    dialog = page.locator("#keys-help")
    expect(dialog.get_by_role("button", name="Close (Esc)")).to_be_focused()
    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()

    slow_cpu(page)
    page.evaluate("window.__gamutMarker = 'still-here'")
    for following in (Q2, None):
        # No wait between the keys: what a quick person (or a loaded machine) does.
        page.keyboard.press("?")
        page.keyboard.press("Escape")
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        if following:
            expect(page.get_by_test_id("question")).to_have_text(following)
        else:
            expect(page.get_by_test_id("empty")).to_be_visible()
    assert page.evaluate("window.__gamutMarker") == "still-here", "the page was reloaded"
    assert not [url for url in posts if "/preferences/" in url]
    assert not Preference.objects.filter(user=alice, single_key_shortcuts=False).exists()
    assert Review.objects.filter(annotator=alice, decision="accept").count() == 2
    assert set(Candidate.objects.values_list("status", flat=True)) == {CandidateStatus.OPEN}
    assert a.errors == []


def test_enter_right_after_the_next_candidate_appears_is_sent_once(make_image, alice, log_in):
    """Until htmx settles a swap, the new review form wears the attributes of the one it
    replaced, htmx's "htmx-request" class included: app.js took that for a submission on its
    way and dropped the Enter, unsent and unsaid (the second flake of the keyboard test on a
    loaded machine). The settle is stretched to 1.5 s here to hold that moment open."""
    make_image("img-1", [Q1, Q2])
    a = log_in("alice")
    page = a.page
    posts: list[str] = []
    page.goto("/review/")
    expect(page.get_by_test_id("question")).to_have_text(Q1)  # claimed on load (a POST)
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.evaluate("htmx.config.defaultSettleDelay = 1500")
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # the second Enter of an impatient person: nothing more sent
    expect(page.get_by_test_id("question")).to_have_text(Q2)
    assert page.locator("#panel.htmx-settling").count() == 1  # still settling
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    assert len(posts) == 2, posts
    assert dict(
        Review.objects.filter(annotator=alice).values_list("candidate__text", "decision")
    ) == {
        Q1: "accept",
        Q2: "discard",
    }
    assert a.errors == []


def review(user, candidate, decision="accept", **fields):
    from annotation.review import services

    return services.review_submit(user=user, candidate_id=candidate.pk, decision=decision, **fields)


def test_my_work_shows_today_the_week_the_median_the_agreement_and_the_session_bar(
    make_image, alice, bob, carol, log_in
):
    from annotation.review import services

    _, (agreed, overruled, open_one, waiting) = make_image(
        "img-1", ["Question one?", "Question two?", "Question three?", "Question four?"]
    )
    # alice: three reviews today (10, 20 and 60 s); carol settles two disputes, one her way.
    review(alice, agreed, seconds=10)
    review(bob, agreed, "discard")
    review(alice, overruled, seconds=20)
    review(bob, overruled, "discard")
    review(alice, open_one, seconds=60)
    services.adjudication_resolve(user=carol, candidate_id=agreed.pk, decision="accept")
    services.adjudication_resolve(user=carol, candidate_id=overruled.pk, decision="discard")

    page = log_in("alice").page
    page.goto("/review/")
    # The menu leads there, and marks it as the current page.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="My work").press("Enter")
    expect(page).to_have_url(re.compile(r"/me/$"))
    expect(page.get_by_role("link", name="My work")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("today")).to_have_text("3")
    expect(page.get_by_test_id("week")).to_have_text("3")
    expect(page.get_by_test_id("median")).to_have_text("20 s")
    expect(page.get_by_test_id("agreed")).to_have_text("50%")
    expect(page.get_by_test_id("agreed").locator("xpath=..")).to_contain_text(
        "took your decision on 1 of the 2 candidates"
    )
    bar = page.get_by_test_id("session").locator("progress")
    # three done today, one still waiting for her (the fourth question)
    expect(bar).to_have_attribute("value", "3")
    expect(bar).to_have_attribute("max", "4")
    expect(page.get_by_test_id("session")).to_contain_text("3 reviewed today, 1 waiting for you")
    assert waiting.reviews.count() == 0
    # And on to the review page, where the same bar goes on.
    page.get_by_role("link", name="Review", exact=True).last.press("Enter")
    expect(page.get_by_test_id("question")).to_have_text("Question four?")
    expect(page.get_by_test_id("session-bar")).to_have_attribute("value", "3")


def test_my_reviews_of_today_change_an_open_one_and_show_a_resolved_one_fixed(
    make_image, alice, bob, log_in
):
    _, (resolved, still_open) = make_image("img-1", [Q1, Q2])
    review(alice, resolved)
    review(bob, resolved)  # both accept: resolved
    mine = review(alice, still_open, "discard", reasons=["leading"], comment="Too vague")

    a = log_in("alice")
    page = a.page
    page.goto("/review/")
    page.get_by_role("link", name="your reviews of today").press("Enter")
    expect(page).to_have_url(re.compile(r"/review/mine/$"))
    rows = page.get_by_test_id("my-reviews").locator("tbody tr")
    expect(rows).to_have_count(2)
    # Newest first: the open one can be changed, the resolved one says it is settled.
    expect(rows.nth(0)).to_contain_text(Q2)
    expect(rows.nth(0)).to_contain_text("Leading (fails the stranger test)")
    expect(rows.nth(1)).to_contain_text(Q1)
    expect(rows.nth(1).get_by_role("button")).to_have_count(0)
    expect(rows.nth(1)).to_contain_text("resolved: accepted")

    rows.nth(0).get_by_role("button", name="Change").press("Enter")
    expect(page).to_have_url(re.compile(r"/review/$"))
    expect(page.get_by_test_id("question")).to_have_text(Q2)
    # It comes back as she left it: discard, the reason, the comment.
    expect(page.locator('#panel input[name="decision"][value="discard"]')).to_be_checked()
    expect(page.locator('#panel input[name="reasons"][value="leading"]')).to_be_checked()
    expect(page.locator('#panel input[name="comment"]')).to_have_value("Too vague")
    assert not Review.objects.filter(pk=mine.pk).exists()
    page.keyboard.press("a")
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("empty")).to_be_visible()
    changed = Review.objects.get(annotator=alice, candidate=still_open)
    assert (changed.decision, changed.reasons, changed.comment) == (
        "accept",
        ["leading"],
        "Too vague",
    )
    page.goto("/review/mine/")
    expect(rows.nth(0)).to_contain_text("Accept")
    assert a.errors == []


def test_error_pages_have_the_menu_the_reason_and_a_way_on(alice, root, log_in):
    a = log_in("alice")
    page = a.page
    menu = page.get_by_role("navigation", name="Main")
    # 403: a page for admins, said so, with the annotator's own menu and the way home.
    assert page.goto("/leaderboard/").status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("You may not open this page")
    expect(page.get_by_test_id("error-message")).to_have_text("This page is for admins.")
    expect(menu.get_by_role("link")).to_have_text(["Review", "My work"])
    page.get_by_role("link", name="Your home page").press("Enter")
    expect(page).to_have_url(re.compile(r"/$"))
    # 405: a GET on an address that only takes a form's submission explains, not a blank page.
    assert page.goto("/review/undo/").status == 405
    expect(page.get_by_test_id("error-message")).to_contain_text("It receives what a page's form")
    expect(page.get_by_test_id("error-page")).to_contain_text("your browser sent GET")
    expect(menu.get_by_role("link")).to_have_count(2)
    page.get_by_role("link", name="Go to /review/").press("Enter")
    expect(page).to_have_url(re.compile(r"/review/$"))

    r = log_in("root")
    page = r.page
    # 404 under a list: the list, one Enter away, with the menu marking nothing as current.
    assert page.goto("/jobs/999999/").status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("There is nothing at this address")
    expect(
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs")
    ).to_be_visible()
    page.get_by_role("link", name="Go up to /jobs/").press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs/$"))
    expect(page.get_by_role("link", name="Jobs")).to_have_attribute("aria-current", "page")
    # A GET on the judging launch (a form's address) leads to the page that has the form.
    assert page.goto("/judging/runs/launch/").status == 405
    expect(page.get_by_role("link", name="Go to /judging/runs/")).to_be_visible()
    for person in (a, r):
        assert [e for e in person.errors if "status of 40" not in e] == []


def test_images_list_filters_by_domain_and_popularity_and_rows_lead_to_the_image(
    make_image, root, log_in
):
    make_image("cat-001", ["What breed is this cat?"], entity="Tabby cat", domain="animals")
    make_image("owl-002", [], entity="Snowy owl", domain="animals", popularity="tail")
    make_image("soup-003", [], entity="Bouillabaisse", domain="food", popularity="tail")
    page = log_in("root").page
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Images").press("Enter")
    expect(page).to_have_url(re.compile(r"/images/$"))
    expect(page.get_by_role("link", name="Images")).to_have_attribute("aria-current", "page")
    expect(page.get_by_test_id("image-total")).to_have_text("3")

    # Pick the filters, then Enter on Show.
    page.get_by_label("Domain").select_option("animals")
    page.get_by_label("Popularity").select_option("tail")
    page.get_by_role("button", name="Show").press("Enter")
    expect(page).to_have_url(re.compile(r"domain=animals.*popularity=tail"))
    expect(page.get_by_test_id("image-total")).to_have_text("1")
    rows = page.get_by_test_id("image-list").locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-source-id", "owl-002")
    # The filters stay chosen on the answer, and Clear empties them.
    expect(page.get_by_label("Domain")).to_have_value("animals")
    expect(page.get_by_label("Popularity")).to_have_value("tail")
    page.get_by_label("Search").fill("breed")  # the candidate's wording
    page.get_by_label("Popularity").select_option("")
    page.get_by_label("Search").press("Enter")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-source-id", "cat-001")
    page.get_by_role("link", name="Clear").press("Enter")
    expect(page.get_by_test_id("image-total")).to_have_text("3")
    page.get_by_role("link", name="soup-003").press("Enter")
    expect(page).to_have_url(re.compile(r"/images/soup-003/$"))
    expect(page.get_by_role("heading", name="soup-003")).to_be_visible()
    expect(page.get_by_role("link", name="Images")).to_have_attribute("aria-current", "page")


def photo_zip(path, names):
    import zipfile

    from conftest import png_bytes

    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, png_bytes())
    return path


def manifest_line(source_id, **fields):
    import json

    line = {
        "source_id": source_id,
        "image": f"{source_id}.png",
        "entity": "Tabby cat",
        "domain": "animals",
        "popularity": "head",
        **fields,
    }
    return json.dumps(line) + "\n"


def test_image_import_shows_its_progress_the_result_and_the_refreshed_list(
    root, log_in, tmp_path, monkeypatch
):
    import threading

    from annotation.images import views
    from annotation.models import Image

    # The server holds the upload until the test has seen the "checking and importing" phase.
    release = threading.Event()
    real_import = views.import_from_upload

    def held_import(*args, **kwargs):
        release.wait(timeout=20)
        return real_import(*args, **kwargs)

    monkeypatch.setattr(views, "import_from_upload", held_import)
    r = log_in("root")
    page = r.page
    page.goto("/import/")
    expect(page.get_by_test_id("recent-imports")).to_contain_text("None yet.")
    manifest = tmp_path / "cats.jsonl"
    manifest.write_text(
        manifest_line("cat-1", candidates=["What breed is this cat?"]) + manifest_line("cat-2")
    )
    page.get_by_label("Manifest").set_input_files(str(manifest))
    page.get_by_label("Images (zip)").set_input_files(
        str(photo_zip(tmp_path / "cats.zip", ["cat-1.png", "cat-2.png"]))
    )
    page.get_by_role("button", name="Import").press("Enter")
    bar = page.locator("#upload-progress")
    expect(page.locator("#upload-phase")).to_have_text(
        "Uploaded; the server is checking every line and importing…"
    )
    expect(bar).to_be_visible()
    assert bar.evaluate("bar => bar.hasAttribute('value')") is False  # indeterminate
    release.set()
    expect(page.locator("#import-result h2")).to_have_text("Imported 2 images")
    expect(bar).to_be_hidden()
    expect(page.locator("#upload-phase")).to_have_text("")
    recent = page.get_by_test_id("recent-imports")
    expect(recent.locator("tbody tr")).to_have_count(1)
    expect(recent).to_contain_text("cats.jsonl")
    expect(recent).to_contain_text("2 imported, 0 skipped")
    assert set(Image.objects.values_list("source_id", flat=True)) == {"cat-1", "cat-2"}

    # A manifest with a bad line: its problems by line number, nothing written, the bar reset.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(manifest_line("cat-3") + manifest_line("cat-4", popularity="famous"))
    page.get_by_label("Manifest").set_input_files(str(bad))
    page.get_by_label("Images (zip)").set_input_files(
        str(photo_zip(tmp_path / "more.zip", ["cat-3.png", "cat-4.png"]))
    )
    page.get_by_role("button", name="Import").press("Enter")
    problems = page.get_by_test_id("problems")
    expect(problems).to_contain_text("line 2")
    expect(problems).to_contain_text("famous")
    expect(page.locator("#import-result h2")).to_have_text("Nothing was imported: 1 problem")
    expect(bar).to_be_hidden()
    expect(recent.locator("tbody tr")).to_have_count(1)  # the failed one is no import
    assert not Image.objects.filter(source_id__in=["cat-3", "cat-4"]).exists()
    assert r.errors == []


def test_leaderboard_after_a_rubric_round_says_what_waits_and_launches_the_re_judging(
    root, log_in, monkeypatch, fake_llm, settings
):
    from decimal import Decimal

    from django.db import transaction
    from django.utils import timezone

    from judging.models import EvaluatedModel, Judge
    from judging.models import Response as ModelResponse
    from judging.tests.conftest import add_checks, final_checks, make_question
    from judging.verdicts.services import verdict_record
    from llm.models import Job, LLMModel
    from llm.tasks import run_job_chunk
    from rubrics.models import RubricVersion

    # The chunk tasks a launch sends, caught after the commit instead of going to a broker.
    sent: list[int] = []
    monkeypatch.setattr(
        run_job_chunk,
        "delay_on_commit",
        lambda job_id: transaction.on_commit(lambda: sent.append(job_id)),
    )
    model = LLMModel.objects.create(
        name="judge-llm",
        provider="gemini",
        model="gemini-2.5-pro",
        price_input_per_million=Decimal("1.00"),
        price_output_per_million=Decimal("10.00"),
    )
    judge = Judge.objects.create(name="gemini-judge", llm_model=model)
    answering = EvaluatedModel.objects.create(name="model-a")
    judged, revised = make_question("q0"), make_question("q1")
    for question in (judged, revised):
        with_photo(question, settings)
        pending = ModelResponse.objects.create(
            model=answering, question=question, setting="multimodal", text="Beef bourguignon."
        )
        for check in final_checks(question):
            verdict_record(judge=judge, response=pending, check=check, verdict="meets")
    # A rubric round: q1's new final version has checks gemini-judge has not judged.
    version = RubricVersion.objects.create(
        rubric=revised.rubric, stage="human_1", meta_rubric={}, frozen_at=timezone.now()
    )
    add_checks(version, ("answer_critical", "valuable", "context", "valuable"))

    r = log_in("root")
    page = r.page
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Leaderboard").press(
        "Enter"
    )
    waiting = page.get_by_test_id("rejudge")
    expect(waiting.get_by_role("heading")).to_have_text(
        "1 response waits for gemini-judge's verdicts on the working draft"  # no release cut
    )
    expect(waiting).to_contain_text("count as Pending")
    expect(page.get_by_test_id("leaderboard").locator("tbody tr").first).to_contain_text("1 of 2")
    # The estimate is on the page before the launch button.
    estimate = page.get_by_test_id("rejudge-estimate")
    expect(estimate).to_have_text(
        "Judging them: 1 response, at most 4 calls to judge-llm, about 8800 tokens in and 320 "
        "out, cost about 0.0120."
    )
    launch = waiting.get_by_role("button", name="Launch the judging (1 item)")
    assert estimate.evaluate(
        "(p, b) => !!(p.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING)",
        launch.element_handle(),
    )
    assert Job.objects.count() == 0
    launch.press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get()
    expect(page.locator(".messages")).to_contain_text(f"Job {job.pk} launched with 1 item(s).")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Judge responses job {job.pk}")
    # One item: q1's response, to be judged on the new version's checks, by this judge.
    item = job.items.get()
    assert (job.kind, job.params["judge_id"], job.items_total) == ("judging.judge", judge.pk, 1)
    assert item.payload == {"response_id": pending.pk, "version_id": version.pk}
    assert sent == [job.pk]

    # The worker runs the job (here: its chunks in this process, the judge on the fake
    # Gemini server); the leaderboard then scores both responses and says nothing waits.
    fake_llm.responder = verdicts_by_check({"check 1": "partially_meets"})
    Harness(fake_llm).drain(job)
    assert (job.status, job.items_done) == ("done", 1)
    assert len(fake_llm.requests) == 4  # one call per check of the new version
    page.get_by_role("link", name="Leaderboard").press("Enter")
    expect(page.get_by_test_id("leaderboard").locator("tbody tr").first).to_contain_text("2 of 2")
    expect(page.get_by_test_id("rejudge")).to_have_count(0)
    assert r.errors == []


def test_question_page_heatmap_colours_each_verdict_with_a_legend_in_words(root, log_in):
    from django.conf import settings

    from conftest import png_bytes
    from judging.tests.test_analysis_pages import build_world

    build_world()
    photo = settings.MEDIA_ROOT / "images" / "q0.png"
    photo.parent.mkdir(parents=True, exist_ok=True)
    photo.write_bytes(png_bytes())
    r = log_in("root")
    page = r.page
    page.goto("/leaderboard/questions/")
    page.get_by_role("link", name="q0").press("Enter")
    heatmap = page.get_by_test_id("heatmap")
    expect(heatmap).to_be_visible()
    # Checks are rows, (model, setting) x judge the columns: two checks, 6 answers x 2 judges.
    rows = heatmap.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.first.locator("td")).to_have_count(12)
    expect(heatmap.locator("th.answer")).to_have_count(6)
    # Compact: the whole grid fits on the screen (it was a 10,000 px column).
    box = heatmap.bounding_box()
    assert box["height"] < 600 and box["width"] < 1280, box

    legend = page.get_by_test_id("legend")
    text = legend.inner_text()
    for words in ("meets", "partially meets", "missing", "contradicts", "failed", "not judged"):
        assert words in text, (words, text)
    assert "_" not in text  # no raw keys
    # Each cell has its verdict's colour, the same as the legend's swatch, and distinct ones.
    colour = "el => getComputedStyle(el).backgroundColor"
    seen = {}
    for value in ("meets", "partially_meets", "missing", "contradicts", "none"):
        cells = heatmap.locator(f"td.verdict-{value}")
        if cells.count() == 0:
            continue
        swatch = legend.locator(f".verdict-{value}").evaluate(colour)
        assert cells.first.evaluate(colour) == swatch, value
        seen[value] = swatch
    assert len(seen) >= 3 and len(set(seen.values())) == len(seen), seen
    # "not judged" where gpt-judge has no verdict on the new version; the title says it in words.
    expect(heatmap.locator("td.verdict-none")).to_have_count(2)
    expect(heatmap.locator("td.verdict-none").first).to_have_attribute("title", "not judged")
    first_meets = heatmap.locator("td.verdict-meets").first
    expect(first_meets).to_have_attribute("title", re.compile(r"^meets"))
    # A row's check leads to the check's full text below.
    rows.first.get_by_role("link").press("Enter")
    expect(page).to_have_url(re.compile(r"#check-"))
    assert r.errors == []
