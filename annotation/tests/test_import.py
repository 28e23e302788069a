"""import_images: validation of the whole manifest before any write, from the command line,
the browser and the API."""

import io
import json
import zipfile

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from annotation.models import AuditEvent, Candidate, Image, ImportBatch
from conftest import png_bytes

pytestmark = pytest.mark.django_db


def line(source_id="s1", image="s1.png", **extra):
    obj = {
        "source_id": source_id,
        "image": image,
        "entity": "Falcon 9",
        "domain": "vehicles",
        "popularity": "torso",
        **extra,
    }
    return json.dumps(obj)


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "s1.png").write_bytes(png_bytes())
    (tmp_path / "s2.png").write_bytes(png_bytes((10, 20, 30)))
    (tmp_path / "notes.png").write_text("this is not an image")
    return tmp_path


def run(folder, lines, capsys):
    manifest = folder / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_images", str(manifest))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def test_imports_images_and_round_one_candidates(folder, capsys):
    code, out, _ = run(
        folder,
        [
            line(
                "s1",
                "s1.png",
                egocentric=True,
                candidates=["What rocket is this?", "How does it land?"],
            ),
            line("s2", "s2.png"),
        ],
        capsys,
    )
    assert code == 0
    assert "imported 2 image(s), skipped 0" in out
    s1 = Image.objects.get(source_id="s1")
    assert s1.egocentric and s1.popularity == "torso" and s1.file.read() == png_bytes()
    assert list(Candidate.objects.filter(image=s1).values_list("text", "round", "status")) == [
        ("What rocket is this?", 1, "open"),
        ("How does it land?", 1, "open"),
    ]
    batch = ImportBatch.objects.get()
    assert batch.imported == 2 and batch.source == "command"
    assert AuditEvent.objects.filter(action="images.import").count() == 1


def test_reimport_skips_existing_and_says_so(folder, capsys):
    run(folder, [line("s1", "s1.png")], capsys)
    code, out, _ = run(folder, [line("s1", "s1.png"), line("s2", "s2.png")], capsys)
    assert code == 0
    assert "skipped s1: already imported" in out
    assert "imported 1 image(s), skipped 1" in out
    assert Image.objects.count() == 2


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (line("s3", "missing.png"), "image 'missing.png' not found"),
        (line("s3", "notes.png"), "'notes.png' is not a JPEG, PNG, WebP or GIF image"),
        (line("s3", "../s1.png"), "inside the manifest's folder"),
        (
            line("s3", "s2.png", popularity="famous"),
            "popularity must be head, torso, tail or unknown",
        ),
        (
            json.dumps({"source_id": "s3", "image": "s2.png", "domain": "x", "popularity": "head"}),
            "missing field 'entity'",
        ),
        (line("s3", "s2.png", egocentric="yes"), "egocentric must be true or false"),
        (line("s3", "s2.png", candidates="What?"), "candidates must be a list"),
        (line("s3", "s2.png", popularty="head"), "unknown field 'popularty'"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a JSON object"),
        (line("s1", "s2.png"), "source_id 's1' repeats line 1"),
    ],
)
def test_one_bad_line_fails_everything(folder, capsys, bad, message):
    code, _, err = run(folder, [line("s1", "s1.png"), bad], capsys)
    assert code == 2
    (reported,) = [m for m in err.splitlines() if "line 2:" in m]
    assert message in reported
    assert "nothing was imported" in err
    assert not Image.objects.exists() and not ImportBatch.objects.exists()
    assert not list((folder.parent).glob("media/images/*"))


def test_every_bad_line_is_reported(folder, capsys):
    code, _, err = run(
        folder, [line("s1", "missing.png"), line("s2", "s2.png"), line("s3", "notes.png")], capsys
    )
    assert code == 2
    assert "line 1:" in err and "line 3:" in err and "line 2:" not in err


def test_image_over_20_mb_is_refused(folder, capsys):
    big = folder / "big.png"
    big.write_bytes(png_bytes())
    with big.open("r+b") as fh:  # a sparse file just over 20 MB: cheap to make
        fh.truncate(20 * 1024 * 1024 + 1)
    code, _, err = run(folder, [line("s1", "big.png")], capsys)
    assert code == 2 and "over the 20 MB limit" in err


def test_missing_manifest_file(tmp_path, capsys):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError) as err:
        call_command("import_images", str(tmp_path / "nope.jsonl"))
    assert err.value.returncode == 2


# --- browser and API ------------------------------------------------------------------------


def zip_of(files: dict[str, bytes]) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    buffer.seek(0)
    buffer.name = "images.zip"
    return buffer


def manifest_file(*lines) -> io.BytesIO:
    data = io.BytesIO(("\n".join(lines) + "\n").encode())
    data.name = "manifest.jsonl"
    return data


