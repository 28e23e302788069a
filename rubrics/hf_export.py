"""The benchmark as a Hugging Face dataset folder, with an inspect_ai task inside.

    data/test-00000-of-00001.parquet   one row per question of the benchmark, sorted by id:
                                       id, image (the Hub's Image struct: bytes and path),
                                       entity, domain, popularity, question, meta_rubric (JSON
                                       text), checks (id, kind, tier, secondary, source, origin,
                                       text, snippets with url/title/text), rubric_stage
    gamut_inspect/                     the inspect_ai task: task.py (rubrics/inspect_package),
                                       fencing.py (llm/fencing.py: the prompts' fences),
                                       config.json (the answer and judge prompts, lambda, mu
                                       and the tier weights in force)
    README.md                          the dataset card: YAML front matter (features, the
                                       config and split, licence carried from the sources,
                                       the content hash), then how to load and run it
    manifest.json                      as in the plain export: counts, files, sources, hash

Byte-identical for the same state, like the plain export: rows sorted, no timestamps, the
Parquet written with fixed options (one row group per 100 rows, zstd), the card and the config
with sorted keys. The content hash covers every file but the card and the manifest (which
carry it): `LC_ALL=C sha256sum data/* gamut_inspect/* | sha256sum`.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any

from .exporting import (
    CHUNK,
    Contents,
    Manifest,
    Progress,
    Sink,
    _image_chunks,
    _manifest,
    _write,
    collect,
    record,
)

DATA_FILE = "data/test-00000-of-00001.parquet"
PACKAGE = "gamut_inspect"
PACKAGE_SOURCE = Path(__file__).resolve().parent / "inspect_package"
# The prompts' fences (standard library only), shipped so the task renders the platform's prompts.
FENCING_SOURCE = Path(__file__).resolve().parent.parent / "llm" / "fencing.py"
ROW_GROUP = 100
NO_SOURCES = "No image came from a dataset import.\n"


def _schema():
    import pyarrow as pa

    snippet = pa.struct(
        [("id", pa.string()), ("url", pa.string()), ("title", pa.string()), ("text", pa.string())]
    )
    check = pa.struct(
        [
            ("id", pa.string()),
            ("kind", pa.string()),
            ("tier", pa.string()),
            ("secondary", pa.bool_()),
            ("source", pa.string()),
            ("origin", pa.string()),
            ("text", pa.string()),
            ("threshold", pa.int64()),
            ("options", pa.list_(pa.string())),
            ("steps", pa.list_(pa.string())),
            ("snippets", pa.list_(snippet)),
        ]
    )
    return pa.schema(
        [
            ("id", pa.string()),
            ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
            ("entity", pa.string()),
            ("domain", pa.string()),
            ("popularity", pa.string()),
            ("question", pa.string()),
            ("meta_rubric", pa.string()),
            ("checks", pa.list_(check)),
            ("rubric_stage", pa.string()),
        ]
    )


def _feature(field) -> dict[str, Any]:
    """The Hub's description (the card's `dataset_info.features`) of one Arrow column, derived
    from the schema so that the two cannot drift apart."""
    import pyarrow as pa

    kind = field.type
    if field.name == "image" and pa.types.is_struct(kind):
        return {"name": field.name, "dtype": "image"}
    if pa.types.is_list(kind):
        item = kind.value_type
        if pa.types.is_struct(item):
            return {
                "name": field.name,
                "list": [_feature(item.field(k)) for k in range(item.num_fields)],
            }
        return {"name": field.name, "sequence": str(item)}
    return {"name": field.name, "dtype": str(kind)}


def features() -> list[dict[str, Any]]:
    return [_feature(field) for field in _schema()]


def _row(entry) -> dict[str, Any]:
    data = record(entry)
    photo = b"".join(_image_chunks(entry))
    return {
        **data,
        "image": {"bytes": photo, "path": Path(entry.image_name).name},
        "meta_rubric": json.dumps(
            data["meta_rubric"], ensure_ascii=False, sort_keys=True, separators=(",", ":")
        ),
        "checks": [
            {
                **{k: c.get(k) for k in ("threshold", "options")},
                "steps": [s if isinstance(s, str) else json.dumps(s) for s in c["steps"]]
                if c.get("steps") is not None
                else None,
                **{
                    k: c[k] for k in ("id", "kind", "tier", "secondary", "source", "origin", "text")
                },
                "snippets": c["snippets"],
            }
            for c in data["checks"]
        ],
    }


def _parquet(contents: Contents, progress: Progress | None) -> Path:
    """The rows written to a scratch file, a row group at a time (the photos make it large)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _schema()
    handle = tempfile.NamedTemporaryFile(suffix=".parquet", delete=False)  # noqa: SIM115
    handle.close()
    path = Path(handle.name)
    entries = contents.entries
    with pq.ParquetWriter(path, schema, compression="zstd", write_statistics=False) as writer:
        batch: list[dict] = []
        for entry in progress(entries) if progress else entries:
            batch.append(_row(entry))
            if len(batch) == ROW_GROUP:
                writer.write_table(pa.Table.from_pylist(batch, schema=schema))
                batch = []
        if batch or not entries:
            writer.write_table(pa.Table.from_pylist(batch, schema=schema))
    return path


def _file_chunks(path: Path):
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            yield chunk


