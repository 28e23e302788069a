"""Hostile image imports: polyglot files, decompression bombs, deep JSON, malformed zips and
huge error reports. Each gets a clear, line-numbered 400 (or exit status 2), and nothing is
written; the photos that do get in are served as images that cannot run."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from PIL import Image as PILImage
from rest_framework.test import APIClient

from annotation.models import AuditEvent, Image, ImportBatch
from conftest import png_bytes
from tests.hostile_files import (
    gif_frames,
    gif_js_polyglot,
    jpeg_with_icc,
    other_format,
    png_blank,
    png_header_only,
    png_html_polyglot,
    webp_header_only,
    zip_bytes,
    zip_encrypted,
    zip_with_bad_crc,
)

pytestmark = pytest.mark.django_db


def line(source_id="s1", image="s1.png", **extra) -> str:
    return json.dumps(
        {
            "source_id": source_id,
            "image": image,
            "entity": "Falcon 9",
            "domain": "vehicles",
            "popularity": "torso",
            **extra,
        }
    )


def upload(name: str, data: bytes) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = name
    return handle


def api_import(user, manifest: str | bytes, archive: bytes | None):
    client = APIClient()
    client.force_authenticate(user)
    data = {
        "manifest": upload(
            "manifest.jsonl", manifest.encode() if isinstance(manifest, str) else manifest
        )
    }
    if archive is not None:
        data["images"] = upload("images.zip", archive)
    return client.post("/api/images/import/", data, format="multipart")


def nothing_written() -> bool:
    stored = list((Path(default_storage.location) / "images").glob("*"))
    return not Image.objects.exists() and not ImportBatch.objects.exists() and not stored


# --- item 1: what is stored, and how it is served --------------------------------------------


def test_polyglots_are_stored_under_their_decoded_format(root):
    poly_html = png_html_polyglot("<script src=/images/imp-polyjs/photo></script>")
    response = api_import(
        root,
        "\n".join([line("imp-polyjs", "poly.js"), line("imp-polyhtml", "poly2.html")]),
        zip_bytes({"poly.js": gif_js_polyglot(), "poly2.html": poly_html}),
    )
    assert response.status_code == 201, response.content
    names = dict(Image.objects.values_list("source_id", "file"))
    assert names == {
        "imp-polyjs": "images/imp-polyjs.gif",
        "imp-polyhtml": "images/imp-polyhtml.png",
    }
    assert default_storage.open(names["imp-polyhtml"]).read() == poly_html


@pytest.mark.parametrize(
    ("source_id", "content_type"), [("imp-polyjs", "image/gif"), ("imp-polyhtml", "image/png")]
)
def test_photos_are_served_as_images_that_cannot_run(client, root, alice, source_id, content_type):
    api_import(
        root,
        "\n".join([line("imp-polyjs", "poly.js"), line("imp-polyhtml", "p.html")]),
        zip_bytes(
            {"poly.js": gif_js_polyglot(), "p.html": png_html_polyglot("<script>alert(1)</script>")}
        ),
    )
    client.force_login(alice)
    response = client.get(f"/images/{source_id}/photo")
    assert response.status_code == 200
    assert response["Content-Type"] == content_type
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Content-Security-Policy"] == "default-src 'none'; sandbox"


def test_a_stored_file_with_another_extension_is_never_served(client, alice, make_image):
    image, _ = make_image("legacy")
    name = default_storage.save("images/legacy.html", ContentFile(b"<script>alert(1)</script>"))
    Image.objects.filter(pk=image.pk).update(file=name)
    client.force_login(alice)
    response = client.get("/images/legacy/photo")
    assert response.status_code == 404
    assert b"<script>" not in response.content


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("s1.png", other_format("BMP"), "'s1.png' is not a JPEG, PNG, WebP or GIF image"),
        ("s1.png", other_format("TIFF"), "'s1.png' is not a JPEG, PNG, WebP or GIF image"),
        (
            "s1.svg",
            b"<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>",
            "'s1.svg' is not a JPEG, PNG, WebP or GIF image",
        ),
        ("s1.html", b"<script>alert(1)</script>", "'s1.html' is not a JPEG, PNG, WebP or GIF"),
        ("s1.png", png_bytes()[:60], "'s1.png' is damaged"),
    ],
)
def test_anything_but_the_four_formats_is_refused_with_its_line(root, name, data, message):
    response = api_import(
        root,
        "\n".join([line("s0", "ok.png"), line("s1", name)]),
        zip_bytes({"ok.png": png_bytes(), name: data}),
    )
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error.startswith("line 2: ") and message in error
    assert nothing_written()


def test_recheck_images_renames_or_quarantines_old_rows(client, alice, make_image, capsys):
    files = {
        "as-js": ("images/old-as-js.js", gif_js_polyglot()),  # a GIF: renamed
        "as-html": ("images/old-as-html.html", png_html_polyglot("<script>x</script>")),  # PNG
        "fake": ("images/old-fake.png", b"<html><script>alert(1)</script></html>"),  # quarantined
        "good": ("images/old-good.png", png_bytes()),  # left alone
    }
    for source_id, (name, data) in files.items():
        image, _ = make_image(source_id)
        stored = default_storage.save(name, ContentFile(data))
        Image.objects.filter(pk=image.pk).update(file=stored)

    call_command("recheck_images", "--dry-run")
    assert "1 sound, 2 would be renamed, 1 would be quarantined" in capsys.readouterr().out
    assert Image.objects.get(source_id="as-js").file.name == "images/old-as-js.js"

    call_command("recheck_images")
    assert (
        "1 sound, 2 renamed, 1 quarantined, 0 in quarantine already, 0 missing"
        in capsys.readouterr().out
    )
    names = dict(Image.objects.values_list("source_id", "file"))
    assert names == {
        "as-js": "images/old-as-js.gif",
        "as-html": "images/old-as-html.png",
        "fake": "quarantine/old-fake.png.quarantined",
        "good": "images/old-good.png",
    }
    assert not default_storage.exists("images/old-as-js.js")
    assert default_storage.open(names["as-js"]).read() == files["as-js"][1]
    assert AuditEvent.objects.filter(
        action="images.quarantined", image__source_id="fake", data__from="images/old-fake.png"
    ).exists()
    client.force_login(alice)
    assert client.get("/images/as-js/photo")["Content-Type"] == "image/gif"
    assert client.get("/images/fake/photo").status_code == 404

    call_command("recheck_images")  # again: nothing left to do
    assert "3 sound, 0 renamed, 0 quarantined, 1 in quarantine already, 0 missing" in (
        capsys.readouterr().out
    )


# --- item 4: imports that cannot be turned against the server ---------------------------------


def deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    ("lines", "files", "message"),
    [
        # A decompression bomb: 900 million pixels in a 100-byte file, refused unread.
        (
            [line("s1", "bomb.png")],
            {"bomb.png": png_header_only(30000, 30000)},
            "line 1: image 'bomb.png' has more pixels than the limit of 50,000,000",
        ),
        # Between Pillow's warning and its error: the limit still holds.
        (
            [line("s1", "big.png")],
            {"big.png": png_header_only(10000, 10000)},
            "line 1: image 'big.png' is 10000x10000 pixels: 100,000,000 pixels for a browser "
            "or a model to decode, over the limit of 50,000,000 (IMAGE_MAX_PIXELS)",
        ),
        ([deep_json(5000)], {}, "line 1: not valid JSON: nested deeper than the limit of 32"),
        ([deep_json(100)], {}, "line 1: nested deeper than the limit of 32 levels"),
        (
            [line("s1", "a/b.png")],
            {"a": b"x", "a/b.png": png_bytes()},
            "line 1: image 'a/b.png' lies beneath 'a', which the zip holds as a file",
        ),
        (
            [line("s1", "a")],
            {"a": b"x", "a/b.png": png_bytes()},
            "line 1: image 'a' is both a file and a folder in the zip",
        ),
        (
            [line("s1", "photos")],
            {"photos/b.png": png_bytes()},
            "line 1: image 'photos' is a folder in the zip",
        ),
        (
            [line("s1", "x" * 300 + ".png")],
            {"x" * 300 + ".png": png_bytes()},
            "line 1: image 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'… has a name over 255 bytes",
        ),
        (
            [line("s1", "s1.png")],
            {"s1.png": b"\0" * (21 * 1024 * 1024)},
            "line 1: image 's1.png' unpacks to 21 MB, over the 20 MB limit",
        ),
        (
            [line("s1", "s1.png"), line("s2", "s 2.png")],
            {"s1.png": png_bytes()},
            "line 2: image 's 2.png' not found in the zip",
        ),
        (
            [line("s1", "s1.png", image_url="x")],
            {"s1.png": png_bytes()},
            "line 1: unknown field 'image_url'",
        ),
    ],
)
def test_hostile_uploads_get_a_line_numbered_400(root, lines, files, message):
    response = api_import(root, "\n".join(lines), zip_bytes(files))
    assert response.status_code == 400, response.content
    assert any(error.startswith(message) for error in response.json()["errors"])
    assert nothing_written()


def test_encrypted_member_and_bad_crc(root):
    response = api_import(root, line("s1", "s1.png"), zip_encrypted("s1.png", png_bytes()))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "line 1: image 's1.png' is encrypted in the zip; zip it without a password"
    ]
    response = api_import(root, line("s1", "s1.png"), zip_with_bad_crc("s1.png", png_bytes()))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "line 1: image 's1.png' is damaged in the zip (bad CRC-32)"
    ]
    assert nothing_written()


def test_members_the_manifest_does_not_name_are_never_unpacked(root):
    """A bad CRC shows only when a member is read to its end, so a zip whose unnamed members
    are broken imports cleanly: they were never read."""
    archive = zip_with_bad_crc("junk.bin", bytes(range(256)) * 20, {"s1.png": png_bytes()})
    assert zipfile.ZipFile(io.BytesIO(archive)).testzip() == "junk.bin"
    response = api_import(root, line("s1", "s1.png"), archive)
    assert response.status_code == 201, response.content


def test_caps_on_members_and_total(root, settings):
    settings.IMPORT_MAX_MEMBERS = 3
    files = {f"s{k}.png": png_bytes() for k in range(4)}
    response = api_import(root, line("s0", "s0.png"), zip_bytes(files))
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "the zip holds 4 entries, over the limit of 3 (IMPORT_MAX_MEMBERS)"
    ]

    settings.IMPORT_MAX_MEMBERS = 10
    settings.IMPORT_MAX_TOTAL_BYTES = len(png_bytes()) * 3 // 2
    response = api_import(
        root, "\n".join(line(f"s{k}", f"s{k}.png") for k in range(2)), zip_bytes(files)
    )
    assert response.status_code == 400
    assert "over the" in response.json()["errors"][0]
    assert "IMPORT_MAX_TOTAL_BYTES" in response.json()["errors"][0]
    assert nothing_written()


@pytest.mark.parametrize(
    ("manifest", "archive", "message"),
    [
        (b"\xff\xfe{}", zip_bytes({}), "the manifest is not UTF-8 text (byte 0)"),
        (line().encode(), b"PK\x03\x04 not really a zip", "the images file is not a readable zip"),
        (line().encode(), None, "No zip was uploaded, and the manifest names images"),
        (line().encode(), zip_bytes({"../evil.png": png_bytes()}), "unsafe path '../evil.png'"),
    ],
)
def test_unreadable_uploads(root, manifest, archive, message):
    response = api_import(root, manifest, archive)
    assert response.status_code == 400
    assert message in response.json()["errors"][0]


def test_the_manifest_is_checked_before_the_zip_is_opened(root):
    response = api_import(root, "{broken\n" + line(), b"not a zip at all")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "line 1: not valid JSON (Expecting property name enclosed in double quotes at column 2)"
    ]


def test_an_error_report_lists_100_problems_and_counts_the_rest(client, root):
    manifest = "\n".join("not json" for _ in range(100_000))
    response = api_import(root, manifest, zip_bytes({}))
    assert response.status_code == 400
    body = response.json()
    assert len(body["errors"]) == 100 and body["more"] == 99_900
    assert body["errors"][99].startswith("line 100: not valid JSON")
    assert body["detail"] == "100000 problem(s); nothing was imported."
    assert len(response.content) < 20_000

    client.force_login(root)
    response = client.post(
        "/import/",
        {
            "manifest": upload("m.jsonl", manifest.encode()),
            "images": upload("i.zip", zip_bytes({})),
        },
    )
    assert response.status_code == 400
    assert response.content.count(b"<li>") == 101
    assert "… and 99900 more problems" in response.content.decode()
    assert "100000 problems" in response.content.decode()
    assert len(response.content) < 40_000


def test_the_web_page_answers_hostile_zips_with_400_not_500(client, root):
    client.force_login(root)
    for archive, message in [
        (zip_encrypted("s1.png", png_bytes()), "is encrypted in the zip"),
        (zip_bytes({"s1.png": png_header_only(30000, 30000)}), "has more pixels than the limit"),
        (b"garbage", "not a readable zip archive"),
    ]:
        response = client.post(
            "/import/",
            {"manifest": upload("m.jsonl", line().encode()), "images": upload("i.zip", archive)},
        )
        assert response.status_code == 400
        assert message in response.content.decode()
    assert nothing_written()


# --- the command: the same checks on files on disk --------------------------------------------


def run(folder, text: str, capsys):
    manifest = folder / "manifest.jsonl"
    manifest.write_text(text)
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_images", str(manifest))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.mark.parametrize(
    ("make", "text", "message"),
    [
        (
            {"bomb.png": png_header_only(30000, 30000)},
            line("s1", "bomb.png"),
            "line 1: image 'bomb.png' has more pixels than the limit",
        ),
        ({}, deep_json(5000), "line 1: not valid JSON: nested deeper"),
        ({}, line("s1", "y" * 300 + ".png"), "has a name over 255 bytes"),
        ({}, line("s1", "a\u0000.png"), "must not contain a NUL character"),
        (
            {"s1.png": png_html_polyglot("<p>")},
            line("s1", "s1.png") + "\n" + line("s2", "s2.bmp"),
            "line 2: image 's2.bmp' not found",
        ),
        ({"s1.gif": other_format("BMP")}, line("s1", "s1.gif"), "is not a JPEG, PNG, WebP or GIF"),
    ],
)
def test_the_command_refuses_hostile_files_with_exit_2(tmp_path, capsys, make, text, message):
    for name, data in make.items():
        (tmp_path / name).write_bytes(data)
    code, _, err = run(tmp_path, text + "\n", capsys)
    assert code == 2
    assert message in err
    assert "nothing was imported" in err
    assert nothing_written()


def test_the_command_lists_100_problems(tmp_path, capsys):
    code, _, err = run(tmp_path, "\n".join("[" for _ in range(250)), capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 102
    assert lines[100].endswith(": … and 150 more problems")
    assert lines[101] == "250 problem(s); nothing was imported."


def test_the_command_stores_a_misnamed_png_as_png(tmp_path, capsys):
    (tmp_path / "photo.js").write_bytes(png_bytes())
    code, out, _ = run(tmp_path, line("s1", "photo.js") + "\n", capsys)
    assert code == 0, out
    assert Image.objects.get().file.name == "images/s1.png"


def test_query_counts_of_the_photo_and_of_a_refused_import(
    client, root, alice, make_image, django_assert_num_queries
):
    make_image("img-1")
    client.force_login(alice)
    # session, user, her groups, the image
    with django_assert_num_queries(4):
        assert client.get("/images/img-1/photo").status_code == 200
    client.force_login(root)
    manifest = "\n".join("not json" for _ in range(500))
    # session, user, their groups, the recent imports; the refusal reads the list of domains
    # once, whatever the number of lines
    with django_assert_num_queries(5):
        response = client.post(
            "/import/",
            {
                "manifest": upload("m.jsonl", manifest.encode()),
                "images": upload("i.zip", zip_bytes({})),
            },
        )
    assert response.status_code == 400


def test_lines_naming_one_member_count_once_each_against_the_total(root, settings):
    settings.IMPORT_MAX_TOTAL_BYTES = len(png_bytes()) * 3
    manifest = "\n".join(line(f"s{k}", "same.png") for k in range(4))
    response = api_import(root, manifest, zip_bytes({"same.png": png_bytes()}))
    assert response.status_code == 400
    assert "IMPORT_MAX_TOTAL_BYTES" in response.json()["errors"][0]
    settings.IMPORT_MAX_TOTAL_BYTES = len(png_bytes()) * 4
    assert api_import(root, manifest, zip_bytes({"same.png": png_bytes()})).status_code == 201


# --- the manifest's own size ------------------------------------------------------------------


def test_a_manifest_over_its_cap_is_a_413_on_the_api_and_the_page(client, root, settings):
    settings.IMPORT_MAX_MANIFEST_BYTES = 1000
    archive = zip_bytes({"s1.png": png_bytes()})
    big = "\n".join([line()] + [" " * 100] * 10)  # blank lines: valid, but 1,000+ bytes
    assert len(big.encode()) > 1000
    response = api_import(root, big, archive)
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"The manifest is {len(big.encode())} bytes, over the cap of 1000 bytes "
        "(IMPORT_MAX_MANIFEST_BYTES); split it into smaller imports.",
        "field": "manifest",
    }
    client.force_login(root)
    page = client.post(
        "/import/",
        {"manifest": upload("m.jsonl", big.encode()), "images": upload("i.zip", archive)},
    )
    assert page.status_code == 413
    assert "over the cap of 1000 bytes (IMPORT_MAX_MANIFEST_BYTES)" in page.content.decode()
    partial = client.post(
        "/import/",
        {"manifest": upload("m.jsonl", big.encode()), "images": upload("i.zip", archive)},
        HTTP_HX_REQUEST="true",
    )
    assert "over the cap of 1000 bytes" in partial.content.decode()
    assert nothing_written()
    # At the cap, the same manifest is imported.
    settings.IMPORT_MAX_MANIFEST_BYTES = len(big.encode())
    assert api_import(root, big, archive).status_code == 201


def test_the_schema_documents_the_413(client, root):
    client.force_login(root)
    schema = client.get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/images/import/", "/api/images/import/crag-mm/"):
        assert "413" in schema["paths"][path]["post"]["responses"], path


# --- CRAG-MM: Parquet bombs and the texts of a row (issue 22, section 4) ----------------------

REPO = Path(__file__).resolve().parents[2]
# crag_mm_plan in a process of its own, after Django and pyarrow are loaded: the answer, the
# seconds, and how far the peak resident memory grew over what the process had before.
PLAN_IN_CHILD = """
import json, resource, sys, tempfile, time
from pathlib import Path
import django
django.setup()
import pyarrow.parquet  # noqa: F401
from annotation.images.crag_mm import DEFAULT_DOMAIN_MAP, crag_mm_plan
from annotation.images.importing import ImportProblems
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.monotonic()
try:
    crag_mm_plan(Path(sys.argv[1]), split="validation", mapping=DEFAULT_DOMAIN_MAP,
                 workdir=Path(tempfile.mkdtemp()))
    problems = []