def test_api_import(root):
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(
        "/api/images/import/",
        {
            "manifest": manifest_file(line("s1", "photos/s1.png", candidates=["What is it?"])),
            "images": zip_of({"photos/s1.png": png_bytes()}),
        },
        format="multipart",
    )
    assert response.status_code == 201, response.content
    assert response.json() == {"imported": ["s1"], "skipped": []}
    assert ImportBatch.objects.get().source == "api"


def test_api_import_bad_lines_400(root):
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(
        "/api/images/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png"), line("s2", "s2.png")),
            "images": zip_of({"s1.png": png_bytes()}),
        },
        format="multipart",
    )
    assert response.status_code == 400
    assert response.json()["errors"] == ["line 2: image 's2.png' not found in the zip"]
    assert not Image.objects.exists()


def test_api_import_refuses_unsafe_zip_and_non_admins(root, alice):
    client = APIClient()
    client.force_authenticate(root)
    response = client.post(
        "/api/images/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png")),
            "images": zip_of({"../evil.png": png_bytes()}),
        },
        format="multipart",
    )
    assert response.status_code == 400 and "unsafe path" in response.json()["errors"][0]
    client.force_authenticate(alice)
    response = client.post(
        "/api/images/import/", {"manifest": manifest_file(line())}, format="multipart"
    )
    assert response.status_code == 403


def test_browser_import(client, root, alice):
    client.force_login(root)
    response = client.post(
        "/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png")),
            "images": zip_of({"s1.png": png_bytes()}),
        },
    )
    assert response.status_code == 200
    assert b"Imported 1 image" in response.content
    assert ImportBatch.objects.get().source == "web"
    response = client.post(
        "/import/",
        {
            "manifest": manifest_file(line("s2", "nope.png")),
            "images": zip_of({"s1.png": png_bytes()}),
        },
    )
    assert response.status_code == 400 and b"Nothing was imported" in response.content
    client.force_login(alice)
    assert client.get("/import/").status_code == 403


def test_load_demo_is_idempotent(capsys):
    call_command("load_demo")
    first = (Image.objects.count(), Candidate.objects.count(), AuditEvent.objects.count())
    assert first[0] >= 5 and first[1] >= 10
    assert all(Image.objects.values_list("is_demo", flat=True))
    assert set(Candidate.objects.values_list("origin", flat=True)) == {"demo"}
    call_command("load_demo")
    assert (Image.objects.count(), Candidate.objects.count(), AuditEvent.objects.count()) == first
    assert "0 user(s) and 0 image(s) created" in capsys.readouterr().out


def test_load_demo_gives_the_result_pages_demo_answers_and_verdicts(capsys):
    from judging.leaderboard.board import leaderboard
    from judging.models import Judge, Response, Verdict
    from judging.spot_checks.services import disagreements

    call_command("load_demo")
    assert "demo answers and verdicts created" in capsys.readouterr().out
    assert all("demo" in name for name in Judge.objects.values_list("name", flat=True))
    assert Response.objects.count() == 4  # two demo models, two settings
    assert not Verdict.objects.filter(verdict="failed").exists()
    from judging.demo import JUDGES

    # The judges graded for the demo; the demo LLM judge grades only once a job is launched.
    boards = {
        j.name: leaderboard(judge=j, setting="multimodal")
        for j in Judge.objects.filter(name__in=JUDGES)
    }
    assert len(boards) == 2
    for board in boards.values():
        assert [(r.model, r.scored) for r in board.rows] == [
            ("demo-model-a", 1),
            ("demo-model-b", 1),
        ]
    strict, lenient = boards["demo-judge-strict"], boards["demo-judge-lenient"]
    assert strict.rows[0].gamut > strict.rows[1].gamut  # the good answer wins
    assert lenient.rows[1].gamut > strict.rows[1].gamut  # the lenient judge is kinder
    assert disagreements()  # something for the spot checks
    count = Verdict.objects.count()
    call_command("load_demo")
    assert Verdict.objects.count() == count


def test_browser_import_without_the_zip_says_so(client, root):
    client.force_login(root)
    response = client.post(
        "/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png"), line("s2", "s2.png")),
        },
    )
    assert response.status_code == 400
    body = response.content.decode()
    assert "No zip was uploaded, and the manifest names images" in body
    assert "not found" not in body
    assert not Image.objects.exists()


def test_htmx_import_refreshes_the_recent_imports(client, root):
    client.force_login(root)
    response = client.post(
        "/import/",
        {
            "manifest": manifest_file(line("s1", "s1.png")),
            "images": zip_of({"s1.png": png_bytes()}),
        },
        HTTP_HX_REQUEST="true",
    )
    body = response.content.decode()
    assert 'id="import-result"' in body
    recent = body[body.index('id="recent-imports"') :]
    assert 'hx-swap-oob="true"' in recent[:200]
    assert "1 imported, 0 skipped" in recent
