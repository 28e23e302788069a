"""export_benchmark --release NAME (issue 25): exactly the release, in both layouts,
byte-identical every time, its manifest and card naming the release and its hash."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from judging.models import ScoringConfig
from judging.releases.services import create_release
from rubrics.models import RubricCheck, RubricVersion
from rubrics.tests.test_hf_export import benchmark  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def export(out_dir, *args) -> str:
    out = io.StringIO()
    call_command("export_benchmark", str(out_dir), "--progress", "never", *args, stdout=out)
    return out.getvalue()


def _files(folder) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _change_everything(questions) -> None:
    """After the release: a new frozen version with another check, a corrected question, a
    dropped one and other scoring settings."""
    first = questions[0]
    version = RubricVersion.objects.create(
        rubric=first.rubric,
        stage="human_1",
        meta_rubric={"snippets": []},
        frozen_at=timezone.now(),
    )
    RubricCheck.objects.create(
        version=version, position=0, check_id="C0", kind="fact", tier="context", text="new"
    )
    first.text = "A corrected question?"
    first.save()
    questions[1].dropped_at = timezone.now()
    questions[1].save()
    ScoringConfig.objects.create(pk=1, partial_credit=0.25, mu=-1.0)


@pytest.mark.parametrize("layout", ["gamut", "huggingface"])
def test_a_release_exports_byte_identical_whatever_changed_since(tmp_path, benchmark, layout):  # noqa: F811
    release = create_release("v1.0", "first")
    out = export(tmp_path / "one", "--layout", layout, "--release", "v1.0")
    assert f"release v1.0, release hash {release.content_hash}" in out
    assert "exported 3 question(s) and 12 check(s)" in out
    _change_everything(benchmark)
    export(tmp_path / "two", "--layout", layout, "--release", "v1.0")
    one, two = _files(tmp_path / "one"), _files(tmp_path / "two")
    assert one == two
    manifest = json.loads(one["manifest.json"])
    assert manifest["release"] == {"name": "v1.0", "content_hash": release.content_hash}
    assert manifest["counts"]["questions"] == 3
    assert manifest["sources"][0]["license"] == "cc-by-nc-4.0"
    if layout == "gamut":
        lines = [json.loads(line) for line in one["gamut.jsonl"].splitlines()]
        assert lines[0]["question"] == "Question number 0: what is it?"
        assert [c["text"] for c in lines[0]["checks"]] == [f"q0 check {i}" for i in range(3)]
        assert [line["id"] for line in lines] == ["hf-0", "hf-1", "hf-2"]
    else:
        card = one["README.md"].decode()
        assert 'gamut_release: "v1.0"' in card
        assert f'gamut_release_hash: "{release.content_hash}"' in card
        assert f"Release v1.0 (release hash `{release.content_hash}`)" in card
        config = json.loads(one["gamut_inspect/config.json"])
        assert config["scoring"] == {"lambda": 0.5, "mu": -2.0, "weights": [0.6, 0.3, 0.1]}
    # the current state exports differently now, and names no release
    export(tmp_path / "now", "--layout", layout)
    now = _files(tmp_path / "now")
    assert now != one
    assert "release" not in json.loads(now["manifest.json"])


def test_an_unknown_release_is_refused(tmp_path, benchmark):  # noqa: F811
    with pytest.raises(CommandError, match="No release named v9"):
        export(tmp_path / "x", "--release", "v9")
    assert not (tmp_path / "x").exists()
