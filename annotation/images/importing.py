"""Image import: a JSONL manifest, validated whole before anything is written.

One JSON object a line:
  {"source_id", "image" (path relative to the manifest, or inside the zip), "entity", "domain",
   "popularity": "head"|"torso"|"tail", "egocentric"?: bool, "candidates"?: [question texts]}

A bad line fails the whole import with one message per problem, naming its line number. A source
id that exists already is skipped and reported.

Validation runs in two passes, so that a hostile upload costs little: first the manifest itself
and where each image it names would come from (for a zip: its directory, read without unpacking a
byte: present, one file not a folder, not encrypted, within the size caps); only when that is all
sound, the image bytes, one image at a time, through Pillow with an allowlist of formats. Only
the members the manifest names are ever unpacked, and never under their own names: they are read
into memory (at most IMPORT_MAX_FILE_BYTES) and stored under a name made from the source id and
the extension of the format Pillow decoded, so a file named `x.html` or `x.js` is stored as what
its bytes are, and anything but JPEG, PNG, WebP or GIF is refused.
"""

from __future__ import annotations

import io
import json
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify
from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from core.errors import InvalidInput, TooLarge
from core.text import clean_source_id, clean_text

from ..models import (
    AuditEvent,
    Candidate,
    CandidateOrigin,
    Image,
    ImportBatch,
    Popularity,
    domain_key,
    known_domains,
)

REQUIRED = ("source_id", "image", "entity", "domain", "popularity")
OPTIONAL = ("egocentric", "candidates")
MAX_CANDIDATE = 2000  # as a review's revision (annotation.candidates.MAX_TEXT)
Progress = Callable[[Iterable], Iterable]

# Pillow's format -> the stored file's extension. MPO is how Pillow names the JPEG that many
# phone cameras write (a JPEG with a second, stereo frame); browsers show it as a JPEG.
IMAGE_FORMATS: dict[str, str] = {
    "JPEG": ".jpg",
    "MPO": ".jpg",
    "PNG": ".png",
    "WEBP": ".webp",
    "GIF": ".gif",
}
# The stored extension -> the content type a photo is served with. Nothing else is served.
CONTENT_TYPES: dict[str, str] = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".gif": "image/gif",
}
# Only these decoders ever see an uploaded byte (the JPEG plugin also opens MPO).
PILLOW_FORMATS = ("JPEG", "PNG", "WEBP", "GIF")
FORMAT_NAMES = "JPEG, PNG, WebP or GIF"

MAX_PROBLEMS_SHOWN = 100  # an error report lists these and counts the rest
MAX_JSON_DEPTH = 32  # a meta-rubric needs about 8; thousands deep is an attack on the parser
MAX_NAME_BYTES = 255  # a file or folder name on every common file system
CHUNK = 1024 * 1024


class ImportProblems(Exception):
    """The import is refused; `problems` holds one message per problem, a line's starting with
    its line number."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def problems_shown(problems: list[str], limit: int = MAX_PROBLEMS_SHOWN) -> list[str]:
    """The first `limit` problems, and a last line counting the rest: a 100,000-line bad file
    gives a report people can read, not megabytes."""
    if len(problems) <= limit:
        return list(problems)
    rest = len(problems) - limit
    return [*problems[:limit], f"… and {rest} more problem{'s' if rest != 1 else ''}"]


def json_line(raw: str) -> tuple[Any, str | None]:
    """One JSONL line decoded, or the problem with it (without its line number). Shared by the
    three importers, so that no line can crash any of them."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, f"not valid JSON: nested deeper than the limit of {MAX_JSON_DEPTH} levels"
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        return None, f"not valid JSON ({exc})"
    if _depth_over(value, MAX_JSON_DEPTH):
        return None, f"nested deeper than the limit of {MAX_JSON_DEPTH} levels"
    return value, None


