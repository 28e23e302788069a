"""The benchmark export: gamut.jsonl, the images, and manifest.json.

    gamut.jsonl     one JSON object a line, one line per question in the benchmark (a final
                    question that is not dropped and whose rubric has a frozen version),
                    sorted by source id:
                    {"id", "image", "entity", "domain", "popularity", "question",
                     "meta_rubric", "checks": [...], "rubric_stage"}
                    "image" is the image's file name inside the export, images/<name>.<ext>;
                    "meta_rubric" and "checks" are those of the final version
                    (services.final_version: a human round in progress is not part of it). A
                    check: {"id", "kind", "tier", "secondary", "source", "origin", "text",
                    "snippets": [{"id", "url", "title", "text"}]} plus "threshold" and
                    "options" (coverage checks) or "steps" (sequence checks).
    images/         the photos, named as gamut.jsonl names them
    manifest.json   format and version, counts, each file's SHA-256, and the content hash

With a release (`collect(release)`, `export_benchmark --release NAME`), exactly what the
release froze: its questions (dropped since or not) on its rubric versions, with the question
text, entity, domain, popularity and image source as the release holds them; the manifest
names the release and its content hash ("release": {"name", "content_hash"}), and the scoring
settings of the Hugging Face layout are the release's.

Two exports of the same state are byte-identical: no timestamps, sorted keys, fixed separators,
"\\n" line ends, lines sorted by source id in code-point order (not by a database collation).
The content hash is the SHA-256 of the lines "<sha256 of the file>  <path>\\n" of every file
but the manifest, paths sorted by code point (gamut.jsonl first): what
`LC_ALL=C sha256sum gamut.jsonl images/* | sha256sum` prints in the export's folder.

The export is written through a `Sink` (a folder, or a zip for the API); each writer hashes what
it writes, so no file is read twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

from django.db.models import QuerySet
from django.utils.text import slugify

from annotation.models import FinalQuestion

from . import services
from .compiler import TIERS
from .models import STAGE_ORDER, RubricCheck, RubricVersion

FORMAT = "gamut-benchmark"
FORMAT_VERSION = 1
DATA_FILE = "gamut.jsonl"
MANIFEST_FILE = "manifest.json"
IMAGES_DIR = "images"
CHUNK = 1024 * 1024
# Zip entries carry a date; a fixed one (the earliest a zip can hold) keeps archives identical.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)
# A source id is used as it is for its file name when it is this plain.
PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,119}$")

Progress = Callable[[Iterable], Iterable]


class ExportError(Exception):
    """The export cannot be made as asked; the message says why, for people."""


# --- what goes in ---------------------------------------------------------------------------


@dataclass
class Entry:
    """One question of the benchmark, read from the database."""

    question: FinalQuestion
    version: RubricVersion
    checks: list[RubricCheck] = field(default_factory=list)
    image_name: str = ""  # its path inside the export
    frozen: Any = None  # the judging.models.ReleaseQuestion it comes from, in a release export


@dataclass
class Contents:
    entries: list[Entry]
    dropped: int
    without_rubric: int
    release: Any = None  # the judging.models.Release exported, or None: the current state


def _questions() -> QuerySet[FinalQuestion]:
    return FinalQuestion.objects.select_related("image__import_batch", "rubric")


def collect(release: Any = None) -> Contents:
    """Every question of the benchmark with its final version and that version's live checks
    (or, given a judging.models.Release, every question it holds on the version it froze).

    One query per rubric for its final version (services.final_version is what decides it) and
    one per 500 versions for the checks. A frozen version's checks never change, so reading
    them apart from the version is safe without a transaction (one here would hold SQLite's
    write lock for the whole read)."""
    entries: list[Entry] = []
    dropped = without_rubric = 0
    if release is not None:
        for row in release.questions.select_related(
            "question__image__import_batch", "question__rubric", "version"
        ):
            entries.append(Entry(row.question, row.version, frozen=row))
    for question in _questions() if release is None else []:
        if question.dropped_at is not None:
            dropped += 1
            continue
        rubric = getattr(question, "rubric", None)
        version = services.final_version(rubric) if rubric is not None else None
        if version is None:
            without_rubric += 1
            continue
        entries.append(Entry(question, version))
    entries.sort(key=lambda entry: entry.question.image.source_id)
    by_version = {entry.version.pk: entry for entry in entries}
    ids = list(by_version)
    for start in range(0, len(ids), 500):
        rows = RubricCheck.objects.filter(
            version_id__in=ids[start : start + 500], deleted_at__isnull=True
        ).order_by("version_id", "position", "id")
        for row in rows:
            by_version[row.version_id].checks.append(row)
    _name_images(entries)
    return Contents(entries, dropped, without_rubric, release)


def _name_images(entries: list[Entry]) -> None:
    """images/<source id>.<ext>; a source id that is no plain file name (slashes, spaces,
    accents), or that differs from another only in case (a clash on macOS and Windows), gets
    a slug and a short hash of itself instead, so names stay unique and stable."""
    stems = {
        entry.question.image.source_id: _stem(entry.question.image.source_id) for entry in entries
    }
    folded = Counter(stem.casefold() for stem in stems.values())
    for entry in entries:
        source_id = entry.question.image.source_id
        stem = stems[source_id]
        if folded[stem.casefold()] > 1:
            stem = _hashed_stem(source_id)
        entry.image_name = f"{IMAGES_DIR}/{stem}{_suffix(entry)}"


def _stem(source_id: str) -> str:
    return source_id if PLAIN_NAME.match(source_id) else _hashed_stem(source_id)


def _hashed_stem(source_id: str) -> str:
    digest = hashlib.sha256(source_id.encode()).hexdigest()[:12]
    return f"{slugify(source_id)[:80] or 'image'}-{digest}"


def _suffix(entry: Entry) -> str:
    suffix = PurePosixPath(entry.question.image.file.name or "").suffix.lower()
    if not re.fullmatch(r"\.[a-z0-9]{1,8}", suffix):
        raise ExportError(
            f"the photo of {entry.question.image.source_id!r} is stored as "
            f"{entry.question.image.file.name!r}, with no file extension to name it by"
        )
    return suffix


# --- the records ----------------------------------------------------------------------------


def record(entry: Entry) -> dict[str, Any]:
    """The gamut.jsonl object of one question."""
    question, image, version = entry.question, entry.question.image, entry.version
    snippets = {s["id"]: s for s in version.meta_rubric.get("snippets", [])}
    shown = entry.frozen or image  # a release's frozen values, or the image's as they are
    return {
        "id": image.source_id,
        "image": entry.image_name,
        "entity": shown.entity,
        "domain": shown.domain,
        "popularity": shown.popularity,
        "question": entry.frozen.text if entry.frozen else question.text,
        "meta_rubric": version.meta_rubric,
        "checks": [_check(row, snippets, image.source_id) for row in entry.checks],
        "rubric_stage": version.stage,
    }


def _check(row: RubricCheck, snippets: dict[str, dict], source_id: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": row.check_id,
        "kind": row.kind,
        "tier": row.tier,
        "secondary": row.secondary,
        "source": row.source,
        "origin": row.origin,
        "text": row.text,
        "snippets": [_snippet(sid, snippets, source_id, row.check_id) for sid in row.snippets],
    }
    if row.threshold is not None:
        data["threshold"] = row.threshold
    if row.options is not None:
        data["options"] = row.options
    if row.steps is not None:
        data["steps"] = row.steps
    return data


def _snippet(sid: str, snippets: dict[str, dict], source_id: str, check_id: str) -> dict:
    found = snippets.get(sid)
    if found is None:
        # Cannot happen for a validated meta-rubric; if it does, evidence would be lost
        # silently, so the export stops and says where.
        raise ExportError(
            f"{source_id}: check {check_id} cites snippet {sid!r}, which its "
            "meta-rubric does not have"
        )
    return {
        "id": found["id"],
        "url": found["url"],
        "title": found.get("title", ""),
        "text": found["text"],
    }


def _json_line(value: Any) -> bytes:
    return (
        json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()
        + b"\n"
    )


# --- where it goes --------------------------------------------------------------------------


class Sink(Protocol):
    def open(self, name: str) -> Any:
        """A context manager giving a binary file to write `name` (a POSIX path) into."""


class FolderSink:
    def __init__(self, root: Path):
        self.root = root

    @contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        path = self.root / PurePosixPath(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as handle:
            yield handle


class ZipSink:
    """Entries with a fixed date, fixed permissions and a fixed system, so that the archive
    depends on the contents alone. Photos are compressed already: stored as they are."""

    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive

    @contextmanager
    def open(self, name: str) -> Iterator[IO[bytes]]:
        info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
        info.create_system = 3  # Unix, whatever the machine
        info.external_attr = 0o100644 << 16
        info.compress_type = (
            zipfile.ZIP_STORED
            if name.startswith(f"{IMAGES_DIR}/") or name.endswith(".parquet")
            else zipfile.ZIP_DEFLATED
        )
        with self.archive.open(info, "w", force_zip64=True) as handle:
            yield handle


def _write(sink: Sink, name: str, chunks: Iterable[bytes]) -> str:
    """Write a file through the sink; its SHA-256."""
    digest = hashlib.sha256()
    with sink.open(name) as handle:
        for chunk in chunks:
            digest.update(chunk)
            handle.write(chunk)
    return digest.hexdigest()


def _image_chunks(entry: Entry) -> Iterator[bytes]:
    image = entry.question.image
    try:
        handle = image.file.open("rb")
    except FileNotFoundError as exc:
        raise ExportError(
            f"the photo of {image.source_id!r} is missing from storage ({image.file.name})"
        ) from exc
    with handle:
        while chunk := handle.read(CHUNK):
            yield chunk


# --- the export -----------------------------------------------------------------------------


@dataclass
class Manifest:
    data: dict[str, Any]

    @property
    def content_hash(self) -> str:
        return self.data["content_hash"]

    @property
    def counts(self) -> dict[str, Any]:
        return self.data["counts"]


def _sources(contents: Contents) -> list[dict[str, Any]]:
    """The datasets the exported images came from, with their licence and revision (a CRAG-MM
    import records them on its batch): whoever re-uses the export must honour them."""
    counts: Counter = Counter()
    for entry in contents.entries:
        frozen = entry.frozen
        if frozen is not None:
            if frozen.source:
                key = (frozen.source, frozen.source_split, frozen.source_revision, frozen.licence)
                counts[key] += 1
            continue
        batch = entry.question.image.import_batch
        if batch is not None and batch.dataset:
            counts[(batch.dataset, batch.split, batch.revision, batch.license)] += 1
    return [
        {"dataset": d, "split": s, "revision": r, "license": lic, "questions": n}
        for (d, s, r, lic), n in sorted(counts.items())
    ]


def _manifest(contents: Contents, files: dict[str, str]) -> dict[str, Any]:
    checks = [row for entry in contents.entries for row in entry.checks]
    tiers = Counter(row.tier for row in checks)
    stages = Counter(entry.version.stage for entry in contents.entries)
    listing = "".join(f"{files[name]}  {name}\n" for name in sorted(files))
    release = contents.release
    named = (
        {"release": {"name": release.name, "content_hash": release.content_hash}}
        if release is not None
        else {}
    )
    return {
        **named,
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "counts": {
            "questions": len(contents.entries),
            "checks": len(checks),
            "checks_per_tier": {tier: tiers[tier] for tier in TIERS},
            "questions_per_rubric_stage": {
                stage.value: stages[stage.value] for stage in STAGE_ORDER
            },
            "left_out": {"dropped": contents.dropped, "without_rubric": contents.without_rubric},
        },
        "sources": _sources(contents),
        "files": {name: files[name] for name in sorted(files)},
        "content_hash": "sha256:" + hashlib.sha256(listing.encode()).hexdigest(),
    }


def export(
    sink: Sink, *, contents: Contents | None = None, progress: Progress | None = None
) -> Manifest:
    """Write the whole export through `sink`, files in sorted name order (gamut.jsonl,
    images/..., manifest.json: the order a zip lists them in)."""
    contents = contents if contents is not None else collect()
    files = {
        DATA_FILE: _write(
            sink, DATA_FILE, (_json_line(record(entry)) for entry in contents.entries)
        )
    }
    ordered = sorted(contents.entries, key=lambda entry: entry.image_name)
    for entry in progress(ordered) if progress else ordered:
        files[entry.image_name] = _write(sink, entry.image_name, _image_chunks(entry))
    data = _manifest(contents, files)
    manifest_bytes = (
        json.dumps(
            data, ensure_ascii=False, sort_keys=True, indent=2, separators=(",", ": ")
        ).encode()
        + b"\n"
    )
    _write(sink, MANIFEST_FILE, [manifest_bytes])
    return Manifest(data)


def export_to_folder(
    out_dir: Path,
    *,
    force: bool = False,
    progress: Progress | None = None,
    writer: Callable[..., Manifest] | None = None,
) -> Manifest:
    """Write the export into out_dir, which must not exist or be empty unless force.

    Everything is written to a temporary folder beside out_dir and renamed into place at the
    end, so a failed export leaves out_dir as it was; with force, the old folder is removed
    only once the new one is in place."""
    out_dir = Path(out_dir)
    _check_target(out_dir, force)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        manifest = (writer or export)(FolderSink(work), progress=progress)
        _make_readable(work)
        _swap_into_place(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return manifest


def _check_target(out_dir: Path, force: bool) -> None:
    if out_dir.is_symlink() or (out_dir.exists() and not out_dir.is_dir()):
        raise ExportError(f"{out_dir} exists and is not a folder; give a folder to export into.")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not force:
            raise ExportError(
                f"{out_dir} is not empty; nothing was written. Give an empty or new folder, or "
                "--force to replace an earlier export in it."
            )
        # --force replaces an earlier export, never some other folder given by mistake.
        if not (out_dir / "manifest.json").is_file():
            raise ExportError(
                f"{out_dir} holds no manifest.json, so it is not an earlier export; nothing "
                "was written. --force only replaces an earlier export."
            )


def _make_readable(work: Path) -> None:
    # mkdtemp makes a private folder (0700); an export is meant to be shared like any folder.
    mask = os.umask(0)
    os.umask(mask)
    work.chmod(0o777 & ~mask)


def _swap_into_place(work: Path, out_dir: Path) -> None:
    if not out_dir.exists():
        work.rename(out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    old.rmdir()  # only its unique name was wanted
    out_dir.rename(old)
    try:
        work.rename(out_dir)
    except BaseException:
        old.rename(out_dir)  # put the old export back as it was
        raise
    shutil.rmtree(old)


def export_to_zip(handle: IO[bytes], writer: Callable[..., Manifest] | None = None) -> Manifest:
    """The export (or another layout's `writer`) as a zip archive written into a seekable
    binary file."""
    with zipfile.ZipFile(handle, "w") as archive:
        return (writer or export)(ZipSink(archive))
