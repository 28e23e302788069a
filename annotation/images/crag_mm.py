"""CRAG-MM as the Hugging Face Hub lays it out: `DIR/data/<split>-*.parquet`, read with pyarrow.

The method draws its images and entities from CRAG-MM. A row of the single-turn release holds
`session_id`, `image` (a struct with the image's `bytes`, or none), `image_url`, `turns` (each
with `interaction_id`, `domain`, `query`, ...) and `answers` (`ans_full`). The reader checks for
the columns it needs (`session_id`, `turns` with `domain` and `query`, and `image` or
`image_url`) and names what is missing rather than trusting that list; `answers` is optional.

Validated whole before anything is written, like every import: `crag_mm_plan` reads every shard,
checks every row (its image bytes decoded by Pillow) and writes the images to a scratch folder;
`crag_mm_import` then hands the plan to `importing.images_import`, which writes the rows in one
transaction. Rows whose domain the mapping leaves out are skipped and counted; rows with only an
`image_url` are reported, never fetched (there is no internet); rows with neither are errors.
"""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from core.errors import InvalidInput
from core.text import MAX_DATASET_REVISION, SOURCE_ID_MAX, clean_source_id, clean_text

from ..models import Image, Popularity, domain_key, known_domains
from .importing import (
    CHUNK,
    IMAGE_FORMATS,
    MAX_CANDIDATE,
    ImportProblems,
    ImportResult,
    ManifestEntry,
    image_format,
    images_import,
    json_line,
    problems_shown,
    upload_within_cap,
)

DATASET = "crag-mm"
DEFAULT_LICENSE = "cc-by-nc-4.0"  # the dataset card's licence, when the folder has no README
SPLITS = ("validation", "public_test")
SOURCE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$")
_REVISION = re.compile(r"^[0-9a-f]{40}$")

# What one row may hold. The texts kept with an image get the rules of every import (core.text:
# their column's length, no control characters, no bidirectional overrides that would make
# them display as another text): the query as a candidate question, the answer longer.
MAX_TURNS = 32  # turns (and answers) of one row; the single-turn release has one
MAX_QUERY = MAX_CANDIDATE
MAX_ANSWER = 10_000
MAX_URL = 2_000
ENTITY_MAX = Image._meta.get_field("entity").max_length
DOMAIN_MAX = Image._meta.get_field("source_domain").max_length
# What the text columns of one row may unpack to, in the Parquet metadata: far above what the
# caps above allow, far below what a hostile shard's repeated values decode to.
ROW_TEXT_BYTES = 1024 * 1024
# Parquet's compression may shrink a column of image bytes this much at most: JPEG, PNG, WebP
# and GIF are compressed already, so bytes that shrink more (a run of zeros) are no photos.
IMAGE_SHRINK = 4

# CRAG-MM's 13 domain labels and the method's ten everyday domains ("from plants, food, and
# animals to vehicles, local places, everyday objects, and consumer products"): the 13 less text
# understanding, math and science, and other. The table is data (DomainMapping, editable in the
# admin); these are its first rows. An empty domain leaves the label's rows out.
DEFAULT_DOMAIN_MAP = {
    "animal": "animals",
    "plants and gardening": "plants",
    "food": "food",
    "vehicle": "vehicles",
    "local": "places",
    "general object recognition": "objects",
    "shopping": "consumer products",
    "book": "books",
    "style and fashion": "style and fashion",
    "sports and games": "sports and games",
    "text understanding": "",
    "math and science": "",
    "other": "",
}

Progress = Callable[[Iterable], Iterable]


def _no_progress(items: Iterable) -> Iterable:
    return items


def label_key(label: str) -> str:
    """How labels are compared: lower case, single spaces, underscores as spaces."""
    return " ".join(str(label).replace("_", " ").lower().split())


@dataclass
class EntityInfo:
    entity: str
    popularity: str = Popularity.UNKNOWN
    egocentric: bool = False


