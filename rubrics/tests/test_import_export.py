"""import_rubrics (validated whole, all or nothing) and export_benchmark (files byte-identical
for the same state; the zip the Export page and the API make: test_export_jobs.py)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Candidate, CandidateStatus, FinalQuestion
from annotation.questions import services as annotation_services
from rubrics import services
from rubrics.models import Origin, RubricCheck, RubricVersion, Stage
from rubrics.tests.test_compiler import document, fact, flexible

pytestmark = pytest.mark.django_db


# --- helpers --------------------------------------------------------------------------------


def finalize(image, text: str = "What is this dish and how is it made?") -> FinalQuestion:
    candidate = Candidate.objects.create(
        image=image, text=text, origin="import", status=CandidateStatus.ACCEPTED
    )
    return FinalQuestion.objects.create(
        image=image, candidate=candidate, text=text, method="manual"
    )


@pytest.fixture
def photo_question(make_image):
    """A final question whose image has a real PNG in storage."""

    def make(source_id: str = "img-1", **fields) -> FinalQuestion:
        image, _ = make_image(source_id, texts=[], **fields)
        return finalize(image)

    return make


def line(source_id: str = "img-1", meta: dict | None = None, **extra) -> str:
    return json.dumps({"source_id": source_id, "meta_rubric": meta or document(fact()), **extra})


def run_import(tmp_path: Path, lines: list[str], capsys) -> tuple[int, str, str]:
    path = tmp_path / "rubrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SystemExit) as exit_info:
        call_command("import_rubrics", str(path), "--progress", "never")
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def run_export(out_dir: Path, *args: str) -> str:
    out = io.StringIO()
    call_command("export_benchmark", str(out_dir), "--progress", "never", *args, stdout=out)
    return out.getvalue()


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def export_lines(folder: Path) -> list[dict]:
    return [json.loads(raw) for raw in (folder / "gamut.jsonl").read_text().splitlines()]


# --- import: refusals -----------------------------------------------------------------------


def bad_baseline() -> dict:
    return document(fact(), fact("I2"), flexible("I3", baseline=[9]))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "line 2: not valid JSON"),
        ("[1, 2]", "line 2: not a JSON object"),
        (json.dumps({"source_id": "img-2"}), "line 2: missing field 'meta_rubric'"),
        (json.dumps({"meta_rubric": document(fact())}), "line 2: missing field 'source_id'"),
        (line("img-2", rubric="x"), "line 2: unknown field 'rubric'"),
        (line(""), "line 2: source_id must be non-empty text"),
        (line("nope"), "line 2: no image has source_id 'nope'"),
        (line("bare"), "line 2: image 'bare' has no final question yet"),
        (line("gone"), "line 2: the question of 'gone' is dropped (no sound rubric)"),
        (line("img-2", stage="human_1"), "line 2: stage 'human_1' is a human round"),
        (line("img-2", stage="human_2"), "line 2: stage 'human_2' is a human round"),
        (line("img-2", stage="final"), "line 2: unknown stage 'final'"),
        (line("img-2", stage=3), "line 2: stage must be text"),
        (line("done"), "line 2: the rubric of 'done' already has a version of stage imported"),
        (line("img-1"), "line 2: source_id 'img-1' with stage 'imported' repeats line 1"),
        (
            line("img-2", bad_baseline()),
            "line 2: meta_rubric.items[2].baseline[0]: 9 exceeds the 7 options",
        ),
        (line("img-2", [1]), "line 2: meta_rubric: expected an object, got a list"),
    ],
)
def test_one_bad_line_fails_everything(tmp_path, capsys, question, root, make_image, bad, message):
    question("img-1")
    question("img-2")
    make_image("bare", texts=[])
    annotation_services.question_drop(
        user=root, question_id=question("gone").pk, reason="no sound rubric"
    )
    services.rubric_version_create(
        question=question("done"), meta_document=document(fact()), stage=Stage.IMPORTED
    )
    before = RubricVersion.objects.count()
    code, out, err = run_import(tmp_path, [line("img-1"), bad], capsys)
    assert code == 2
    reported = [m for m in err.splitlines() if "line 2:" in m]
    assert any(message in m for m in reported), err
    assert not [m for m in err.splitlines() if "line 1:" in m]  # the good line is not blamed
    assert "1 bad line(s); nothing was imported." in err
    assert RubricVersion.objects.count() == before and out == ""


def test_every_problem_of_every_bad_line_with_its_json_path(tmp_path, capsys, question):
    question("img-1")
    meta = bad_baseline()
    meta["items"][0]["tier"] = "vital"
    code, _, err = run_import(
        tmp_path,
        [line("img-1"), "", line("img-1", meta, stage="llm_draft"), line("img-9", stage="human_1")],
        capsys,
    )
    assert code == 2
    problems = [m.split(": ", 1)[1] for m in err.splitlines() if ": line " in m]
    assert problems == [
        'line 3: meta_rubric.items[0].tier: unknown tier "vital"; expected one of '
        "answer_critical, valuable, context",
        "line 3: meta_rubric.items[2].baseline[0]: 9 exceeds the 7 options",
        "line 4: stage 'human_1' is a human round: those are made in the revision workspace, "
        "not imported (use one of imported, llm_draft, llm_refined_1, llm_refined_2)",
        "line 4: no image has source_id 'img-9'",  # checked even though the line is bad already
    ]
    assert "2 bad line(s); nothing was imported." in err
    assert not RubricVersion.objects.exists()


def test_a_stage_before_the_rubrics_latest_is_refused(tmp_path, capsys, question):
    q = question("img-1")
    services.rubric_version_create(
        question=q, meta_document=document(fact()), stage=Stage.LLM_REFINED_1
    )
    code, _, err = run_import(tmp_path, [line("img-1", stage="llm_draft")], capsys)
    assert code == 2
    assert "line 1: stage 'llm_draft' comes before the rubric's llm_refined_1 version" in err


def test_a_rubric_in_a_human_round_is_refused(tmp_path, capsys, question, dave):
    q = question("img-1")
    services.rubric_version_create(question=q, meta_document=document(fact()), stage=Stage.IMPORTED)
    services.revision_claim(user=dave)
    code, _, err = run_import(tmp_path, [line("img-1", stage="llm_refined_2")], capsys)
    assert code == 2
    assert "line 1: the rubric of 'img-1' is in a human round (human_1) that is not complete" in err


def test_empty_and_missing_files(tmp_path, capsys):
    code, _, err = run_import(tmp_path, [""], capsys)
    assert code == 2 and "the file has no lines" in err
    with pytest.raises(CommandError) as info:
        call_command("import_rubrics", str(tmp_path / "nope.jsonl"))
    assert info.value.returncode == 2


def test_help_explains_the_format(capsys):
    with pytest.raises(SystemExit):
        call_command("import_rubrics", "--help")
    out = capsys.readouterr().out
    assert '{"source_id": "...", "meta_rubric": {...}, "stage": "imported"}' in out
    assert "imported, llm_draft, llm_refined_1, llm_refined_2" in out
    assert "exit status 2" in out


# --- import: success ------------------------------------------------------------------------


def test_import_creates_compiled_versions(tmp_path, capsys, question):
    question("img-1")
    question("img-2")
    meta = document(fact(), flexible("I3"))
    code, out, err = run_import(
        tmp_path,
        [
            line("img-1", meta, stage="llm_refined_1"),
            line("img-2", meta),
            line("img-1", meta, stage="llm_draft"),  # written first: stages go in order
        ],
        capsys,
    )
    assert (code, err) == (0, "")
    draft, refined = RubricVersion.objects.filter(
        rubric__question__image__source_id="img-1"
    ).order_by("id")
    assert (draft.stage, refined.stage) == (Stage.LLM_DRAFT, Stage.LLM_REFINED_1)
    assert refined.parent == draft and draft.parent is None
    assert {v.made_by_model for v in RubricVersion.objects.all()} == {"import"}
    assert all(v.frozen_at is not None for v in RubricVersion.objects.all())
    imported = RubricVersion.objects.get(rubric__question__image__source_id="img-2")
    assert imported.stage == Stage.IMPORTED
    rows = list(imported.checks.order_by("position"))
    assert [r.check_id for r in rows] == ["I1", "I3.base1", *(f"I3.opt{k}" for k in range(1, 8))]
    assert {r.origin for r in rows} == {Origin.COMPILED}
    assert "img-2: imported version" in out and "9 checks" in out
    assert "imported 3 version(s) of 2 rubric(s)" in out


def test_import_adds_a_later_stage_to_an_existing_rubric(tmp_path, capsys, question):
    q = question("img-1")
    first = services.rubric_version_create(
        question=q, meta_document=document(fact()), stage=Stage.LLM_DRAFT
    )
    code, _, _ = run_import(tmp_path, [line("img-1", stage="llm_refined_1")], capsys)
    assert code == 0
    assert RubricVersion.objects.get(stage=Stage.LLM_REFINED_1).parent == first


# --- export ---------------------------------------------------------------------------------


@pytest.fixture
def benchmark(photo_question, root, dave):
    """Four questions: a1 with an imported rubric and a human round complete on it (final:
    human_1), b2 imported with a human draft in progress (final: still imported), c3 dropped,
    d4 without a rubric."""
    meta = document(fact(snippets=["s1", "s2"]), flexible("I3"))
    versions = {}
    for source_id in ("a1", "b2", "c3"):
        question = photo_question(source_id)
        versions[source_id] = services.rubric_version_create(
            question=question, meta_document=meta, stage=Stage.IMPORTED, made_by_model="import"
        )
    photo_question("d4", domain="landmarks", popularity="tail")
    annotation_services.question_drop(
        user=root, question_id=versions["c3"].rubric.question_id, reason="no sound rubric"
    )
    # a1: a complete human round with one edit and one deletion.
    draft = services.revision_claim(user=dave)
    assert draft.rubric == versions["a1"].rubric
    rows = list(draft.checks.order_by("position"))
    services.check_edit_text(
        user=dave,
        version_id=draft.pk,
        check_pk=rows[0].pk,
        text="The response says it is a stew from Burgundy.",
        revision=0,
    )
    services.check_delete(
        user=dave, version_id=draft.pk, check_pk=rows[-1].pk, reason="too obscure", revision=1
    )
    services.revision_complete(user=dave, version_id=draft.pk, revision=2)
    # b2: a human draft in progress, edited but not complete.
    draft_b = services.revision_claim(user=dave)
    assert draft_b.rubric == versions["b2"].rubric
    first_b = draft_b.checks.order_by("position").first()
    services.check_edit_text(
        user=dave,
        version_id=draft_b.pk,
        check_pk=first_b.pk,
        text="Half-finished edit.",
        revision=0,
    )
    return versions


def test_export_writes_the_benchmark(tmp_path, benchmark):
    out_dir = tmp_path / "export"
    out = run_export(out_dir)
    files = files_of(out_dir)
    assert sorted(files) == ["gamut.jsonl", "images/a1.png", "images/b2.png", "manifest.json"]
    a1, b2 = export_lines(out_dir)
    assert sorted(a1) == [
        "checks",
        "domain",
        "entity",
        "id",
        "image",
        "meta_rubric",
        "popularity",
        "question",
        "rubric_stage",
    ]
    assert (a1["id"], a1["image"], a1["entity"], a1["domain"], a1["popularity"]) == (
        "a1",
        "images/a1.png",
        "Beef bourguignon",
        "food",
        "head",
    )
    assert a1["question"] == "What is this dish and how is it made?"
    assert a1["meta_rubric"] == benchmark["a1"].meta_rubric
    # a1's final version is its complete human round: the edit is in, the deletion is out.
    assert a1["rubric_stage"] == "human_1"
    first = a1["checks"][0]
    assert first == {
        "id": "I1",
        "kind": "fact",
        "tier": "answer_critical",
        "secondary": False,
        "source": "I1",
        "origin": "edited",
        "text": "The response says it is a stew from Burgundy.",
        "snippets": [
            {"id": "s1", "url": "https://example.org/a", "title": "A", "text": "evidence a"},
            {"id": "s2", "url": "https://example.org/b", "title": "", "text": "evidence b"},
        ],
    }
    assert [c["id"] for c in a1["checks"]] == [
        "I1",
        "I3.base1",
        *(f"I3.opt{k}" for k in range(1, 7)),
    ]
    coverage = a1["checks"][1]
    assert coverage["threshold"] == 2 and len(coverage["options"]) == 7
    assert "steps" not in coverage and "threshold" not in first
    # b2's human draft is in progress: its parent, the frozen imported version, is exported.
    assert b2["rubric_stage"] == "imported"
    assert b2["checks"][0]["text"] != "Half-finished edit."
    assert b2["checks"][0]["origin"] == "compiled" and len(b2["checks"]) == 9
    assert files["images/a1.png"] == benchmark["a1"].rubric.question.image.file.open().read()
    manifest = json.loads(files["manifest.json"])
    assert manifest["counts"] == {
        "questions": 2,
        "checks": 17,
        "checks_per_tier": {"answer_critical": 4, "valuable": 13, "context": 0},
        "questions_per_rubric_stage": {
            "imported": 1,
            "llm_draft": 0,
            "llm_refined_1": 0,
            "human_1": 1,
            "llm_refined_2": 0,
            "human_2": 0,
        },
        "left_out": {"dropped": 1, "without_rubric": 1},
    }
    listing = "".join(
        f"{hashlib.sha256(files[name]).hexdigest()}  {name}\n"
        for name in ["gamut.jsonl", "images/a1.png", "images/b2.png"]
    )
    assert manifest["content_hash"] == "sha256:" + hashlib.sha256(listing.encode()).hexdigest()
    assert manifest["files"]["gamut.jsonl"] == hashlib.sha256(files["gamut.jsonl"]).hexdigest()
    assert manifest["sources"] == []  # no image came from a dataset import
    assert "exported 2 question(s) and 17 check(s)" in out
    assert "1 dropped question(s), 1 without a finished rubric" in out


def test_export_carries_the_source_datasets_licence_and_revision(tmp_path, benchmark):
    from annotation.models import Image, ImportBatch

    batch = ImportBatch.objects.create(
        source="command",
        file_name="crag",
        dataset="crag-mm",
        split="validation",
        revision="v0.1.2",
        license="cc-by-nc-4.0",
    )
    Image.objects.filter(source_id="a1").update(import_batch=batch)
    run_export(tmp_path / "export")
    manifest = json.loads((tmp_path / "export" / "manifest.json").read_text())
    assert manifest["sources"] == [
        {
            "dataset": "crag-mm",
            "split": "validation",
            "revision": "v0.1.2",
            "license": "cc-by-nc-4.0",
            "questions": 1,
        }
    ]


def test_export_format_is_fixed(tmp_path, benchmark):
    out_dir = tmp_path / "export"
    run_export(out_dir)
    data = (out_dir / "gamut.jsonl").read_bytes()
    assert b"\r" not in data and data.endswith(b"}\n") and data.count(b"\n") == 2
    for raw in data.decode().splitlines():
        obj = json.loads(raw)
        assert raw == json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert list(json.loads((out_dir / "manifest.json").read_text())) == sorted(
        json.loads((out_dir / "manifest.json").read_text())
    )


def test_two_exports_are_byte_identical(tmp_path, benchmark):
    run_export(tmp_path / "one")
    run_export(tmp_path / "two")
    one, two = files_of(tmp_path / "one"), files_of(tmp_path / "two")
    assert sorted(one) == sorted(two)
    for name in one:
        assert one[name] == two[name], name


def test_export_changes_when_the_benchmark_does(tmp_path, benchmark, root):
    run_export(tmp_path / "one")
    annotation_services.question_drop(
        user=root, question_id=benchmark["b2"].rubric.question_id, reason="wrong entity"
    )
    run_export(tmp_path / "two")
    assert [line["id"] for line in export_lines(tmp_path / "two")] == ["a1"]
    one = json.loads((tmp_path / "one" / "manifest.json").read_text())
    two = json.loads((tmp_path / "two" / "manifest.json").read_text())
    assert one["content_hash"] != two["content_hash"]
    assert two["counts"]["left_out"] == {"dropped": 2, "without_rubric": 1}


def test_export_refuses_a_non_empty_folder_unless_forced(tmp_path, benchmark):
    out_dir = tmp_path / "export"
    out_dir.mkdir()
    (out_dir / "notes.txt").write_text("keep me")
    with pytest.raises(CommandError) as info:
        run_export(out_dir)
    assert info.value.returncode == 2
    assert "is not empty; nothing was written" in str(info.value)
    assert "--force" in str(info.value)
    assert files_of(out_dir) == {"notes.txt": b"keep me"}
    # --force replaces an earlier export only, not a folder that never was one.
    with pytest.raises(CommandError, match="not an earlier export"):
        run_export(out_dir, "--force")
    assert files_of(out_dir) == {"notes.txt": b"keep me"}
    (out_dir / "notes.txt").unlink()
    run_export(out_dir)
    run_export(out_dir, "--force")
    assert sorted(files_of(out_dir)) == [
        "gamut.jsonl",
        "images/a1.png",
        "images/b2.png",
        "manifest.json",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "media"]  # no leftovers


def test_export_into_an_empty_folder_needs_no_force(tmp_path, benchmark):
    out_dir = tmp_path / "export"
    out_dir.mkdir()
    run_export(out_dir)
    assert (out_dir / "manifest.json").is_file()


def test_a_failed_export_leaves_nothing_half_written(tmp_path, benchmark):
    out_dir = tmp_path / "export"
    run_export(out_dir)
    before = files_of(out_dir)
    benchmark["b2"].rubric.question.image.file.delete(save=False)
    with pytest.raises(CommandError, match="the photo of 'b2' is missing"):
        run_export(out_dir, "--force")
    assert files_of(out_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "media"]


def test_odd_source_ids_get_safe_unique_file_names(tmp_path, photo_question):
    for source_id in ("wiki/Eiffel Tower", "Case", "case"):
        services.rubric_version_create(
            question=photo_question(source_id), meta_document=document(fact()), stage=Stage.IMPORTED
        )
    run_export(tmp_path / "export")
    names = {line["id"]: line["image"] for line in export_lines(tmp_path / "export")}
    assert list(names) == ["Case", "case", "wiki/Eiffel Tower"]  # code-point order
    assert names["wiki/Eiffel Tower"].startswith("images/wikieiffel-tower-")
    assert names["Case"] != names["case"] and names["Case"].lower() != names["case"].lower()
    assert all((tmp_path / "export" / name).is_file() for name in names.values())


def test_empty_benchmark_exports_an_empty_file(tmp_path, db):
    run_export(tmp_path / "export")
    assert (tmp_path / "export" / "gamut.jsonl").read_bytes() == b""
    assert (
        json.loads((tmp_path / "export" / "manifest.json").read_text())["counts"]["questions"] == 0
    )


def test_export_leaves_checks_untouched(tmp_path, benchmark):
    before = list(RubricCheck.objects.order_by("id").values())
    run_export(tmp_path / "export")
    assert list(RubricCheck.objects.order_by("id").values()) == before


@pytest.mark.parametrize("depth", [100, 5000])
def test_json_nested_deep_is_a_line_numbered_problem(tmp_path, capsys, question, depth):
    question("img-1")
    deep = '{"source_id": "img-1", "meta_rubric": ' + "[" * depth + "]" * depth + "}"
    code, _, err = run_import(tmp_path, [line("img-1"), deep], capsys)
    assert code == 2
    assert f"{tmp_path / 'rubrics.jsonl'}: line 2: " in err
    assert "nested deeper than the limit of 32 levels" in err
    assert "Traceback" not in err and not RubricVersion.objects.exists()


def test_a_long_bad_file_lists_100_problems_and_counts_the_rest(tmp_path, capsys):
    code, _, err = run_import(tmp_path, ["{"] * 150, capsys)
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 102
    assert lines[99].endswith(
        "line 100: not valid JSON (Expecting property name enclosed in double quotes at column 2)"
    )
    assert lines[100].endswith(": … and 50 more problems")
    assert lines[101] == "150 bad line(s); nothing was imported."


def test_a_javascript_snippet_url_is_refused_with_its_json_path(tmp_path, capsys, question):
    question("img-1")
    meta = document(fact(snippets=["s1"]))
    meta["snippets"][0]["url"] = "javascript:alert(document.domain)"
    code, _, err = run_import(tmp_path, [line("img-1", meta)], capsys)
    assert code == 2
    assert (
        "line 1: meta_rubric.snippets[0].url: must be an http or https URL, not "
        '"javascript:alert(document.domain)"'
    ) in err
    assert not RubricVersion.objects.exists()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (line("a/b"), "line 2: source_id may hold only letters, digits and - _ . : (not 'a/b')."),
        (
            line("img-2", document(fact(statement="Beef\x00 stew"))),
            "line 2: meta_rubric.items[0].statement may not contain U+0000",
        ),
        (
            line("img-2", document(fact(statement="Beef \u202eweets"))),
            "line 2: meta_rubric.items[0].statement may not contain U+202E "
            "(right-to-left override)",
        ),
        (
            line("img-2", document(fact(statement="x" * 20_001))),
            "line 2: meta_rubric.items[0].statement is longer than 20000 characters.",
        ),
        (
            line("img-2", {**document(fact()), "entity\x1b": "x"}),
            "line 2: meta_rubric has a key that may not contain U+001B",
        ),
    ],
)
def test_hostile_texts_are_line_numbered_problems_and_nothing_is_written(
    tmp_path, capsys, question, bad, message
):
    question("img-1")
    question("img-2")
    code, out, err = run_import(tmp_path, [line("img-1"), bad], capsys)
    assert code == 2
    assert any(m.endswith(f"rubrics.jsonl: {message}") or message in m for m in err.splitlines())
    assert "1 bad line(s); nothing was imported." in err
    assert not RubricVersion.objects.exists() and out == ""
