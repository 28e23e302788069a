"""The published leaderboard in a real Chromium, opened from disk (file://) with every request
that is not a file refused: its numbers against the API's, a model's number and interval and
the verdicts behind a question's score in three clicks, and axe-core on every kind of page."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.urls import reverse

from judging.publish.site import publish_folder
from judging.releases.services import create_release
from judging.tests.test_analysis_pages import build_world
from judging.tests.test_publish import with_photos
from tests.test_browser_axe import RUN_AXE, axe_source

# axe as the app's walk runs it, but without its preload of the style sheets: it reads them by
# XMLHttpRequest, which Chromium refuses on file:// (and reports as console errors of the page).
RUN_AXE_FROM_DISK = RUN_AXE.replace(
    '{resultTypes: ["violations"]}', '{resultTypes: ["violations"], preload: false}'
)
assert RUN_AXE_FROM_DISK != RUN_AXE

pytestmark = [pytest.mark.browser, pytest.mark.django_db]

PAGES = [
    "index.html",
    "boards/gemini-judge--multimodal.html",
    "boards/gpt-judge--text_only.html",
    "settings.html",
    "judges.html",
    "models.html",
    "models/gpt.html",
    "questions.html",
    "questions/q0.html",
    "questions/q1.html",
    "method.html",
    "data.html",
]


@pytest.fixture
def site(db, tmp_path):
    build_world()
    with_photos()
    release = create_release("v1.0 (demo)", "a demo release")
    folder = tmp_path / "site"
    publish_folder(release, folder)
    return folder


@pytest.fixture
def offline(browser):
    """A page that may read files and nothing else: any other request fails and is recorded."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    asked: list[str] = []

    def refuse(route):
        asked.append(route.request.url)
        route.abort()

    context.route(re.compile(r"^(?!file://).*"), refuse)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page, asked, errors
    context.close()