def inspect_config(release: Any = None) -> dict[str, Any]:
    """What the exported task needs of the platform: its prompts and scoring settings (a
    release's frozen ones when a release is exported)."""
    from judging.models import Setting
    from judging.runs.llm_jobs import ANSWER_PROMPT, judge_template
    from judging.verdicts.services import scoring_settings
    from llm.prompts import load_prompt

    head, middle, tail = judge_template().parts()
    scoring = release.scoring_settings() if release is not None else scoring_settings()
    return {
        "answer_prompts": {
            setting.value: load_prompt(ANSWER_PROMPT[setting]).text for setting in Setting
        },
        "judge_prompt": {"head": head, "middle": middle, "tail": tail},
        "scoring": {
            "lambda": scoring.lambda_,
            "mu": scoring.mu,
            "weights": list(scoring.weights),
        },
    }


def _license(sources: list[dict]) -> str:
    licences = sorted({s["license"] for s in sources if s.get("license")})
    if len(licences) == 1:
        return licences[0]
    return "other" if licences else "unknown"


def _card(manifest: dict[str, Any]) -> bytes:
    counts, sources = manifest["counts"], manifest["sources"]
    front = {
        "license": _license(sources),
        "pretty_name": "GAMUT",
        "task_categories": ["visual-question-answering"],
        "tags": ["rubric", "factual-completeness", "multimodal"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "test", "path": DATA_FILE}]}
        ],
        "dataset_info": {
            "features": features(),
            "splits": [{"name": "test", "num_examples": counts["questions"]}],
        },
        **(
            {
                "gamut_release": manifest["release"]["name"],
                "gamut_release_hash": manifest["release"]["content_hash"],
            }
            if "release" in manifest
            else {}
        ),
        "gamut_content_hash": manifest["content_hash"],
        "gamut_sources": sources,
    }
    tiers = ", ".join(f"{n} {t}" for t, n in counts["checks_per_tier"].items())
    source_lines = "".join(
        f"- {s['dataset']} ({s['split']}, revision {s['revision'] or 'unknown'}), licence "
        f"{s['license'] or 'unknown'}: {s['questions']} questions\n"
        for s in sources
    )
    release = manifest.get("release")
    named = (
        f"Release {release['name']} (release hash `{release['content_hash']}`).\n\n"
        if release
        else ""
    )
    body = f"""# GAMUT

{named}{counts["questions"]} everyday photos, one open-ended research question each, and a rubric of
binary checks per question ({counts["checks"]} checks: {tiers}). A judge grades an answer
against each check independently (meets, partially_meets, missing, contradicts); tier scores
and the Gamut score follow the method (see `gamut_inspect/config.json` for lambda, mu and the
tier weights).

Content hash: `{manifest["content_hash"]}` (`LC_ALL=C sha256sum data/* gamut_inspect/* |
sha256sum`).

## Sources

{source_lines or NO_SOURCES}
## Load

```python
from datasets import load_dataset
gamut = load_dataset("path/to/this/folder", split="test")
```

## Run with inspect_ai

```sh
inspect eval gamut_inspect/task.py --model PROVIDER/MODEL --model-role grader=PROVIDER/JUDGE
inspect eval gamut_inspect/task.py -T setting=text_only --model ... --model-role grader=...
```
"""
    yaml = _yaml(front)
    return f"---\n{yaml}---\n\n{body}".encode()


def _yaml(value: Any, indent: int = 0) -> str:
    """A small YAML writer for the card (mappings, lists, scalars as JSON strings, which YAML
    reads as the same strings): deterministic and without a dependency."""
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                lines.append(f"{pad}{key}:\n{_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item)}\n")
        return "".join(lines)
    if isinstance(value, list):
        lines = []
        for item in value:
            if isinstance(item, dict) and item:
                inner = _yaml(item, indent + 1)
                lines.append(f"{pad}- {inner[len(pad) + 2 :]}")
            elif isinstance(item, list) and item:
                lines.append(f"{pad}-\n{_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}- {_scalar(item)}\n")
        return "".join(lines)
    return f"{pad}{_scalar(value)}\n"


def _scalar(value: Any) -> str:
    if value == {}:
        return "{}"
    if value == []:
        return "[]"
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(str(value), ensure_ascii=False)


def export_hf(
    sink: Sink, *, contents: Contents | None = None, progress: Progress | None = None
) -> Manifest:
    contents = contents if contents is not None else collect()
    files: dict[str, str] = {}
    scratch = _parquet(contents, progress)
    try:
        files[DATA_FILE] = _write(sink, DATA_FILE, _file_chunks(scratch))
    finally:
        scratch.unlink(missing_ok=True)
    config = (
        json.dumps(
            inspect_config(contents.release), ensure_ascii=False, sort_keys=True, indent=1
        ).encode()
        + b"\n"
    )
    files[f"{PACKAGE}/config.json"] = _write(sink, f"{PACKAGE}/config.json", [config])
    for name, source in (
        ("__init__.py", PACKAGE_SOURCE / "__init__.py"),
        ("task.py", PACKAGE_SOURCE / "task.py"),
        ("fencing.py", FENCING_SOURCE),
    ):
        files[f"{PACKAGE}/{name}"] = _write(sink, f"{PACKAGE}/{name}", [source.read_bytes()])
    data = _manifest(contents, files)
    data["format"] = "gamut-benchmark-hf"
    _write(sink, "README.md", [_card(data)])
    manifest_bytes = (
        json.dumps(
            data, ensure_ascii=False, sort_keys=True, indent=2, separators=(",", ": ")
        ).encode()
        + b"\n"
    )
    _write(sink, "manifest.json", [manifest_bytes])
    return Manifest(data)


def content_hash_of(folder: Path) -> str:
    """What `LC_ALL=C sha256sum data/* gamut_inspect/* | sha256sum` prints, for checking."""
    names = sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and p.name not in ("README.md", "manifest.json")
    )
    listing = "".join(
        f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in names
    )
    return "sha256:" + hashlib.sha256(listing.encode()).hexdigest()