@dataclass
class CragPlan:
    directory: Path
    split: str
    shards: list[str]
    revision: str
    license: str
    rows: int = 0
    entries: list[ManifestEntry] = field(default_factory=list)
    domains: Counter = field(default_factory=Counter)  # label -> rows
    left_out: Counter = field(default_factory=Counter)  # label -> rows the mapping leaves out
    unmapped: Counter = field(default_factory=Counter)  # label -> rows with no mapping row
    url_only: list[str] = field(default_factory=list)  # "shard row N (session s): url"
    needs_entity: int = 0
    unknown_entities: list[str] = field(default_factory=list)  # in the file, not in the split

    def domain_table(self, mapping: dict[str, str]) -> list[tuple[str, str | None, int]]:
        """(label, our domain or None when left out or unmapped, rows) for the dry run."""
        return [
            (label, mapping.get(label) or None, count)
            for label, count in sorted(self.domains.items())
        ]


def shard_paths(directory: Path, split: str) -> list[Path]:
    return sorted((directory / "data").glob(f"{split}-*.parquet"))


def read_entities(path: Path) -> dict[str, EntityInfo]:
    """The optional file of ground truth: JSONL `{"session_id", "entity", "popularity"?,
    "egocentric"?}` a line, or CSV with a header `session_id,entity[,popularity][,egocentric]`.
    Every line is checked, its texts as every import's (a session id as a source id, the entity
    a one-line name within its column); problems name the line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblems([f"{path.name}: not UTF-8 text (byte {exc.start})"]) from exc
    except OSError as exc:
        raise ImportProblems([f"{path.name}: cannot be read ({exc.strerror})"]) from exc
    if path.suffix.lower() == ".csv":
        import csv

        reader = csv.DictReader(text.splitlines())
        try:
            if not reader.fieldnames or not {"session_id", "entity"} <= set(reader.fieldnames):
                raise ImportProblems(
                    [f"{path.name}: line 1: the header must name session_id and entity"]
                )
            records = [(number, row) for number, row in enumerate(reader, start=2)]
        except csv.Error as exc:  # a field over csv's limit
            # line_num counts the lines read before the one that failed.
            raise ImportProblems(
                [f"{path.name}: line {reader.line_num + 1}: not readable as CSV ({exc})"]
            ) from exc
    else:
        records = []
        problems = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            value, problem = json_line(line)
            if problem:
                problems.append(f"{path.name}: line {number}: {problem}")
            else:
                records.append((number, value))
        if problems:
            raise ImportProblems(problems_shown(problems))
    found: dict[str, EntityInfo] = {}
    problems = []
    for number, record in records:
        where = f"{path.name}: line {number}"
        if not isinstance(record, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        line_problems = []
        session = entity = ""
        try:
            session = clean_text(record.get("session_id"), "session_id", limit=SOURCE_ID_MAX)
            if session:
                clean_source_id(session, "session_id")
        except InvalidInput as exc:
            line_problems.append(exc.message)
            session = ""
        try:
            entity = clean_text(record.get("entity"), "entity", limit=ENTITY_MAX, multiline=False)
        except InvalidInput as exc:
            line_problems.append(exc.message)
            entity = ""
        popularity = record.get("popularity") or Popularity.UNKNOWN
        popularity = popularity.strip().lower() if isinstance(popularity, str) else popularity
        egocentric = record.get("egocentric", False)
        if isinstance(egocentric, str):
            egocentric = egocentric.strip().lower() in ("1", "true", "yes")
        if not session and not line_problems:
            line_problems.append("missing session_id")
        elif session in found:
            line_problems.append(f"session_id {session!r} repeats an earlier line")
        if not entity and not any(p.startswith("entity") for p in line_problems):
            line_problems.append("missing entity")
        if popularity not in Popularity.values:
            line_problems.append(
                f"popularity must be head, torso, tail or unknown, not {str(popularity)[:60]!r}"
            )
        problems += [f"{where}: {problem}" for problem in line_problems]
        if not line_problems:
            found[session] = EntityInfo(entity, popularity, bool(egocentric))
    if problems:
        raise ImportProblems(problems_shown(problems))
    return found


def read_revision(directory: Path) -> str:
    """The dataset revision a local copy came from, when it says: a Hub cache snapshot folder
    is named by its commit; `huggingface-cli download --local-dir` leaves the commit in
    `.cache/huggingface/download/**/*.metadata` (first line)."""
    for part in (directory.resolve(), *directory.resolve().parents):
        if _REVISION.match(part.name) and part.parent.name == "snapshots":
            return part.name
    for metadata in sorted((directory / ".cache" / "huggingface" / "download").rglob("*.metadata")):
        first = metadata.read_text(encoding="utf-8", errors="replace").splitlines()[:1]
        if first and _REVISION.match(first[0].strip()):
            return first[0].strip()
    return ""


def read_license(directory: Path) -> str:
    """The licence the dataset card's YAML front matter names, else the published one."""
    card = directory / "README.md"
    if card.is_file():
        lines = card.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines and lines[0].strip() == "---":
            for line in lines[1:]:
                if line.strip() == "---":
                    break
                key, _, value = line.partition(":")
                if key.strip() == "license" and value.strip():
                    return value.strip().strip("'\"")
    return DEFAULT_LICENSE