def test_the_site_from_disk_shows_the_apis_numbers(site, offline, root, screenshot):
    from playwright.sync_api import expect

    page, asked, errors = offline
    client = Client()
    client.force_login(root)
    page.goto(site.joinpath("index.html").as_uri())
    expect(page).to_have_title("Leaderboard · GAMUT v1.0 (demo)")
    screenshot(page, "published-index")
    # Every model's number and interval on the front page is the API's (the release is the
    # working draft until something changes).
    summary = page.locator("table.data").first
    headings = summary.locator("thead th").all_inner_texts()[1:]
    for column, heading in enumerate(headings):
        judge, setting = heading.split("\n")
        setting = {"multimodal": "multimodal", "text-only": "text_only"}[setting.strip()]
        api = client.get(
            reverse("api_leaderboard"), {"judge": judge.strip(), "setting": setting}
        ).json()
        assert api["rows"]
        for row in api["rows"]:
            line = summary.locator("tbody tr").filter(
                has=page.get_by_role("rowheader", name=row["model"], exact=True)
            )
            cell = line.locator("td").nth(column)
            expect(cell.locator("strong")).to_have_text(f"{row['gamut']:.1f}")
            expect(cell.locator("span")).to_have_text(
                f"{row['ci_low']:.1f} to {row['ci_high']:.1f}"
            )

    # Three clicks: the front page -> a model -> a question's score -> the verdicts behind it.
    page.get_by_role("link", name="GPT", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("GPT")
    screenshot(page, "published-model")
    scores = page.get_by_role("table", name=re.compile("GPT's Gamut ×100 under each judge"))
    gpt = next(
        r
        for r in client.get(
            reverse("api_leaderboard"), {"judge": "gemini-judge", "setting": "multimodal"}
        ).json()["rows"]
        if r["model"] == "GPT"
    )
    first = scores.locator("tbody tr").first  # gemini-judge, multimodal
    expect(first.locator("th")).to_have_text("gemini-judge, multimodal")
    expect(first.locator("td").nth(1)).to_have_text(f"{gpt['gamut']:.1f}")
    expect(first.locator("td").nth(2)).to_have_text(f"{gpt['ci_low']:.1f} to {gpt['ci_high']:.1f}")
    question_row = page.locator("table.questions tbody tr").filter(
        has=page.get_by_role("link", name="q0", exact=True)
    )
    question_row.locator("td a").first.click()  # gemini-judge, multimodal
    expect(page).to_have_url(re.compile(r"questions/q0\.html#gpt--multimodal$"))
    answer = page.locator("article#gpt--multimodal")
    expect(answer).to_be_in_viewport()
    expect(answer.locator("h3")).to_have_text("GPT, multimodal")
    verdicts = answer.get_by_role("table")
    expect(verdicts.locator("tbody tr")).to_have_count(2)
    expect(verdicts.locator("tbody tr").first).to_contain_text("Names the dish")
    expect(verdicts.locator("tbody tr").first).to_contain_text("gemini-judge on C0")
    question = client.get(reverse("api_results_question", args=["q0"])).json()
    given = next(
        r for r in question["responses"] if r["model"] == "GPT" and r["setting"] == "multimodal"
    )
    assert given["scores"]["gemini-judge"]["status"] == "scored"
    expect(answer.locator(".score")).to_contain_text(
        f"gemini-judge: {given['scores']['gemini-judge']['gamut']:.1f}"
    )
    for entry, row in zip(given["verdicts"], verdicts.locator("tbody tr").all(), strict=True):
        said = entry["judges"]["gemini-judge"]["verdict"].replace("_", " ")
        expect(row.locator("td").nth(1)).to_contain_text(said)
    # The photo is there (its licence allows it) and loaded from the folder.
    page.wait_for_function("() => document.querySelector('.photo img')?.complete")
    assert page.locator(".photo img").evaluate("img => img.naturalWidth") == 32
    screenshot(page, "published-question")
    assert asked == [] and errors == []


def test_axe_finds_nothing_serious_on_any_kind_of_page(site, offline):
    page, asked, errors = offline
    source = axe_source()
    found = {}
    for path in PAGES:
        page.goto(site.joinpath(path).as_uri())
        page.evaluate(source)
        violations = page.evaluate(RUN_AXE_FROM_DISK)
        if violations:
            found[path] = violations
        # Every link of the page leads to a file of the site or an anchor in it (relative).
        for href in page.locator("a[href]").evaluate_all("els => els.map(e => e.href)"):
            if href.startswith("file://"):
                target = href.split("#")[0]
                assert target.startswith(site.as_uri()), (path, href)
                assert (site / target.removeprefix(site.as_uri() + "/")).is_file(), (path, href)
            else:
                assert href.startswith("https://example.org/"), (path, href)  # evidence links
    assert found == {}, json.dumps(found, indent=1)
    # ... and axe does report a violation that is there.
    page.evaluate("() => document.querySelector('main').append(document.createElement('img'))")
    assert any("image-alt" in v for v in page.evaluate(RUN_AXE_FROM_DISK))
    assert asked == [] and errors == []


def test_the_demos_release_from_disk(offline, tmp_path, capsys):
    """`make run`'s demo release, published as the command does it, read from disk: its board
    shows the demo models' scores (the release's boards), its question page says why the demo
    photo is left out, and axe finds nothing serious."""
    from django.core.management import call_command
    from playwright.sync_api import expect

    from judging.demo import DEMO_RELEASE
    from judging.models import Judge
    from judging.releases.scores import release_board
    from judging.releases.selectors import release_named

    call_command("load_demo")
    call_command("publish_leaderboard", "--release", DEMO_RELEASE, str(tmp_path / "demo"))
    capsys.readouterr()
    release = release_named(DEMO_RELEASE)
    site = tmp_path / "demo"
    page, asked, errors = offline
    source = axe_source()
    page.goto(site.joinpath("index.html").as_uri())
    expect(page.get_by_role("heading", level=1)).to_contain_text(DEMO_RELEASE)
    judge = Judge.objects.order_by("name").first()
    board = release_board(release, judge=judge, setting="multimodal", estimate=False).board
    assert board.rows
    page.get_by_role("link", name=f"{judge.name}, multimodal").first.click()
    table = page.get_by_role("table", name=re.compile("Each model's Gamut"))
    for row in board.rows:
        line = table.locator("tbody tr").filter(has=page.get_by_role("rowheader", name=row.model))
        expect(line.locator("td").nth(1)).to_have_text(f"{row.gamut:.1f}")
    page.evaluate(source)
    assert page.evaluate(RUN_AXE_FROM_DISK) == []
    page.goto(site.joinpath("questions.html").as_uri())
    page.locator("table.data tbody th a").first.click()
    expect(page.locator(".withheld")).to_have_text(
        "No licence was recorded for this photo, so it is not included."
    )
    page.evaluate(source)
    assert page.evaluate(RUN_AXE_FROM_DISK) == []
    assert asked == [] and errors == []
