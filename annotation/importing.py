"""Image import: a JSONL manifest, validated whole before anything is written.

One JSON object a line:
  {"source_id", "image" (path relative to the manifest), "entity", "domain",
   "popularity": "head"|"torso"|"tail", "egocentric"?: bool, "candidates"?: [question texts]}

A bad line fails the whole import with one message per bad line, naming its line number.
A source id that exists already is skipped and reported.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from .models import (
    AuditEvent,
    Candidate,
    CandidateOrigin,
    Image,
    ImportBatch,
    Popularity,
)

REQUIRED = ("source_id", "image", "entity", "domain", "popularity")
OPTIONAL = ("egocentric", "candidates")
Progress = Callable[[Iterable], Iterable]


class ImportProblems(Exception):
    """The manifest has bad lines; `problems` holds one message per bad line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class ManifestEntry:
    line: int
    source_id: str
    image_path: Path
    entity: str
    domain: str
    popularity: str
    egocentric: bool = False
    candidates: list[str] = field(default_factory=list)


@dataclass
class ImportResult:
    batch: ImportBatch | None
    imported: list[str]
    skipped: list[str]


def _no_progress(items: Iterable) -> Iterable:
    return items


def _check_image(path: Path) -> str | None:
    """The problem with an image file, or None when it is a readable image within the limit."""
    if not path.is_file():
        return f"image {path.name!r} not found"
    try:
        size = path.stat().st_size
        if size > settings.IMAGE_MAX_BYTES:
            mb = settings.IMAGE_MAX_BYTES // (1024 * 1024)
            return f"image {path.name!r} is {size / 1024 / 1024:.1f} MB, over the {mb} MB limit"
        with PILImage.open(path) as img:
            img.verify()
    except PermissionError:
        return f"image {path.name!r} cannot be read"
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return f"image {path.name!r} is not an image Pillow can read"
    return None