except ImportProblems as exc:
    problems = exc.problems
grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({"problems": problems, "seconds": time.monotonic() - start,
                  "grew_mb": grew / 1024}))
"""


def child(code: str, *args: str) -> str:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO), "DJANGO_SETTINGS_MODULE": "gamut_site.settings"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize(
    ("make", "size", "message"),
    [
        (
            "crag_many_turns(path)",
            1_500,
            "row group 1 (1 row(s)): 4,000,000 turns (values of turns.list.element."
            "interaction_id), while a row may hold at most 32",
        ),
        (
            "crag_image_bombs(path, shared=False)",
            30_000,
            "row group 1 (1 row(s)): the image bytes unpack to 64.0 MB, over the 20 MB an "
            "image may have (IMPORT_MAX_FILE_BYTES)",
        ),
        (
            "crag_image_bombs(path, shared=True)",
            4_000,
            "row group 1 (8 row(s)): 2,134 bytes of images unpack to 64.0 MB; photos (JPEG, "
            "PNG, WebP, GIF) are compressed already, so these are not photos",
        ),
    ],
)
def test_parquet_bombs_are_refused_from_the_metadata(tmp_path, make, size, message):
    """A shard of a few KB that decodes to gigabytes (4 million turns in one row: 2.2 GiB in
    11 s before; 8 x 64 MB of image bytes: 1.6 GiB) is refused from its footer, before a value
    is decoded: in milliseconds, the process growing by a few MB."""
    path = tmp_path / "data" / "validation-00000-of-00001.parquet"
    path.parent.mkdir()
    child(f"from tests.hostile_files import *; path = {str(path)!r}; {make}")
    assert path.stat().st_size < size
    answer = json.loads(child(PLAN_IN_CHILD, str(tmp_path)).splitlines()[-1])
    assert any(problem.endswith(message) for problem in answer["problems"]), answer
    assert answer["seconds"] < 1.0, answer
    assert answer["grew_mb"] < 50, answer


def crag_folder(tmp_path, rows, **kwargs):
    from annotation.tests.test_crag_mm import write_dataset

    return write_dataset(tmp_path / "ds", rows, shards=1, **kwargs)


def crag_run(*args):
    from annotation.tests.test_crag_mm import run

    return run(*args)


def test_a_row_over_its_caps_in_a_sound_row_group_is_refused_before_python_sees_it(
    tmp_path, settings
):
    """The footer allows a row group its rows' caps together; one row may still hold more
    than its share. It is measured in Arrow (list length, byte length) and refused without
    being turned into Python objects."""
    import os

    from annotation.tests.test_crag_mm import photo, row

    settings.IMPORT_MAX_FILE_BYTES = 200_000
    many = row("s-many", "animal", "what is it?", data=photo())
    many["turns"] = many["turns"] * 50
    big = row("s-big", "food", "what dish?", data=os.urandom(300_000))
    rows = [many, row("s-ok", "food", "what soup?", data=photo()), big, row("s-3", "food", "?")]
    code, _, err = crag_run(crag_folder(tmp_path, rows))
    assert code == 2
    assert "validation-00000-of-00001.parquet row 1: 50 turns, over the 32 a row may hold" in err
    assert "row 3: the image is 0.3 MB, over the 0 MB limit (IMPORT_MAX_FILE_BYTES)" in err
    assert not Image.objects.exists()


@pytest.mark.parametrize(
    ("query", "answer", "domain", "message"),
    [
        ("q" * 2001, "An answer.", "food", "query is longer than 2000 characters."),
        (
            "x" * 3_000_000,
            "An answer.",
            "food",
            "row group 1 (2 row(s)): turns.list.element.query unpacks to 2.9 MB, over the "
            "1024 KB of text a row may hold",
        ),
        (
            "\x1b[31mwhat?",
            "An answer.",
            "food",
            "row 2 (session s-1): query may not contain U+001B (a control character) at "
            "character 1.",
        ),
        ("what\u202e?", "An answer.", "food", "query may not contain U+202E (right-to-left"),
        ("what?", "a\x00b", "food", "answer (ans_full) may not contain U+0000"),
        ("what?", "a" * 10_001, "food", "answer (ans_full) is longer than 10000 characters."),
        ("what?", "An answer.", "fo\u2066od", "domain may not contain U+2066"),
        ("what?", "An answer.", "f" * 101, "domain is longer than 100 characters."),
    ],
)
def test_the_texts_of_a_row_get_every_imports_rules(tmp_path, query, answer, domain, message):
    from annotation.tests.test_crag_mm import photo, row

    rows = [
        row("s-ok", "animal", "what cat?", data=photo()),
        row("s-1", domain, query, answer=answer, data=photo()),
    ]
    code, _, err = crag_run(crag_folder(tmp_path, rows))
    assert code == 2, err
    assert message in err, err
    assert not Image.objects.exists()


def test_a_bad_session_id_is_shown_escaped(tmp_path):
    from annotation.tests.test_crag_mm import photo, row

    code, _, err = crag_run(crag_folder(tmp_path, [row("s\x1b[2J", "food", "?", data=photo())]))
    assert code == 2
    assert "row 1: the session id must be letters, digits and -_.: (at most 200), not " in err
    assert "'s\\x1b[2J'" in err and "\x1b" not in err


def test_an_image_url_gets_the_text_rules(tmp_path):
    from annotation.tests.test_crag_mm import row

    code, _, err = crag_run(
        crag_folder(tmp_path, [row("s-1", "food", "?", url="https://x.example/\u202egpj.exe")])
    )
    assert code == 2 and "row 1 (session s-1): image_url may not contain U+202E" in err


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "e.jsonl",
            json.dumps({"session_id": "s-cat", "entity": "E" * 600}),
            "entities.jsonl: line 1: entity is longer than 500 characters.",
        ),
        (
            "e.jsonl",
            json.dumps({"session_id": "s-cat", "entity": "Maine\u202eCoon"}),
            "entities.jsonl: line 1: entity may not contain U+202E",
        ),
        (
            "e.jsonl",
            json.dumps({"session_id": "s-cat", "entity": 42}),
            "entities.jsonl: line 1: entity must be text.",
        ),
        (
            "e.jsonl",
            json.dumps({"session_id": "s cat", "entity": "Cat"}),
            "entities.jsonl: line 1: session_id may hold only letters, digits and - _ . :",
        ),
        (
            "e.jsonl",
            "[" * 5000 + "]" * 5000,
            "entities.jsonl: line 1: not valid JSON: nested deeper than the limit of 32",
        ),
        (
            "e.csv",
            "session_id,entity\ns-cat," + "C" * 200_000 + "\n",
            "entities.csv: line 2: not readable as CSV (field larger than field limit",
        ),
    ],
)
def test_a_bad_entities_file_is_a_400_naming_its_line_not_a_500(
    client, root, tmp_path, name, text, message
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.tests.test_crag_mm import ROWS, _uploads, write_dataset

    folder = write_dataset(tmp_path / "ds", ROWS)
    client.force_login(root)
    answer = client.post(
        "/api/images/import/crag-mm/",
        {"shards": _uploads(folder), "entities": SimpleUploadedFile(name, text.encode())},
    )
    assert answer.status_code == 400, answer.content[:500]
    assert any(error.startswith(message) for error in answer.json()["errors"]), answer.json()
    assert not Image.objects.exists()


# --- images small on disk and huge to show (issue 22, section 4) ------------------------------


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: png_blank(9459, 9459),
            "image 'big.png' is 9459x9459 pixels: 89,472,681 pixels for a browser or a model "
            "to decode, over the limit of 50,000,000 (IMAGE_MAX_PIXELS)",
        ),
        (
            lambda: webp_header_only(16383, 5461),
            "image 'big.png' is 16383x5461 pixels; its longer side may be at most 12,000 "
            "(IMAGE_MAX_SIDE)",
        ),
        (
            lambda: gif_frames(5000),
            "image 'big.png' has 5,000 frames, over the limit of 100 (IMAGE_MAX_FRAMES)",
        ),
        (
            lambda: gif_frames(90, 1000, 1000),
            "image 'big.png' is 90 frames of 1000x1000 pixels: 90,000,000 pixels for a browser "
            "or a model to decode, over the limit of 50,000,000 (IMAGE_MAX_PIXELS)",
        ),
        (
            lambda: jpeg_with_icc(16_000_000),
            "image 'big.png' carries 16,000,000 bytes of metadata (ICC profile, EXIF, XMP, "
            "text), over the limit of 1,048,576 (IMAGE_MAX_METADATA_BYTES)",
        ),
    ],
)
def test_images_tiny_on_disk_and_huge_to_show_are_refused(root, make, message):
    data = make()
    assert len(data) < settings_file_cap()
    response = api_import(root, line("s1", "big.png"), zip_bytes({"big.png": data}))
    assert response.status_code == 400, response.content
    assert response.json()["errors"] == [f"line 1: {message}"]
    assert nothing_written()


def settings_file_cap() -> int:
    from django.conf import settings

    return settings.IMPORT_MAX_FILE_BYTES


def test_images_within_the_caps_still_import(root):
    files = {
        "wide.png": png_blank(12000, 400),
        "anim.gif": gif_frames(100, 200, 200),
        "icc.jpg": jpeg_with_icc(500_000),
    }
    manifest = "\n".join(line(f"s-{k}", name) for k, name in enumerate(files))
    response = api_import(root, manifest, zip_bytes(files))
    assert response.status_code == 201, response.content
    assert Image.objects.count() == 3


def test_a_phone_mpo_counts_the_picture_browsers_show(root, settings):
    """A phone's MPO holds a second picture that browsers never show: it is one frame."""
    buffer = io.BytesIO()
    first = PILImage.new("RGB", (30, 30), (1, 2, 3))
    first.save(buffer, format="MPO", save_all=True, append_images=[first.copy()])
    assert PILImage.open(io.BytesIO(buffer.getvalue())).n_frames == 2
    settings.IMAGE_MAX_PIXELS = 1000  # one 30x30 frame fits; two would not
    response = api_import(
        root, line("s1", "phone.jpg"), zip_bytes({"phone.jpg": buffer.getvalue()})
    )
    assert response.status_code == 201, response.content
