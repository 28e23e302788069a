"""CRAG-MM import: a small dataset written with pyarrow in the Hub's layout (Parquet shards under
data/, image structs with bytes, turns and answers), imported from the command line."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.management import call_command
from PIL import Image as PILImage

from annotation.images.crag_mm import read_revision
from annotation.models import Candidate, DomainMapping, Image, ImportBatch

IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
TURN = pa.struct(
    [
        ("interaction_id", pa.string()),
        ("domain", pa.string()),
        ("query_category", pa.string()),
        ("dynamism", pa.string()),
        ("query", pa.string()),
        ("image_quality", pa.string()),
    ]
)
ANSWER = pa.struct([("interaction_id", pa.string()), ("ans_full", pa.string())])
SCHEMA = pa.schema(
    [
        ("session_id", pa.string()),
        ("image", IMAGE),
        ("image_url", pa.string()),
        ("turns", pa.list_(TURN)),
        ("answers", pa.list_(ANSWER)),
    ]
)


def photo(kind: str = "JPEG", color=(90, 140, 200)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (40, 30), color).save(out, format=kind)
    return out.getvalue()


def row(
    session: str,
    domain,
    query: str,
    *,
    data: bytes | None = None,
    url: str | None = None,
    answer: str = "An answer.",
) -> dict:
    return {
        "session_id": session,
        "image": {"bytes": data, "path": None} if data is not None else None,
        "image_url": url,
        "turns": [
            {
                "interaction_id": f"{session}-0",
                "domain": domain,
                "query_category": "simple",
                "dynamism": "static",
                "query": query,
                "image_quality": "normal",
            }
        ],
        "answers": [{"interaction_id": f"{session}-0", "ans_full": answer}],
    }


ROWS = [
    row("s-cat", "animal", "what breed is this cat?", data=photo("JPEG")),
    row("s-soup", "food", "how is this soup made?", data=photo("PNG", (200, 90, 40))),
    row("s-math", "math and science", "what is this equation?", data=photo()),
    row("s-car", "vehicle", "what car is this?", url="https://example.org/car.jpg"),
    row("s-mug", "shopping", "where can I buy this mug?", data=photo("WEBP", (10, 200, 10))),
]


def write_dataset(folder, rows, *, split="validation", shards=2, schema=SCHEMA, metadata=None):
    (folder / "data").mkdir(parents=True, exist_ok=True)
    if metadata:
        schema = schema.with_metadata(metadata)
    per = -(-len(rows) // shards)
    for index in range(shards):
        part = rows[index * per : (index + 1) * per]
        table = pa.Table.from_pylist(part, schema=schema)
        pq.write_table(table, folder / "data" / f"{split}-{index:05d}-of-{shards:05d}.parquet")
    (folder / "README.md").write_text("---\nlicense: cc-by-nc-4.0\npretty_name: CRAG-MM\n---\n")
    return folder


def entities_file(tmp_path, lines) -> str:
    path = tmp_path / "entities.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return str(path)


def run(*args):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    try:
        call_command(
            "import_crag_mm", *map(str, args), "--progress", "never", stdout=out, stderr=err
        )
    except SystemExit as exc:
        code = exc.code
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def dataset(tmp_path):
    return write_dataset(tmp_path / "crag-mm-single-turn-public", ROWS)


@pytest.mark.django_db
def test_the_dry_run_shows_the_domain_table_and_writes_nothing(dataset, tmp_path):
    code, out, err = run(dataset, "--dry-run", "--revision", "v0.1.2")
    assert code == 0, err
    assert "5 row(s) in 2 shard(s) of split validation" in out
    assert "animal -> animals: 1" in out
    assert "math and science -> (left out): 1" in out
    assert "shopping -> consumer products: 1" in out
    assert "to import: 3 image(s); 3 without an entity" in out
    assert "only an image_url" in out and "https://example.org/car.jpg" in out
    assert "revision: v0.1.2; licence: cc-by-nc-4.0" in out
    assert not Image.objects.exists() and not ImportBatch.objects.exists()


@pytest.mark.django_db
def test_the_import_writes_images_with_their_source_and_is_idempotent(dataset, tmp_path):
    entities = entities_file(
        tmp_path,
        [
            {"session_id": "s-cat", "entity": "Maine Coon", "popularity": "torso"},
            {"session_id": "s-soup", "entity": "Borscht", "popularity": "head", "egocentric": True},
            {"session_id": "s-elsewhere", "entity": "Nothing", "popularity": "tail"},
        ],
    )
    code, out, err = run(dataset, "--entities", entities, "--revision", "abc123")
    assert code == 0, err
    assert "imported 3 image(s)" in out
    assert "names 1 session(s) not in this split" in out
    cat = Image.objects.get(source_id="s-cat")
    assert (cat.entity, cat.domain, cat.popularity, cat.entity_confirmed) == (
        "Maine Coon",
        "animals",
        "torso",
        True,
    )
    assert cat.source_domain == "animal" and cat.source_query == "what breed is this cat?"
    assert cat.source_answer == "An answer."
    assert cat.file.name.endswith(".jpg")
    assert Image.objects.get(source_id="s-soup").egocentric is True
    mug = Image.objects.get(source_id="s-mug")
    assert (mug.entity, mug.popularity, mug.entity_confirmed) == ("", "unknown", False)
    with mug.file.open("rb") as fh, PILImage.open(fh) as img:
        assert img.format == "WEBP"
    batch = ImportBatch.objects.get()
    assert (batch.dataset, batch.split, batch.revision, batch.license) == (
        "crag-mm",
        "validation",
        "abc123",
        "cc-by-nc-4.0",
    )
    assert not Image.objects.filter(source_id__in=["s-math", "s-car"]).exists()
    assert not Candidate.objects.exists()  # the CRAG-MM query is kept, not made a candidate
    code, out, _ = run(dataset, "--entities", entities)
    assert code == 0 and "imported 0 image(s), skipped 3" in out
    assert Image.objects.count() == 3 and ImportBatch.objects.count() == 1


@pytest.mark.django_db
def test_a_bad_row_fails_the_whole_import_naming_shard_and_row(tmp_path):
    rows = [
        *ROWS[:2],
        row("s-bad", "food", "what is this?", data=b"GIF89a not really"),
        row("s-cat", "animal", "again?", data=photo()),
    ]
    folder = write_dataset(tmp_path / "ds", rows, shards=1)
    code, _, err = run(folder)
    assert code == 2
    assert (
        "data/validation-00000-of-00001.parquet row 3 (session s-bad): image 's-bad' is not "
        "a JPEG, PNG, WebP or GIF image" in err
    )
    assert (
        "row 4 (session s-cat): session_id repeats data/validation-00000-of-00001."
        "parquet row 1" in err
    )
    assert "nothing was imported" in err
    assert not Image.objects.exists()


@pytest.mark.django_db
def test_missing_columns_are_named(tmp_path):
    schema = pa.schema([("session_id", pa.string()), ("image", IMAGE)])
    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist([{"session_id": "a", "image": None}], schema=schema),
        folder / "data" / "validation-00000-of-00001.parquet",
    )
    code, _, err = run(folder)
    assert code == 2
    assert "missing column(s) turns (it has session_id, image)" in err
    code, _, err = run(tmp_path, "--split", "public_test")
    assert code == 2 and "has no data/public_test-*.parquet shard" in err


@pytest.mark.django_db
def test_domains_stored_as_class_labels_are_named_from_the_hub_metadata(tmp_path):
    names = ["animal", "other", "food"]
    turn = pa.struct(
        [("interaction_id", pa.string()), ("domain", pa.int64()), ("query", pa.string())]
    )
    schema = pa.schema([("session_id", pa.string()), ("image", IMAGE), ("turns", pa.list_(turn))])
    features = {
        "info": {"features": {"turns": [{"domain": {"names": names, "_type": "ClassLabel"}}]}}
    }
    rows = [
        {
            "session_id": "n1",
            "image": {"bytes": photo(), "path": None},
            "turns": [{"interaction_id": "i", "domain": 2, "query": "what dish?"}],
        },
        {
            "session_id": "n2",
            "image": {"bytes": photo(), "path": None},
            "turns": [{"interaction_id": "i", "domain": 1, "query": "what thing?"}],
        },
    ]
    folder = write_dataset(
        tmp_path / "ds",
        rows,
        schema=schema,
        shards=1,
        metadata={b"huggingface": json.dumps(features).encode()},
    )
    # An admin maps "other" to a domain not in the list: refused, naming the mapping.
    DomainMapping.objects.filter(label="other").update(domain="everyday objects")
    code, out, err = run(folder)
    assert code == 2 and "maps CRAG-MM's 'other' to 'everyday objects'" in err
    assert not Image.objects.exists()
    # An admin maps "other" after all, to a domain of the list.
    DomainMapping.objects.filter(label="other").update(domain="objects")
    code, out, err = run(folder)
    assert code == 0, err
    assert dict(Image.objects.values_list("source_id", "domain")) == {
        "n1": "food",
        "n2": "objects",
    }
    assert Image.objects.get(source_id="n1").source_answer == ""  # no answers column


@pytest.mark.django_db
def test_a_bad_entities_file_names_its_lines(dataset, tmp_path):
    entities = entities_file(
        tmp_path,
        [
            {"session_id": "s-cat", "entity": "Cat", "popularity": "famous"},
            {"session_id": "s-cat", "entity": "Cat"},
            {"entity": "No session"},
        ],
    )
    code, _, err = run(dataset, "--entities", entities)
    assert code == 2
    assert "entities.jsonl: line 1: popularity must be head, torso, tail or unknown" in err
    assert "line 2: session_id 's-cat' repeats an earlier line" not in err  # line 1 was bad
    assert "line 3: missing session_id" in err
    assert not Image.objects.exists()


def test_the_revision_is_read_from_a_hub_cache_snapshot(tmp_path):
    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = tmp_path / "datasets--crag-mm" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    assert read_revision(snapshot) == commit
    local = tmp_path / "local"
    meta = local / ".cache" / "huggingface" / "download" / "data"
    meta.mkdir(parents=True)
    (meta / "validation-00000-of-00001.parquet.metadata").write_text(f"{commit}\netag\n")
    assert read_revision(local) == commit
    assert read_revision(tmp_path) == ""


def _uploads(folder):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return [SimpleUploadedFile(p.name, p.read_bytes()) for p in sorted((folder / "data").iterdir())]


@pytest.mark.django_db
def test_the_page_dry_runs_then_imports_uploaded_shards(client, dataset, root, alice):
    from django.urls import reverse

    url = reverse("import_crag_mm")
    client.force_login(alice)
    assert client.get(url).status_code == 403
    client.force_login(root)
    assert client.get(url).status_code == 200
    page = client.post(url, {"shards": _uploads(dataset), "split": "validation", "dry_run": "1"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Dry run: nothing was written" in html and "animal -&gt; animals: 1" in html
    assert not Image.objects.exists()
    page = client.post(
        url, {"shards": _uploads(dataset), "split": "validation", "revision": "v0.1.2"}
    )
    assert "Imported 3 images, skipped 0" in page.content.decode()
    assert ImportBatch.objects.get().source == "web"
    bad = client.post(url, {"shards": _uploads(dataset), "split": "public_test"})
    assert bad.status_code == 400
    assert "a shard of split public_test is named public_test-*.parquet" in bad.content.decode()


@pytest.mark.django_db
def test_the_api_imports_shards_for_admins(client, dataset, root, alice):
    from django.urls import reverse

    url = reverse("api_images_import_crag_mm")
    client.force_login(alice)
    assert client.post(url, {"shards": _uploads(dataset)}).status_code == 403
    client.force_login(root)
    dry = client.post(url, {"shards": _uploads(dataset), "dry_run": "true"})
    assert dry.status_code == 200
    assert dry.json()["to_import"] == 3 and dry.json()["url_only"] == 1
    done = client.post(url, {"shards": _uploads(dataset)})
    assert done.status_code == 201
    assert sorted(done.json()["imported"]) == ["s-cat", "s-mug", "s-soup"]
    nothing = client.post(url, {})
    assert nothing.status_code == 400
    assert nothing.json() == {"errors": ["no Parquet shard was uploaded"]}


@pytest.mark.django_db
def test_an_entities_file_over_the_cap_is_a_413(client, dataset, root, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    settings.IMPORT_MAX_MANIFEST_BYTES = 100
    client.force_login(root)
    entities = json.dumps({"session_id": "x", "entity": "y" * 200}).encode()
    answer = client.post(
        reverse("api_images_import_crag_mm"),
        {"shards": _uploads(dataset), "entities": SimpleUploadedFile("e.jsonl", entities)},
    )
    assert answer.status_code == 413 and answer.json()["field"] == "entities"
    page = client.post(
        reverse("import_crag_mm"),
        {"shards": _uploads(dataset), "entities": SimpleUploadedFile("e.jsonl", entities)},
    )
    assert page.status_code == 413 and "IMPORT_MAX_MANIFEST_BYTES" in page.content.decode()
    assert not Image.objects.exists()


@pytest.mark.django_db
def test_a_revision_over_its_limit_is_refused_in_words_never_cut(client, dataset, root):
    from django.urls import reverse

    from core.text import MAX_DATASET_REVISION

    client.force_login(root)
    page = client.get(reverse("import_crag_mm")).content.decode()
    assert f'name="revision" maxlength="{MAX_DATASET_REVISION}"' in page
    assert f'data-limit="{MAX_DATASET_REVISION}"' in page  # the live counter after it
    long = "v" * (MAX_DATASET_REVISION + 1)
    for url in (reverse("import_crag_mm"), reverse("api_images_import_crag_mm")):
        answer = client.post(url, {"shards": _uploads(dataset), "revision": long})
        assert answer.status_code == 400
        assert "The revision is longer than 100 characters (101 sent): shorten it." in (
            answer.content.decode()
        )
    code, _, err = run(dataset, "--revision", long)  # the command too
    assert code == 2 and "The revision is longer than 100 characters" in err
    assert not Image.objects.exists() and not ImportBatch.objects.exists()