def _class_names(schema) -> dict[str, list[str]]:
    """Label names of the ClassLabel columns from the Hub's `huggingface` schema metadata, for
    shards that store categories as numbers."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        features = json.loads(raw).get("info", {}).get("features", {})
    except (ValueError, AttributeError):
        return {}
    names: dict[str, list[str]] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if isinstance(value, dict) and isinstance(value.get("names"), list):
                    names[key] = [str(n) for n in value["names"]]
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(features)
    return names


def _missing_columns(schema) -> list[str]:
    import pyarrow as pa

    names = set(schema.names)
    missing = [c for c in ("session_id", "turns") if c not in names]
    if "image" not in names and "image_url" not in names:
        missing.append("image (or image_url)")
    if "turns" in names:
        turns = schema.field("turns").type
        item = (
            turns.value_type if pa.types.is_list(turns) or pa.types.is_large_list(turns) else None
        )
        if item is None or not pa.types.is_struct(item):
            missing.append("turns (a list of structs)")
        else:
            fields = {item.field(i).name for i in range(item.num_fields)}
            missing += [f"turns.{c}" for c in ("domain", "query") if c not in fields]
    return missing


_COLUMNS = ("session_id", "image", "image_url", "turns", "answers")
_LISTS = ("turns", "answers")


def _wanted(parquet) -> list[str]:
    return [c for c in _COLUMNS if c in parquet.schema_arrow.names]


def _size_problems(name: str, parquet) -> list[str]:
    """What the footer says a shard's row groups unpack to, against what their rows may hold:
    list values (turns, answers) at most MAX_TURNS a row, image bytes IMPORT_MAX_FILE_BYTES a
    row and no more compressible than photos are, the texts ROW_TEXT_BYTES a row. Read from
    the metadata alone: nothing is decoded."""
    cap = settings.IMPORT_MAX_FILE_BYTES
    wanted = set(_wanted(parquet))
    problems = []
    counted: set[tuple[int, str]] = set()
    metadata = parquet.metadata
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        rows = max(group.num_rows, 1)
        where = f"{name} row group {index + 1} ({group.num_rows:,} row(s))"
        for column in range(group.num_columns):
            chunk = group.column(column)
            path = chunk.path_in_schema
            top = path.split(".")[0]
            if top not in wanted:
                continue  # never read
            size = chunk.total_uncompressed_size
            if top in _LISTS and chunk.num_values > rows * MAX_TURNS:
                if (index, top) not in counted:  # one problem for the list, not each field
                    counted.add((index, top))
                    problems.append(
                        f"{where}: {chunk.num_values:,} {top} (values of {path}), while a row "
                        f"may hold at most {MAX_TURNS}"
                    )
            elif top == "image" and path.split(".")[-1] == "bytes":
                if size > rows * cap:
                    problems.append(
                        f"{where}: the image bytes unpack to {size / 1024 / 1024:,.1f} MB, over "
                        f"the {cap // (1024 * 1024)} MB an image may have (IMPORT_MAX_FILE_BYTES)"
                    )
                elif size > IMAGE_SHRINK * chunk.total_compressed_size + CHUNK:
                    problems.append(
                        f"{where}: {chunk.total_compressed_size:,} bytes of images unpack to "
                        f"{size / 1024 / 1024:,.1f} MB; photos (JPEG, PNG, WebP, GIF) are "
                        "compressed already, so these are not photos"
                    )
            elif size > rows * ROW_TEXT_BYTES:
                problems.append(
                    f"{where}: {path} unpacks to {size / 1024 / 1024:,.1f} MB, over the "
                    f"{ROW_TEXT_BYTES // 1024} KB of text a row may hold"
                )
    return problems


def _row_size_problem(batch) -> str | None:
    """The problem of one decoded row (an Arrow batch of one) too big to turn into Python
    objects: more turns than MAX_TURNS, an image over IMPORT_MAX_FILE_BYTES."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = batch.schema.names
    for column in _LISTS:
        if column in names and (
            pa.types.is_list(batch.schema.field(column).type)
            or pa.types.is_large_list(batch.schema.field(column).type)
        ):
            count = pc.list_value_length(batch.column(column))[0].as_py() or 0
            if count > MAX_TURNS:
                return f"{count:,} {column}, over the {MAX_TURNS} a row may hold"
    if "image" in names and pa.types.is_struct(image_type := batch.schema.field("image").type):
        index = image_type.get_field_index("bytes")
        kind = image_type.field(index).type if index >= 0 else None
        if kind is not None and (pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
            size = pc.binary_length(pc.struct_field(batch.column("image"), "bytes"))[0]
            cap = settings.IMPORT_MAX_FILE_BYTES
            if (size.as_py() or 0) > cap:
                return (
                    f"the image is {size.as_py() / 1024 / 1024:.1f} MB, over the "
                    f"{cap // (1024 * 1024)} MB limit (IMPORT_MAX_FILE_BYTES)"
                )
    return None


def crag_mm_plan(
    directory: Path,
    *,
    split: str,
    mapping: dict[str, str],
    workdir: Path,
    entities: dict[str, EntityInfo] | None = None,
    revision: str = "",
    progress: Progress = _no_progress,
) -> CragPlan:
    """Read and check every row; the images of the rows to import are written to `workdir`.
    Raises ImportProblems (the first 100 problems and the count of the rest) when a row is bad
    or a column is missing; writes nothing to the database."""
    import pyarrow.parquet as pq

    if split not in SPLITS:
        raise ImportProblems([f"split must be one of {', '.join(SPLITS)}, not {split!r}"])
    revision = revision.strip()
    if len(revision) > MAX_DATASET_REVISION:  # ImportBatch.revision holds this many
        raise ImportProblems(
            [
                f"The revision is longer than {MAX_DATASET_REVISION:,} characters "
                f"({len(revision):,} sent): shorten it."
            ]
        )
    shards = shard_paths(directory, split)
    if not shards:
        raise ImportProblems([f"{directory} has no data/{split}-*.parquet shard"])
    entities = entities or {}
    plan = CragPlan(
        directory=directory,
        split=split,
        shards=[str(p.relative_to(directory)) for p in shards],
        revision=revision or read_revision(directory),
        license=read_license(directory),
    )
    problems: list[str] = []
    first_row: dict[str, str] = {}
    seen_entities: set[str] = set()

    def problem(text: str) -> None:
        problems.append(text)

    files = []
    for path in shards:
        name = str(path.relative_to(directory))
        try:
            parquet = pq.ParquetFile(path)
        except Exception as exc:  # noqa: BLE001 (pyarrow raises several kinds for a bad file)
            problem(f"{name}: not a Parquet file ({type(exc).__name__})")
            continue
        missing = _missing_columns(parquet.schema_arrow)
        if missing:
            problem(
                f"{name}: missing column(s) {', '.join(missing)} (it has "
                f"{', '.join(parquet.schema_arrow.names)})"
            )
            continue
        files.append((name, parquet))
    if problems:
        raise ImportProblems(problems_shown(problems))
    # The sizes the footers state, before a value is decoded: a shard of a few kilobytes can
    # hold a row of millions of turns, or images of gigabytes in repeated or compressed bytes.
    total_rows = sum(parquet.metadata.num_rows for _, parquet in files)
    if total_rows > settings.IMPORT_MAX_MEMBERS:
        raise ImportProblems(
            [
                f"the shards hold {total_rows:,} rows, over the limit of "
                f"{settings.IMPORT_MAX_MEMBERS:,} of one import (IMPORT_MAX_MEMBERS)"
            ]
        )
    for name, parquet in files:
        problems += _size_problems(name, parquet)
    if problems:
        raise ImportProblems(problems_shown(problems))

    def rows() -> Iterable[tuple[str, int, dict | None, str | None, dict[str, list[str]]]]:
        for name, parquet in files:
            names = _class_names(parquet.schema_arrow)
            # One row at a time: what is decoded at once is one row, never a batch of them.
            batches = parquet.iter_batches(
                batch_size=1, columns=_wanted(parquet), use_threads=False
            )
            for number, batch in enumerate(batches, start=1):
                too_big = _row_size_problem(batch)
                yield name, number, None if too_big else batch.to_pylist()[0], too_big, names

    def text(value, field: str, limit: int, *, multiline: bool = True) -> str:
        return clean_text(value, field, limit=limit, multiline=multiline, bidi_controls=False)

    for name, number, row, too_big, class_names in progress(rows()):
        plan.rows += 1
        where = f"{name} row {number}"
        if row is None:
            problem(f"{where}: {too_big}")
            continue
        session = row.get("session_id")
        if not isinstance(session, str) or not session.strip():
            problem(f"{where}: no session_id")
            continue
        session = session.strip()
        if not SOURCE_ID.match(session):
            problem(
                f"{where}: the session id must be letters, digits and -_.: (at most 200), "
                f"not {session[:60]!r}"
            )
            continue
        where = f"{where} (session {session})"
        if session in first_row:
            problem(f"{where}: session_id repeats {first_row[session]}")
            continue
        first_row[session] = f"{name} row {number}"
        turns = row.get("turns") or []
        turn = turns[0] if turns and isinstance(turns[0], dict) else None
        if turn is None:
            problem(f"{where}: no turn")
            continue
        label = turn.get("domain")
        if isinstance(label, int) and not isinstance(label, bool):
            labels = class_names.get("domain")
            if not labels or not 0 <= label < len(labels):
                problem(
                    f"{where}: domain is the number {label} and the shard names no label for it"
                )
                continue
            label = labels[label]
        query = turn.get("query")
        if not isinstance(label, str) or not label.strip():
            problem(f"{where}: the turn has no domain")
            continue
        if not isinstance(query, str) or not query.strip():
            problem(f"{where}: the turn has no query")
            continue
        try:
            # The label shows in the domain table of every run, imported or not.
            label = text(label, "domain", DOMAIN_MAX, multiline=False)
        except InvalidInput as exc:
            problem(f"{where}: {exc.message}")
            continue
        key = label_key(label)
        plan.domains[key] += 1
        if key not in mapping:
            plan.unmapped[key] += 1
            continue
        if not mapping[key]:
            plan.left_out[key] += 1
            continue
        image = row.get("image")
        data = image.get("bytes") if isinstance(image, dict) else None
        if not data:
            url = row.get("image_url")
            if isinstance(url, str) and url.strip():
                try:
                    url = text(url, "image_url", MAX_URL, multiline=False)
                except InvalidInput as exc:
                    problem(f"{where}: {exc.message}")
                    continue
                plan.url_only.append(f"{where}: {url[:200]}")
            else:
                problem(f"{where}: neither image bytes nor an image_url")
            continue
        if len(data) > settings.IMPORT_MAX_FILE_BYTES:
            problem(
                f"{where}: the image is {len(data) / 1024 / 1024:.1f} MB, over the "
                f"{settings.IMPORT_MAX_FILE_BYTES // (1024 * 1024)} MB limit "
                "(IMPORT_MAX_FILE_BYTES)"
            )
            continue
        kind, bad = image_format(io.BytesIO(data), session)
        if bad:
            problem(f"{where}: {bad}")
            continue
        answer = ""
        for candidate in row.get("answers") or []:
            if (
                isinstance(candidate, dict)
                and isinstance(candidate.get("ans_full"), str)
                and candidate.get("interaction_id") in (None, turn.get("interaction_id"))
            ):
                answer = candidate["ans_full"]
                break
        texts = []
        for value, field_name, limit in (
            (query, "query", MAX_QUERY),
            (answer, "answer (ans_full)", MAX_ANSWER),
        ):
            try:
                texts.append(text(value, field_name, limit))
            except InvalidInput as exc:
                problem(f"{where}: {exc.message}")
        if len(texts) < 2:
            continue
        query, answer = texts
        info = entities.get(session)
        if info is None:
            plan.needs_entity += 1
        else:
            seen_entities.add(session)
        path = workdir / f"{len(plan.entries):06d}{IMAGE_FORMATS[kind]}"
        path.write_bytes(data)
        plan.entries.append(
            ManifestEntry(
                line=number,
                source_id=session,
                image_path=path,
                entity=info.entity if info else "",
                domain=mapping[key],
                popularity=info.popularity if info else Popularity.UNKNOWN,
                egocentric=info.egocentric if info else False,
                extra={
                    "entity_confirmed": info is not None,
                    "source_domain": label,
                    "source_query": query,
                    "source_answer": answer,
                },
            )
        )
    plan.unknown_entities = sorted(set(entities) - seen_entities - set(first_row))
    if problems:
        raise ImportProblems(problems_shown(problems))
    return plan


def crag_mm_import(
    plan: CragPlan, *, actor, source: str, progress: Progress = _no_progress
) -> ImportResult:
    return images_import(
        plan.entries,
        actor=actor,
        source=source,
        file_name=f"{plan.directory.name}: {', '.join(plan.shards)}"[:500],
        progress=progress,
        batch_fields={
            "dataset": DATASET,
            "split": plan.split,
            "revision": plan.revision,
            "license": plan.license,
        },
    )


def domain_mapping_problems(mapping: dict[str, str]) -> list[str]:
    """The domain table's rows whose benchmark domain is not in the list of domains (Domain):
    the import is refused with each named, so that no row lands under a second name."""
    domains = known_domains()
    return [
        f"the domain table maps CRAG-MM's {label!r} to {domain!r}, which is not in the list of "
        "domains: add it there (admin: Domains) or change the mapping"
        for label, domain in sorted(mapping.items())
        if domain and domain_key(domain) not in domains
    ]


def domain_mapping() -> dict[str, str]:
    """The admin's table: CRAG-MM label (compared by `label_key`) -> our domain, '' to leave
    the label out."""
    from ..models import DomainMapping

    return {
        label_key(label): domain
        for label, domain in DomainMapping.objects.values_list("label", "domain")
    }


def describe(plan: CragPlan, mapping: dict[str, str]) -> list[str]:
    """What the import will do (the dry run) or did: the domain table as it applies, and every
    row it leaves out and why."""
    lines = [
        f"{plan.rows} row(s) in {len(plan.shards)} shard(s) of split {plan.split}: "
        f"{', '.join(plan.shards)}",
        f"revision: {plan.revision or 'not given'}; licence: {plan.license}",
        "domains (CRAG-MM label -> benchmark domain: rows):",
    ]
    for label, domain, count in plan.domain_table(mapping):
        if label in plan.unmapped:
            target = "(no mapping row: skipped)"
        elif domain is None:
            target = "(left out)"
        else:
            target = domain
        lines.append(f"  {label} -> {target}: {count}")
    lines.append(
        f"to import: {len(plan.entries)} image(s); {plan.needs_entity} without an "
        "entity in the entities file (imported unconfirmed, popularity unknown)"
    )
    left_out = sum(plan.left_out.values()) + sum(plan.unmapped.values())
    if left_out:
        lines.append(f"left out by domain: {left_out} row(s)")
    if plan.url_only:
        lines.append(
            f"only an image_url, no image bytes (not fetched, skipped): {len(plan.url_only)} row(s)"
        )
        lines += [f"  {row}" for row in plan.url_only[:20]]
        if len(plan.url_only) > 20:
            lines.append(f"  ... and {len(plan.url_only) - 20} more")
    if plan.unknown_entities:
        lines.append(
            f"the entities file names {len(plan.unknown_entities)} session(s) not in "
            f"this split, e.g. {', '.join(plan.unknown_entities[:5])}"
        )
    return lines


@dataclass
class UploadOutcome:
    plan: CragPlan
    lines: list[str]  # the plan described, as the command prints it
    result: ImportResult | None  # None for a dry run


def crag_mm_from_upload(
    shards, *, entities=None, split: str, revision: str, dry_run: bool, actor, source: str
) -> UploadOutcome:
    """The browser's and the API's import: Parquet shards uploaded (named `<split>-*.parquet`,
    as under the dataset's data/ folder) and an optional entities file."""
    import shutil
    import tempfile

    if split not in SPLITS:
        raise ImportProblems([f"split must be one of {', '.join(SPLITS)}, not {split!r}"])
    if not shards:
        raise ImportProblems(["no Parquet shard was uploaded"])
    if entities is not None:
        upload_within_cap(entities, "entities", "entities file")
    total = sum(shard.size for shard in shards)
    if total > settings.IMPORT_MAX_TOTAL_BYTES:
        raise ImportProblems(
            [f"the shards are {total} bytes, over the {settings.IMPORT_MAX_TOTAL_BYTES} byte limit"]
        )
    work = Path(tempfile.mkdtemp(prefix="gamut-crag-mm-"))
    try:
        folder, images = work / "dataset", work / "images"
        (folder / "data").mkdir(parents=True)
        images.mkdir()
        problems = []
        for shard in shards:
            name = Path(shard.name).name
            if not re.fullmatch(rf"{re.escape(split)}-[A-Za-z0-9._-]*\.parquet", name):
                problems.append(
                    f"{name[:120]}: a shard of split {split} is named {split}-*.parquet"
                )
                continue
            with (folder / "data" / name).open("wb") as out:
                for chunk in shard.chunks():
                    out.write(chunk)
        if problems:
            raise ImportProblems(problems)
        known = None
        if entities is not None:
            suffix = ".csv" if entities.name.lower().endswith(".csv") else ".jsonl"
            path = work / f"entities{suffix}"
            with path.open("wb") as out:
                for chunk in entities.chunks():
                    out.write(chunk)
            known = read_entities(path)
        mapping = domain_mapping()
        unknown = domain_mapping_problems(mapping)
        if unknown:
            raise ImportProblems(unknown)
        plan = crag_mm_plan(
            folder, split=split, mapping=mapping, workdir=images, entities=known, revision=revision
        )
        lines = describe(plan, mapping)
        result = None if dry_run else crag_mm_import(plan, actor=actor, source=source)
        return UploadOutcome(plan=plan, lines=lines, result=result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def crag_mm_outcome(data, files, *, actor, source: str) -> dict:
    revision = (data.get("revision") or "").strip()
    outcome = crag_mm_from_upload(
        files.getlist("shards"),
        entities=files.get("entities"),
        split=data.get("split") or "validation",
        revision=revision,
        dry_run=str(data.get("dry_run", "")).lower() in ("1", "true", "on", "yes"),
        actor=actor,
        source=source,
    )
    return {
        "dry_run": outcome.result is None,
        "summary": outcome.lines,
        "imported": outcome.result.imported if outcome.result else [],
        "skipped": outcome.result.skipped if outcome.result else [],
        "to_import": len(outcome.plan.entries),
        "needs_entity": outcome.plan.needs_entity,
        "url_only": len(outcome.plan.url_only),
        "left_out": sum(outcome.plan.left_out.values()) + sum(outcome.plan.unmapped.values()),
    }