def _entry_problems(obj, base_dir: Path) -> tuple[list[str], ManifestEntry | None]:
    if not isinstance(obj, dict):
        return ["not a JSON object"], None
    problems: list[str] = []
    for name in REQUIRED:
        value = obj.get(name)
        if value is None:
            problems.append(f"missing field {name!r}")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"field {name!r} must be non-empty text")
    unknown = sorted(set(obj) - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        problems.append(f"unknown field {unknown[0]!r}")
    popularity = obj.get("popularity")
    if isinstance(popularity, str) and popularity.strip() and popularity not in Popularity.values:
        problems.append(f"popularity must be head, torso or tail, not {popularity!r}")
    egocentric = obj.get("egocentric", False)
    if not isinstance(egocentric, bool):
        problems.append("egocentric must be true or false")
    candidates = obj.get("candidates", [])
    if not isinstance(candidates, list) or not all(
        isinstance(c, str) and c.strip() for c in candidates
    ):
        problems.append("candidates must be a list of non-empty question texts")
        candidates = []
    image_path = None
    image = obj.get("image")
    if isinstance(image, str) and image.strip():
        relative = PurePosixPath(image)
        if relative.is_absolute() or ".." in relative.parts:
            problems.append(f"image {image!r} must be a path inside the manifest's folder")
        else:
            image_path = base_dir / relative
            problem = _check_image(image_path)
            if problem:
                problems.append(problem)
    if problems or image_path is None or not isinstance(popularity, str):
        return problems, None
    return [], ManifestEntry(
        line=0,
        source_id=obj["source_id"].strip(),
        image_path=image_path,
        entity=obj["entity"].strip(),
        domain=obj["domain"].strip(),
        popularity=popularity,
        egocentric=egocentric,
        candidates=[c.strip() for c in candidates],
    )


def manifest_parse(
    lines: Iterable[str], base_dir: Path, *, progress: Progress = _no_progress
) -> list[ManifestEntry]:
    """Validate every line; raise ImportProblems listing each bad line, or return the entries."""
    problems: list[str] = []
    entries: list[ManifestEntry] = []
    first_line_of: dict[str, int] = {}
    for number, raw in enumerate(progress(lines), start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(f"line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        line_problems, entry = _entry_problems(obj, base_dir)
        source_id = obj.get("source_id") if isinstance(obj, dict) else None
        if isinstance(source_id, str) and source_id.strip():
            earlier = first_line_of.setdefault(source_id.strip(), number)
            if earlier != number:
                line_problems.append(f"source_id {source_id!r} repeats line {earlier}")
        if line_problems:
            problems.append(f"line {number}: " + "; ".join(line_problems))
            continue
        assert entry is not None
        entry.line = number
        entries.append(entry)
    if problems:
        raise ImportProblems(problems)
    if not entries:
        raise ImportProblems(["the manifest has no lines"])
    return entries


def images_import(
    entries: list[ManifestEntry],
    *,
    actor,
    source: str,
    file_name: str,
    demo: bool = False,
    progress: Progress = _no_progress,
) -> ImportResult:
    """Write validated entries: image files first, then every row in one transaction. If the
    transaction fails, the files written for it are removed again."""
    existing = set(
        Image.objects.filter(source_id__in=[e.source_id for e in entries]).values_list(
            "source_id", flat=True
        )
    )
    skipped = [e.source_id for e in entries if e.source_id in existing]
    new = [e for e in entries if e.source_id not in existing]
    if not new:
        return ImportResult(batch=None, imported=[], skipped=skipped)

    stored: list[str] = []
    try:
        names = {}
        for entry in progress(new):
            with entry.image_path.open("rb") as fh:
                stem = slugify(entry.source_id)[:120] or "image"
                name = default_storage.save(
                    f"images/{stem}{entry.image_path.suffix.lower()}", File(fh)
                )
            stored.append(name)
            names[entry.source_id] = name
        now = timezone.now()
        with transaction.atomic():
            batch = ImportBatch.objects.create(
                source=source,
                file_name=file_name,
                created_by=actor,
                created_at=now,
                imported=len(new),
                skipped=skipped,
            )
            images = Image.objects.bulk_create(
                [
                    Image(
                        source_id=e.source_id,
                        file=names[e.source_id],
                        entity=e.entity,
                        domain=e.domain,
                        popularity=e.popularity,
                        egocentric=e.egocentric,
                        is_demo=demo,
                        import_batch=batch,
                        created_at=now,
                    )
                    for e in new
                ]
            )
            if not all(img.pk for img in images):  # backends without RETURNING
                by_source = dict(
                    Image.objects.filter(import_batch=batch).values_list("source_id", "pk")
                )
                for img in images:
                    img.pk = by_source[img.source_id]
            origin = CandidateOrigin.DEMO if demo else CandidateOrigin.IMPORT
            Candidate.objects.bulk_create(
                [
                    Candidate(image_id=img.pk, text=text, round=1, origin=origin, created_at=now)
                    for img, entry in zip(images, new, strict=True)
                    for text in entry.candidates
                ]
            )
            AuditEvent.objects.create(
                actor=actor,
                action="images.import",
                data={
                    "batch": batch.pk,
                    "source": source,
                    "file": file_name,
                    "imported": len(new),
                    "skipped": skipped,
                },
                at=now,
            )
    except BaseException:
        for name in stored:
            default_storage.delete(name)
        raise
    return ImportResult(batch=batch, imported=[e.source_id for e in new], skipped=skipped)


def import_from_upload(
    manifest_bytes: bytes, zip_file, *, actor, source: str, file_name: str
) -> ImportResult:
    """The browser's and the API's import: a manifest and a zip of the images it names."""
    try:
        text = manifest_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblems([f"the manifest is not UTF-8 text (byte {exc.start})"]) from exc
    workdir = Path(tempfile.mkdtemp(prefix="gamut-import-"))
    try:
        if zip_file is not None:
            _unzip_safely(zip_file, workdir)
        try:
            entries = manifest_parse(text.splitlines(), workdir)
        except ImportProblems as exc:
            if zip_file is None and any(" not found" in p for p in exc.problems):
                # Each line's "image not found" would hide the one cause: no zip at all.
                raise ImportProblems(
                    [
                        "No zip was uploaded, and the manifest names images: choose the zip of "
                        "the images as well.",
                        *(p for p in exc.problems if " not found" not in p),
                    ]
                ) from exc
            raise
        return images_import(entries, actor=actor, source=source, file_name=file_name)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _unzip_safely(zip_file, target: Path) -> None:
    try:
        archive = zipfile.ZipFile(zip_file)
    except zipfile.BadZipFile as exc:
        raise ImportProblems(["the images file is not a zip archive"]) from exc
    with archive:
        members = archive.infolist()
        total = sum(m.file_size for m in members)
        if total > settings.IMPORT_ZIP_MAX_BYTES:
            raise ImportProblems([f"the zip unpacks to {total} bytes, over the limit"])
        for member in members:
            path = PurePosixPath(member.filename)
            if path.is_absolute() or ".." in path.parts:
                raise ImportProblems([f"the zip holds an unsafe path {member.filename!r}"])
            if member.is_dir():
                continue
            destination = target / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as src, destination.open("wb") as dst:
                shutil.copyfileobj(src, dst)