def _depth_over(value: Any, limit: int) -> bool:
    """Whether lists and objects nest more than `limit` deep; iterative, so it cannot recurse
    out of stack on what json.loads accepted."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Iterable = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.1f}".removesuffix(".0") + " MB"


@dataclass
class ManifestEntry:
    line: int
    source_id: str
    image_path: Path | None  # a file on disk (the command, the demo), or None for a zip member
    entity: str
    domain: str
    popularity: str
    egocentric: bool = False
    candidates: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # more Image fields (a dataset import's)
    image: str = ""  # the manifest's name for the image
    member: zipfile.ZipInfo | None = None
    archive: zipfile.ZipFile | None = None
    format: str = ""  # Pillow's, once the bytes are checked

    def open(self) -> IO[bytes]:
        if self.member is not None:
            assert self.archive is not None
            return self.archive.open(self.member)
        assert self.image_path is not None
        return self.image_path.open("rb")


@dataclass
class ImportResult:
    batch: ImportBatch | None
    imported: list[str]
    skipped: list[str]


def _no_progress(items: Iterable) -> Iterable:
    return items


# --- the bytes of one image -----------------------------------------------------------------


def image_format(handle: IO[bytes], name: str) -> tuple[str, str | None]:
    """(Pillow's format, None), or ("", the problem) for bytes that are not an allowed image
    within the caps on what it takes to show it (settings: IMAGE_MAX_*). Reads the header (and
    for an animation its frames' headers), then verify() walks the file without decoding its
    pixels."""
    limit = settings.IMAGE_MAX_PIXELS
    try:
        with warnings.catch_warnings():
            # Pillow warns between its limit and twice it, and refuses above; up to twice it
            # the size is checked below, with the image's dimensions in the message.
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            with PILImage.open(handle, formats=PILLOW_FORMATS) as img:
                problem = _too_big_to_show(img, name)
                if problem:
                    return "", problem
                found = img.format or ""
                img.verify()
    except PILImage.DecompressionBombError:
        return "", (
            f"image {name!r} has more pixels than the limit of {limit:,} (IMAGE_MAX_PIXELS)"
        )
    except UnidentifiedImageError:
        return "", f"image {name!r} is not a {FORMAT_NAMES} image"
    # What Pillow raises on damaged files of a format it knows.
    except (
        OSError,
        SyntaxError,
        ValueError,
        EOFError,
        IndexError,
        TypeError,
        struct.error,
        zlib.error,
    ):
        return "", f"image {name!r} is damaged: Pillow cannot read it as {FORMAT_NAMES}"
    if found not in IMAGE_FORMATS:
        return "", f"image {name!r} is {found or 'of no known format'}, not {FORMAT_NAMES}"
    return found, None


def _too_big_to_show(img: PILImage.Image, name: str) -> str | None:
    """What an opened (not decoded) image would cost whoever shows it, against the caps: its
    longer side, its frames, every frame's pixels together, and its metadata."""
    width, height = img.size
    side = settings.IMAGE_MAX_SIDE
    if max(width, height) > side:
        return (
            f"image {name!r} is {width}x{height} pixels; its longer side may be at most "
            f"{side:,} (IMAGE_MAX_SIDE)"
        )
    # The frames an animation shows one after another (GIF: counted by walking their headers,
    # nothing decoded; WebP, PNG: as declared). A phone's MPO holds a second, smaller picture
    # that browsers never show: one frame.
    frames = getattr(img, "n_frames", 1) if img.format != "MPO" else 1
    most = settings.IMAGE_MAX_FRAMES
    if frames > most:
        return (
            f"image {name!r} has {frames:,} frames, over the limit of {most:,} (IMAGE_MAX_FRAMES)"
        )
    pixels, limit = width * height * frames, settings.IMAGE_MAX_PIXELS
    if pixels > limit:
        shape = f"{width}x{height}" if frames == 1 else f"{frames:,} frames of {width}x{height}"
        return (
            f"image {name!r} is {shape} pixels: {pixels:,} pixels for a browser or a model to "
            f"decode, over the limit of {limit:,} (IMAGE_MAX_PIXELS)"
        )
    metadata = sum(len(value) for value in img.info.values() if isinstance(value, bytes | str))
    cap = settings.IMAGE_MAX_METADATA_BYTES
    if metadata > cap:
        return (
            f"image {name!r} carries {metadata:,} bytes of metadata (ICC profile, EXIF, XMP, "
            f"text), over the limit of {cap:,} (IMAGE_MAX_METADATA_BYTES)"
        )
    return None


def _name_problem(name: str) -> str | None:
    """A manifest's image path that no source can hold safely."""
    if "\x00" in name:
        return f"image {name!r} must not contain a NUL character"
    relative = PurePosixPath(name)
    if relative.is_absolute() or ".." in relative.parts or "\\" in name:
        return f"image {name!r} must be a path inside the manifest's folder (with / between names)"
    long = next((part for part in relative.parts if len(part.encode()) > MAX_NAME_BYTES), None)
    if long is not None:
        return f"image {name[:40]!r}… has a name over {MAX_NAME_BYTES} bytes"
    return None


class FolderImages:
    """The command's images: files under the manifest's folder."""

    def __init__(self, base_dir: Path):
        self.base_dir = base_dir

    def locate(self, entry: ManifestEntry) -> str | None:
        path = self.base_dir / PurePosixPath(entry.image)
        try:
            if not path.is_file():
                return f"image {entry.image!r} not found"
            size = path.stat().st_size
        except OSError:
            return f"image {entry.image!r} cannot be read"
        cap = settings.IMPORT_MAX_FILE_BYTES
        if size > cap:
            return f"image {entry.image!r} is {_mb(size)}, over the {_mb(cap)} limit"
        entry.image_path = path
        return None

    def check(self, entry: ManifestEntry) -> str | None:
        try:
            with entry.open() as handle:
                entry.format, problem = image_format(handle, entry.image)
        except OSError:
            return f"image {entry.image!r} cannot be read"
        return problem


class ZipImages:
    """An upload's images: the zip's members that the manifest names, and only those."""

    def __init__(self, archive: zipfile.ZipFile):
        self.archive = archive
        self.files: dict[str, list[zipfile.ZipInfo]] = {}
        self.folders: set[str] = set()
        for member in archive.infolist():
            name = PurePosixPath(member.filename).as_posix()
            if member.is_dir():
                self.folders.add(name)
            else:
                self.files.setdefault(name, []).append(member)
            self.folders.update(
                p.as_posix() for p in PurePosixPath(name).parents if p.as_posix() != "."
            )

    @classmethod
    def open(cls, zip_file) -> ZipImages:
        """The zip's directory read and checked as a whole, or ImportProblems."""
        try:
            archive = zipfile.ZipFile(zip_file)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise ImportProblems(["the images file is not a readable zip archive"]) from exc
        members = archive.infolist()
        cap = settings.IMPORT_MAX_MEMBERS
        if len(members) > cap:
            archive.close()
            raise ImportProblems(
                [
                    f"the zip holds {len(members):,} entries, over the limit of "
                    f"{cap:,} (IMPORT_MAX_MEMBERS)"
                ]
            )
        unsafe = next(
            (
                m.filename
                for m in members
                if PurePosixPath(m.filename).is_absolute()
                or ".." in PurePosixPath(m.filename).parts
            ),
            None,
        )
        if unsafe is not None:
            archive.close()
            raise ImportProblems([f"the zip holds an unsafe path {unsafe[:300]!r}"])
        return cls(archive)

    def close(self) -> None:
        self.archive.close()

    def locate(self, entry: ManifestEntry) -> str | None:
        name = PurePosixPath(entry.image).as_posix()
        found = self.files.get(name, [])
        if name in self.folders:
            return (
                f"image {entry.image!r} is a folder in the zip"
                if not found
                else f"image {entry.image!r} is both a file and a folder in the zip"
            )
        clash = next(
            (p.as_posix() for p in PurePosixPath(name).parents if p.as_posix() in self.files), None
        )
        if clash is not None:
            return f"image {entry.image!r} lies beneath {clash!r}, which the zip holds as a file"
        if not found:
            return f"image {entry.image!r} not found in the zip"
        if len(found) > 1:
            return f"image {entry.image!r} is in the zip {len(found)} times"
        member = found[0]
        if member.flag_bits & 0x1:
            return f"image {entry.image!r} is encrypted in the zip; zip it without a password"
        if member.compress_type not in (
            zipfile.ZIP_STORED,
            zipfile.ZIP_DEFLATED,
            zipfile.ZIP_BZIP2,
            zipfile.ZIP_LZMA,
        ):
            return (
                f"image {entry.image!r} is compressed with method {member.compress_type}, "
                "which cannot be unpacked here; use deflate"
            )
        cap = settings.IMPORT_MAX_FILE_BYTES
        if member.file_size > cap:
            return (
                f"image {entry.image!r} unpacks to {_mb(member.file_size)}, over the "
                f"{_mb(cap)} limit"
            )
        entry.member, entry.archive = member, self.archive
        return None

    def check(self, entry: ManifestEntry) -> str | None:
        """Unpack the member into memory, within the cap whatever its header says; the CRC is
        checked as the last byte is read."""
        cap = settings.IMPORT_MAX_FILE_BYTES
        data = io.BytesIO()
        try:
            with entry.open() as src:
                while chunk := src.read(CHUNK):
                    data.write(chunk)
                    if data.tell() > cap:
                        return f"image {entry.image!r} unpacks to over the {_mb(cap)} limit"
        except zipfile.BadZipFile as exc:
            if "CRC" in str(exc):
                return f"image {entry.image!r} is damaged in the zip (bad CRC-32)"
            return f"image {entry.image!r} cannot be unpacked: the zip is damaged"
        except (
            zlib.error,
            EOFError,
            OSError,
            NotImplementedError,
            RuntimeError,
            ValueError,
            struct.error,
        ):
            return f"image {entry.image!r} cannot be unpacked: the zip is damaged"
        data.seek(0)
        entry.format, problem = image_format(data, entry.image)
        return problem


ImageSource = FolderImages | ZipImages


# --- the manifest ---------------------------------------------------------------------------


# The texts of a line, checked at the boundary (core.text): the columns' lengths, no control
# characters, and source ids that are safe in an address.
_TEXT_LIMITS = {"entity": 500, "domain": 100, "image": 500}


def _text_problems(obj: dict) -> list[str]:
    problems = []
    checks: list[tuple[str, Callable[[], object]]] = [
        ("source_id", lambda: clean_source_id(obj["source_id"].strip())),
        *(
            (
                name,
                lambda name=name, limit=limit: clean_text(
                    obj[name], name, limit=limit, multiline=False
                ),
            )
            for name, limit in _TEXT_LIMITS.items()
        ),
    ]
    for name, check in checks:
        if isinstance(obj.get(name), str) and obj[name].strip():
            try:
                check()
            except InvalidInput as exc:
                problems.append(exc.message)
    candidates = obj.get("candidates")
    for index, text in enumerate(candidates if isinstance(candidates, list) else [], 1):
        if isinstance(text, str):
            try:
                clean_text(text, f"candidates[{index}]", limit=MAX_CANDIDATE)
            except InvalidInput as exc:
                problems.append(exc.message)
    return problems


def _entry_problems(obj) -> tuple[list[str], ManifestEntry | None]:
    """The problems of one decoded line by itself, or its entry (not yet located)."""
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
        problems.append(f"unknown field {unknown[0][:60]!r}")
    problems.extend(_text_problems(obj))
    popularity = obj.get("popularity")
    if isinstance(popularity, str) and popularity.strip() and popularity not in Popularity.values:
        problems.append(f"popularity must be head, torso, tail or unknown, not {popularity[:60]!r}")
    egocentric = obj.get("egocentric", False)
    if not isinstance(egocentric, bool):
        problems.append("egocentric must be true or false")
    candidates = obj.get("candidates", [])
    if not isinstance(candidates, list) or not all(
        isinstance(c, str) and c.strip() for c in candidates
    ):
        problems.append("candidates must be a list of non-empty question texts")
    image = obj.get("image")
    if isinstance(image, str) and image.strip():
        problem = _name_problem(image)
        if problem:
            problems.append(problem)
    if problems:
        return problems, None
    return [], ManifestEntry(
        line=0,
        source_id=obj["source_id"].strip(),
        image_path=None,
        image=image,
        entity=obj["entity"].strip(),
        domain=obj["domain"].strip(),
        popularity=popularity,
        egocentric=egocentric,
        candidates=[c.strip() for c in candidates],
    )


def _line_alone(
    raw: str, number: int, first_line_of: dict[str, int], domains: dict[str, str]
) -> tuple[list[str], ManifestEntry | None]:
    """One line's problems by itself (its JSON, its fields, a domain not in the list, a source
    id an earlier line has), or its entry with the list's name of its domain. `first_line_of`
    collects the source ids seen so far; `domains` is known_domains()."""
    obj, problem = json_line(raw)
    if problem:
        return [problem], None
    line_problems, entry = _entry_problems(obj)
    domain = obj.get("domain") if isinstance(obj, dict) else None
    if isinstance(domain, str) and domain.strip():
        name = domains.get(domain_key(domain))
        if name is None:
            line_problems.append(
                f"domain {domain[:100]!r} is not one of the benchmark's domains "
                f"({', '.join(sorted(domains.values()))}); an admin adds domains in the admin "
                "(Domains)"
            )
        elif entry is not None:
            entry.domain = name
    source_id = obj.get("source_id") if isinstance(obj, dict) else None
    if isinstance(source_id, str) and source_id.strip():
        earlier = first_line_of.setdefault(source_id.strip(), number)
        if earlier != number:
            line_problems.append(f"source_id {source_id[:200]!r} repeats line {earlier}")
    if line_problems:
        return line_problems, None
    assert entry is not None
    entry.line = number
    return [], entry


def manifest_line_problems(lines: Iterable[str]) -> list[str]:
    """Every line's problems by itself, each with its line number: a JSON syntax error on one
    line hides nothing of the others'."""
    first_line_of: dict[str, int] = {}
    domains = known_domains()
    problems = []
    for number, raw in enumerate(lines, start=1):
        if raw.strip():
            line_problems, _ = _line_alone(raw, number, first_line_of, domains)
            if line_problems:
                problems.append(f"line {number}: {'; '.join(line_problems)}")
    return problems


def manifest_parse(
    lines: Iterable[str], images: Path | ImageSource, *, progress: Progress = _no_progress
) -> list[ManifestEntry]:
    """Validate every line, then every image's bytes; raise ImportProblems listing each problem,
    or return the entries. `images` is the manifest's folder, or where the images come from.

    A line that is bad by itself stops the import before any image is read; an image that is
    missing does not stop the others from being checked, so one report names them all."""
    source = FolderImages(images) if isinstance(images, Path) else images
    problems: list[tuple[int, str]] = []
    entries: list[ManifestEntry] = []
    first_line_of: dict[str, int] = {}
    domains = known_domains()
    sound = True
    for number, raw in enumerate(progress(lines), start=1):
        if not raw.strip():
            continue
        line_problems, entry = _line_alone(raw, number, first_line_of, domains)
        if line_problems:
            problems.append((number, "; ".join(line_problems)))
            sound = False
            continue
        assert entry is not None
        # Where the image would come from; for a zip this reads its directory only.
        problem = source.locate(entry)
        if problem:
            problems.append((number, problem))
            continue
        entries.append(entry)
    if not sound:
        raise ImportProblems([f"line {n}: {text}" for n, text in problems])
    if not entries and not problems:
        raise ImportProblems(["the manifest has no lines"])
    if isinstance(source, ZipImages):
        # Counted per line, not per member: lines that all name one big member would otherwise
        # have it unpacked (and stored) once each, for the price of one.
        total = sum(e.member.file_size for e in entries if e.member is not None)
        cap = settings.IMPORT_MAX_TOTAL_BYTES
        if total > cap:
            raise ImportProblems(
                [
                    f"the images the manifest names unpack to {_mb(total)}, over the {_mb(cap)} "
                    "limit of one import (IMPORT_MAX_TOTAL_BYTES)",
                    *(f"line {n}: {text}" for n, text in problems),
                ]
            )
    # The manifest is sound: now the bytes, one image at a time.
    for entry in entries:
        problem = source.check(entry)
        if problem:
            problems.append((entry.line, problem))
    if problems:
        raise ImportProblems([f"line {n}: {text}" for n, text in sorted(problems)])
    return entries


def images_import(
    entries: list[ManifestEntry],
    *,
    actor,
    source: str,
    file_name: str,
    demo: bool = False,
    progress: Progress = _no_progress,
    batch_fields: dict | None = None,
) -> ImportResult:
    """Write validated entries: image files first, then every row in one transaction. If the
    transaction fails, the files written for it are removed again. Each file is stored under
    the extension of the format its bytes decode as (checked here when manifest_parse did not,
    as for the demo), never the one its name gives."""
    existing = set(
        Image.objects.filter(source_id__in=[e.source_id for e in entries]).values_list(
            "source_id", flat=True
        )
    )
    skipped = [e.source_id for e in entries if e.source_id in existing]
    new = [e for e in entries if e.source_id not in existing]
    if not new:
        return ImportResult(batch=None, imported=[], skipped=skipped)
    unchecked = [e for e in new if not e.format]
    problems = []
    for entry in unchecked:
        with entry.open() as handle:
            entry.format, problem = image_format(handle, entry.image or str(entry.image_path))
        if problem:
            problems.append(f"line {entry.line}: {problem}")
    if problems:
        raise ImportProblems(problems)

    stored: list[str] = []
    try:
        names = {}
        for entry in progress(new):
            with entry.open() as fh:
                stem = slugify(entry.source_id)[:120] or "image"
                name = default_storage.save(
                    f"images/{stem}{IMAGE_FORMATS[entry.format]}", File(fh, name=stem)
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
                **(batch_fields or {}),
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
                        **e.extra,
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


def upload_within_cap(upload, field: str, what: str) -> None:
    """TooLarge (413) for an uploaded text file over IMPORT_MAX_MANIFEST_BYTES. Django knows
    an upload's size once the request is parsed: nothing of it has been read into memory."""
    cap = settings.IMPORT_MAX_MANIFEST_BYTES
    if upload.size > cap:
        raise TooLarge(
            f"The {what} is {upload.size} bytes, over the cap of {cap} bytes "
            "(IMPORT_MAX_MANIFEST_BYTES); split it into smaller imports.",
            field,
        )


def read_manifest(upload) -> bytes:
    """An uploaded manifest's bytes, or TooLarge when it is over its cap."""
    upload_within_cap(upload, "manifest", "manifest")
    return upload.read()


def import_from_upload(
    manifest_bytes: bytes, zip_file, *, actor, source: str, file_name: str
) -> ImportResult:
    """The browser's and the API's import: a manifest and a zip of the images it names. The
    manifest is decoded and its lines checked before the zip's directory is read; nothing of
    the zip touches the disk but the stored images."""
    try:
        text = manifest_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblems([f"the manifest is not UTF-8 text (byte {exc.start})"]) from exc
    lines = text.splitlines()
    # The lines on their own first (every line's problems, whatever another line's are): a bad
    # manifest is refused before the zip is opened.
    problems = manifest_line_problems(lines)
    if problems:
        raise ImportProblems(problems)
    if zip_file is None:
        raise ImportProblems(
            [
                "No zip was uploaded, and the manifest names images: choose the zip of the "
                "images as well."
            ]
        )
    images = ZipImages.open(zip_file)
    try:
        entries = manifest_parse(lines, images)
        return images_import(entries, actor=actor, source=source, file_name=file_name)
    finally:
        images.close()
