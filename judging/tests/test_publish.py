"""Publishing a release's leaderboard as a static site (issue 25, section 3): the same bytes every
time, the release's own numbers (not the live state's), photos by licence, names that cannot
escape their file or their page, the command, and the download's refusals and query count.
The site in a real Chromium from file:// is tests/test_browser_publish.py."""

from __future__ import annotations

import csv
import html
import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotation.models import Image, ImportBatch
from conftest import png_bytes
from judging.models import EvaluatedModel, Judge, Response
from judging.publish import charts, licences
from judging.publish.site import Site, file_names, publish_folder, site_folder, zip_stream
from judging.releases.scores import release_board
from judging.releases.services import create_release
from judging.tests.test_analysis_pages import build_world
from judging.tests.test_releases import _human_round

pytestmark = pytest.mark.django_db


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def with_photos() -> None:
    """q0's photo under CC BY 4.0 (published), q1's under a licence that does not allow it,
    q2 and q3 with none recorded."""
    for source_id, licence in (("q0", "cc-by-4.0"), ("q1", "proprietary")):
        batch = ImportBatch.objects.create(
            source=ImportBatch.Source.COMMAND,
            file_name=f"{source_id}.zip",
            dataset="photos-demo",
            split="test",
            license=licence,
        )
        image = Image.objects.get(source_id=source_id)
        image.import_batch = batch
        image.file.save(f"{source_id}.png", ContentFile(png_bytes()), save=False)
        image.save()


@pytest.fixture
def world(db):
    found = build_world()
    with_photos()
    return found


def test_the_same_release_gives_the_same_bytes_even_after_a_human_round(world, tmp_path):
    release = create_release("v1.0", "first cut")
    first = publish_folder(release, tmp_path / "a")
    second = publish_folder(release, tmp_path / "b")
    a, b = tree(tmp_path / "a"), tree(tmp_path / "b")
    assert a == b
    assert len(a) == first.files == second.files and first.bytes == sum(map(len, a.values()))
    # Every page and table is there.
    for path in (
        "index.html",
        "boards/gemini-judge--multimodal.html",
        "boards/gpt-judge--text_only.html",
        "settings.html",
        "judges.html",
        "models.html",
        "models/gpt.html",
        "questions.html",
        "questions/q0.html",
        "method.html",
        "data.html",
        "style.css",
        "release.json",
        "photos/q0.png",
        "data/leaderboard.csv",
        "data/leaderboard.json",
        "data/questions/q0.csv",
        "data/questions/q0.json",
    ):
        assert path in a, path
    # Nothing in it says when it was built: a later human round (a new rubric version, the
    # question reworded, the draft's responses now pending) leaves the release's site as it was.
    question = world["questions"][1]
    _human_round(question, edit={0: "A reworded check"})
    question.text = "What is this dish called?"
    question.save()
    publish_folder(release, tmp_path / "c")
    assert tree(tmp_path / "c") == a
    # The zip (the page's download) holds the same files under one folder, the same bytes twice.
    blob = b"".join(zip_stream(release))
    assert blob == b"".join(zip_stream(release))
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        inside = {
            name.removeprefix("gamut-v1.0/"): archive.read(name) for name in archive.namelist()
        }
        assert {i.date_time for i in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    assert inside == a


def test_the_numbers_are_the_releases_boards(world, tmp_path, client, root):
    release = create_release("v1.0")
    publish_folder(release, tmp_path / "site")
    site = tmp_path / "site"
    summary = json.loads((site / "data/leaderboard.json").read_text())
    assert summary["release"] == {"name": "v1.0", "content_hash": release.content_hash}
    for judge in world["judges"]:
        for setting in ("multimodal", "text_only"):
            board = release_board(release, judge=judge, setting=setting, estimate=False).board
            rows = json.loads((site / f"data/{judge.name}--{setting}-rows.json").read_text())[
                "rows"
            ]
            assert [r["model"] for r in rows] == [r.model for r in board.rows]
            assert [(r["gamut"], r["ci_low"], r["ci_high"]) for r in rows] == [
                (r.gamut, r.low, r.high) for r in board.rows
            ]
            # ... and the API's answer (the release is the draft until something changes).
            client.force_login(root)
            api = client.get(
                reverse("api_leaderboard"), {"judge": judge.name, "setting": setting}
            ).json()
            assert [(r["model"], r["gamut"], r["ci_low"], r["ci_high"]) for r in api["rows"]] == [
                (r["model"], r["gamut"], r["ci_low"], r["ci_high"]) for r in rows
            ]
            page = (site / f"boards/{judge.name}--{setting}.html").read_text()
            for r in board.rows:
                assert f"<strong>{r.gamut:.1f}</strong>" in page
                assert f"{r.low:.1f} to {r.high:.1f}" in page
            mine = [
                s for s in summary["rows"] if s["judge"] == judge.name and s["setting"] == setting
            ]
            assert {s["model"]: s["gamut"] for s in mine} == {r.model: r.gamut for r in board.rows}
    # The CSV is the JSON's table.
    with (site / "data/leaderboard.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(summary["rows"]) == 3 * 4


def test_a_release_keeps_its_scores_where_the_draft_waits(world, tmp_path):
    """After a human round the draft's responses to the reworded question wait for verdicts;
    the release's site still scores every response on the version it froze."""
    release = create_release("v1.0")
    _human_round(world["questions"][2], edit={0: "A reworded check"})
    judge = Judge.objects.get(name="gpt-judge")
    draft = release_board(None, judge=judge, setting="multimodal", estimate=False)
    assert draft.pending == 3
    publish_folder(release, tmp_path / "site")
    rows = json.loads((tmp_path / "site/data/gpt-judge--multimodal-rows.json").read_text())
    assert [r["pending"] for r in rows["rows"]] == [0, 0, 0]
    assert [r["scored"] for r in rows["rows"]] == [4, 4, 4]
    # The question's page shows the release's checks, not the new version's.
    page = (tmp_path / "site/questions/q2.html").read_text()
    assert "check 0" in page and "A reworded check" not in page


def test_photos_go_in_only_when_their_licence_allows(world, tmp_path):
    release = create_release("v1.0")
    published = publish_folder(release, tmp_path / "site")
    site = tmp_path / "site"
    assert (published.photos, published.photos_withheld) == (1, 3)
    assert (site / "photos/q0.png").read_bytes() == png_bytes()
    assert sorted(p.name for p in (site / "photos").iterdir()) == ["q0.png"]
    q0 = (site / "questions/q0.html").read_text()
    assert 'src="../photos/q0.png"' in q0 and "licence cc-by-4.0" in q0
    q1 = html.unescape((site / "questions/q1.html").read_text())
    assert "<img" not in q1
    assert "The photo's licence (proprietary) is not one that allows sharing a copy" in q1
    assert "No licence was recorded for this photo" in (site / "questions/q2.html").read_text()
    listing = json.loads((site / "data/questions.json").read_text())["rows"]
    assert [(q["source_id"], q["licence"], q["photo"]) for q in listing] == [
        ("q0", "cc-by-4.0", True),
        ("q1", "proprietary", False),
        ("q2", "", False),
        ("q3", "", False),
    ]
    method = (site / "method.html").read_text()
    assert "1 of the 4 photos are included" in method


@pytest.mark.parametrize(
    ("licence", "allowed"),
    [
        ("cc-by-nc-4.0", True),
        ("CC BY 4.0", True),
        ("cc-by-sa-3.0", True),
        ("cc-by-nc-nd-4.0", True),
        ("cc0-1.0", True),
        ("apache-2.0", True),
        ("", False),
        ("unknown", False),
        ("other", False),
        ("proprietary", False),
        ("cc-by-nc-4.0-but-not-really", False),
    ],
)
def test_the_licence_rule(licence, allowed):
    assert licences.photo_allowed(licence) is allowed
    assert bool(licences.withheld_reason(licence)) is not allowed


def test_hostile_names_stay_in_their_file_and_their_page(world, tmp_path):
    """A model named like markup, a path or a spreadsheet formula: escaped in the pages and the
    charts, a plain file name, a text cell in the CSV."""
    hostile = '=HYPERLINK("x")/../<b>x</b>'
    model = EvaluatedModel.objects.create(name=hostile)
    question = world["questions"][0]
    Response.objects.create(model=model, question=question, setting="multimodal", text="<i>hi")
    release = create_release("v1.0")
    publish_folder(release, tmp_path / "site")
    site = tmp_path / "site"
    files = tree(site)
    name = file_names([hostile])[hostile]
    assert "/" not in name and ".." not in name and "<" not in name
    assert f"models/{name}.html" in files
    assert all(not p.startswith("..") for p in files)
    for path, data in files.items():
        if path.endswith(".html"):
            assert b"<b>x</b>" not in data and b"<i>hi" not in data, path
    assert "&lt;b&gt;x&lt;/b&gt;" in (site / "boards/gpt-judge--multimodal.html").read_text()
    with (site / "data/gpt-judge--multimodal-rows.csv").open() as f:
        models = [row["model"] for row in csv.DictReader(f)]
    assert "'" + hostile in models


def test_file_names_are_unique_and_do_not_depend_on_order():
    names = ["GPT", "gpt", "a/b", "a b", "..", "", "gemini-2.5"]
    found = file_names(names)
    assert found == file_names(reversed(names))
    assert len(set(found.values())) == len(names)
    assert found["gemini-2.5"] == "gemini-2.5"
    assert all(v and "/" not in v and not v.startswith(".") for v in found.values())


def test_charts_are_deterministic_and_escape_their_labels():
    rows = [
        charts.ChartRow("<model>", (charts.Mark(41.25, 30.0, 52.5),)),
        charts.ChartRow("b", (charts.Mark(-12.0, -30.0, 5.0),)),
        charts.ChartRow("c", (charts.Mark(None),)),
    ]
    one = charts.dot_chart(rows, series=["Gamut"], title="t & u", description="d", ident="x")
    assert one == charts.dot_chart(
        rows, series=["Gamut"], title="t & u", description="d", ident="x"
    )
    assert "&lt;model&gt;" in one and "<model>" not in one and "t &amp; u" in one
    assert charts.axis_range(rows) == (-30, 60)
    assert charts.axis_range([]) == (-100, 100)
    assert charts.axis_range([charts.ChartRow("a", (charts.Mark(5.0),))]) == (0, 10)
    # One circle per scored model, none for the model without a score.
    assert one.count("<circle") == 2


def test_the_command(world, tmp_path):
    release = create_release("v1.0")
    out = io.StringIO()
    call_command("publish_leaderboard", "--release", "v1.0", str(tmp_path / "site"), stdout=out)
    assert "published release v1.0" in out.getvalue() and "4 question(s)" in out.getvalue()
    assert (tmp_path / "site/index.html").is_file()
    with pytest.raises(CommandError, match="not an empty folder"):
        call_command("publish_leaderboard", "--release", "v1.0", str(tmp_path / "site"))
    with pytest.raises(CommandError, match=r"no release named 'v9' \(releases: v1.0\)"):
        call_command("publish_leaderboard", "--release", "v9", str(tmp_path / "other"))
    assert release.name == "v1.0"


def test_the_zip_reads_a_fixed_number_of_queries_and_five_a_question(
    world, django_assert_num_queries
):
    """The zip the Export page's job writes (rubrics/export_jobs.py, layout "site"; its tests
    are in rubrics/tests/test_export_jobs.py)."""
    release = create_release("v1.0")
    # 61 whatever the number of questions (the release, its questions, the judges, and the
    # boards: the release's, the settings' and the judges' comparisons), and 5 for each
    # question (its frozen row, its checks, the judges, its responses, their verdicts).
    with django_assert_num_queries(61 + 5 * 4):
        blob = b"".join(zip_stream(release))
    assert site_folder(release) == "gamut-v1.0"
    names = zipfile.ZipFile(io.BytesIO(blob)).namelist()
    assert "gamut-v1.0/index.html" in names


def test_the_leaderboard_and_release_pages_offer_to_publish(world, client, root):
    client.force_login(root)
    page = client.get(reverse("leaderboard")).content.decode()
    form = page[page.index('data-testid="publish"') - 60 :]
    assert f'action="{reverse("exports")}"' in form[:200]
    assert 'name="layout" value="site"' in form and 'name="release" value=""' in form
    assert "Publish the leaderboard of the latest release as a static site" in form
    create_release("v1.0 (demo)")
    page = client.get(reverse("release", args=["v1.0 (demo)"])).content.decode()
    assert 'name="release" value="v1.0 (demo)"' in page
    assert "Publish its leaderboard as a static site" in page


def test_files_are_handed_on_question_by_question(world):
    """The download streams: the site's files come a few at a time, not all at the end."""
    release = create_release("v1.0")
    site = Site(release)
    steps = site.steps()
    seen = 0
    for _ in steps:
        seen = max(seen, len(site.pending))
        site.pending.clear()
    assert 0 < seen < 40
