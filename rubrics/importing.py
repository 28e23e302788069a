"""Rubric import: a JSONL file of meta-rubrics, validated whole before anything is written.

One JSON object a line:
  {"source_id": the image's source id, "meta_rubric": a meta-rubric document (schema_version 1),
   "stage"?: "imported" (the default), "llm_draft", "llm_refined_1" or "llm_refined_2"}

Each line becomes one version of the rubric of that image's final question, compiled from its
meta-rubric (services.rubric_version_create). A bad line fails the whole import: every problem
is reported with its line number, and nothing is written.

Validation runs in two parts: what the file alone decides (JSON, fields, the meta-rubric, repeats
within the file), then what the database decides (the image, its question, the rubric's
versions). The database part runs again inside the writing transaction, so that a version added
or a question dropped between the two is still refused rather than half imported.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.images.importing import json_line
from annotation.models import AuditEvent, FinalQuestion, Image
from core.errors import InvalidInput
from core.text import MAX_VALUE, clean_source_id, json_text_problems

from . import compiler, services
from .models import HUMAN_STAGES, STAGE_ORDER, RubricVersion, Stage

FIELDS = ("source_id", "meta_rubric", "stage")
REQUIRED = ("source_id", "meta_rubric")
DEFAULT_STAGE = Stage.IMPORTED
# Human versions are made in the revision workspace, never imported.
IMPORTABLE_STAGES: tuple[str, ...] = tuple(s.value for s in STAGE_ORDER if s not in HUMAN_STAGES)
MADE_BY_MODEL = "import"
CHUNK = 500  # source ids per query
# Any one text of a meta-rubric (a statement, an option, a snippet's evidence): the limit of any
# one value of a request, so a line cannot store what the API would refuse.
META_TEXT_MAX = MAX_VALUE

Progress = Callable[[Iterable], Iterable]


def _no_progress(items: Iterable) -> Iterable:
    return items


class RubricImportProblems(Exception):
    """The file has bad lines. `problems` holds one message per problem, each starting with its
    line number (a meta-rubric may have several); `lines` is how many lines are bad."""

    def __init__(self, problems: list[str], lines: int):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.lines = lines


@dataclass
class RubricEntry:
    line: int
    source_id: str
    stage: str
    meta_document: Any  # the decoded meta_rubric; valid only for an entry without problems
    # Filled in by the database checks.
    question: FinalQuestion | None = None


@dataclass
class ImportedVersion:
    source_id: str
    stage: str
    version: RubricVersion
    checks: int


@dataclass
class _LineReport:
    """The problems of one line, kept apart so that a line's problems are printed together."""

    line: int
    messages: list[str] = field(default_factory=list)


# --- what the file alone decides ------------------------------------------------------------


def _meta_problems(document: Any) -> list[str]:
    """The meta-rubric's problems, each with its JSON path from the line's object."""
    try:
        compiler.validate(document)
    except compiler.MetaRubricInvalid as exc:
        return [f"{_meta_path(problem.path)}: {problem.message}" for problem in exc.problems]
    return []


def _meta_path(path: str) -> str:
    # The compiler names the root "document"; on a line it is the meta_rubric field.
    if path == "document":
        return "meta_rubric"
    return f"meta_rubric{path}" if path.startswith("[") else f"meta_rubric.{path}"


def _stage_problem(stage: Any) -> str | None:
    if not isinstance(stage, str):
        return f"stage must be text, one of {', '.join(IMPORTABLE_STAGES)}"
    if stage in HUMAN_STAGES:
        return (
            f"stage {stage!r} is a human round: those are made in the revision workspace, "
            f"not imported (use one of {', '.join(IMPORTABLE_STAGES)})"
        )
    if stage not in IMPORTABLE_STAGES:
        return f"unknown stage {stage[:60]!r}; expected one of {', '.join(IMPORTABLE_STAGES)}"
    return None


def _line_problems(obj: Any) -> tuple[list[str], RubricEntry | None]:
    """The problems one decoded line shows by itself, and its entry whenever its source_id is
    usable, so that the database checks can report on it too: a line with a bad meta-rubric
    and an unknown source_id gets both problems at once. (Its line number and question are set
    later; a stage that is not importable is left empty.)"""
    if not isinstance(obj, dict):
        return ["not a JSON object"], None
    problems = [f"missing field {name!r}" for name in REQUIRED if name not in obj]
    problems += [
        f"unknown field {name!r}; a line has {', '.join(FIELDS)}"
        for name in sorted(set(obj) - set(FIELDS))
    ]
    source_id = obj.get("source_id")
    usable = isinstance(source_id, str) and bool(source_id.strip())
    if "source_id" in obj and not usable:
        problems.append("source_id must be non-empty text")
    elif usable:
        try:
            clean_source_id(source_id.strip())
        except InvalidInput as exc:
            problems.append(exc.message)
            usable = False
    stage = obj.get("stage", DEFAULT_STAGE.value)
    stage_problem = _stage_problem(stage)
    if stage_problem:
        problems.append(stage_problem)
    if "meta_rubric" in obj:
        # The texts first: a NUL or an override is refused whatever the compiler thinks of it.
        problems += json_text_problems(
            obj["meta_rubric"], "meta_rubric", limit=META_TEXT_MAX, bidi_controls=False
        )
        problems += _meta_problems(obj["meta_rubric"])
    if not usable:
        return problems, None
    return problems, RubricEntry(
        line=0,
        source_id=source_id.strip(),
        stage="" if stage_problem else stage,
        meta_document=obj.get("meta_rubric"),
    )


def _parse_lines(
    lines: Iterable[str], progress: Progress
) -> tuple[list[RubricEntry], list[RubricEntry], dict[int, _LineReport]]:
    """(the good entries, every entry the database can check, the bad lines' reports)"""
    entries: list[RubricEntry] = []
    checkable: list[RubricEntry] = []
    reports: dict[int, _LineReport] = {}
    first_line_of: dict[tuple[str, str], int] = {}
    for number, raw in enumerate(progress(lines), start=1):
        if not raw.strip():
            continue
        report = _LineReport(number)
        obj, problem = json_line(raw)
        if problem:
            report.messages.append(problem)
            reports[number] = report
            continue
        report.messages, entry = _line_problems(obj)
        key = _repeat_key(obj)
        if key is not None:
            earlier = first_line_of.setdefault(key, number)
            if earlier != number:
                report.messages.append(
                    f"source_id {key[0][:200]!r} with stage {key[1]!r} repeats line {earlier}"
                )
        if entry is not None:
            entry.line = number
            checkable.append(entry)
        if report.messages:
            reports[number] = report
        elif entry is not None:
            entries.append(entry)
    return entries, checkable, reports


def _repeat_key(obj: Any) -> tuple[str, str] | None:
    """(source_id, stage) of a line, when both are readable, to find a pair given twice."""
    if not isinstance(obj, dict):
        return None
    source_id, stage = obj.get("source_id"), obj.get("stage", DEFAULT_STAGE.value)
    if not isinstance(source_id, str) or not source_id.strip() or not isinstance(stage, str):
        return None
    return source_id.strip(), stage


# --- what the database decides --------------------------------------------------------------


def _database_problems(entries: list[RubricEntry]) -> dict[int, list[str]]:
    """Problems by line number; sets each entry's question. Two queries per 500 source ids,
    not a few per line."""
    images: dict[str, Image] = {}
    versions: dict[int, list[tuple[str, bool]]] = {}
    source_ids = sorted({entry.source_id for entry in entries})
    # In chunks: SQLite refuses a query with more than 32,766 parameters.
    for start in range(0, len(source_ids), CHUNK):
        found = list(
            Image.objects.filter(source_id__in=source_ids[start : start + CHUNK]).select_related(
                "question"
            )
        )
        images.update((image.source_id, image) for image in found)
        question_ids = [
            image.question.pk for image in found if getattr(image, "question", None) is not None
        ]
        for question_id, stage, frozen_at in (
            RubricVersion.objects.filter(rubric__question_id__in=question_ids)
            .order_by("id")
            .values_list("rubric__question_id", "stage", "frozen_at")
        ):
            versions.setdefault(question_id, []).append((stage, frozen_at is not None))

    problems: dict[int, list[str]] = {}
    for entry in entries:
        entry.question = None
        image = images.get(entry.source_id)
        message = _question_problem(entry.source_id, image)
        if message is None:
            assert image is not None
            entry.question = image.question
            if entry.stage:  # an unusable stage is reported already
                message = _version_problem(entry, versions.get(entry.question.pk, []))
        if message is not None:
            problems[entry.line] = [message]
    return problems


def _question_problem(source_id: str, image: Image | None) -> str | None:
    if image is None:
        return f"no image has source_id {source_id!r}"
    question = getattr(image, "question", None)
    if question is None:
        return f"image {source_id!r} has no final question yet, so it can have no rubric"
    if question.dropped_at is not None:
        reason = f" ({question.drop_reason})" if question.drop_reason else ""
        return (
            f"the question of {source_id!r} is dropped{reason}; an admin must restore it "
            "before its rubric can change"
        )
    return None


def _version_problem(entry: RubricEntry, existing: list[tuple[str, bool]]) -> str | None:
    """Refuse a stage the rubric has, a rubric in the middle of a human round, and a stage that
    would come before one the rubric already has: the benchmark uses the latest version, so an
    out-of-order version would silently replace later work. (Lines of one rubric in the file
    need no such check against each other: they are written in stage order.)

    `existing` is the rubric's (stage, frozen) in the order they were made."""
    stages = [stage for stage, _frozen in existing]
    if entry.stage in stages:
        return f"the rubric of {entry.source_id!r} already has a version of stage {entry.stage}"
    if existing and not existing[-1][1]:
        return (
            f"the rubric of {entry.source_id!r} is in a human round ({existing[-1][0]}) "
            "that is not complete; import after the round is complete"
        )
    rank = STAGE_ORDER.index(Stage(entry.stage))
    later = [stage for stage in stages if STAGE_ORDER.index(Stage(stage)) > rank]
    if later:
        return (
            f"stage {entry.stage!r} comes before the rubric's {later[-1]} version of "
            f"{entry.source_id!r}; a new version must come after the latest one"
        )
    return None


# --- entry points ---------------------------------------------------------------------------


def _raise_if_any(reports: dict[int, _LineReport]) -> None:
    bad = [reports[number] for number in sorted(reports) if reports[number].messages]
    if bad:
        raise RubricImportProblems(
            [f"line {report.line}: {message}" for report in bad for message in report.messages],
            lines=len(bad),
        )


def rubrics_parse(lines: Iterable[str], *, progress: Progress = _no_progress) -> list[RubricEntry]:
    """Validate every line; raise RubricImportProblems listing every problem of every bad line,
    or return the entries ready for rubrics_import."""
    entries, checkable, reports = _parse_lines(lines, progress)
    if checkable:
        for number, messages in _database_problems(checkable).items():
            reports.setdefault(number, _LineReport(number)).messages.extend(messages)
    _raise_if_any(reports)
    if not entries:
        raise RubricImportProblems(["the file has no lines"], lines=0)
    return entries


def _write_order(entries: list[RubricEntry]) -> list[RubricEntry]:
    """By line, except that a rubric's own versions go in stage order, whatever their lines:
    each version's parent is the rubric's latest version when it is written."""
    first_line: dict[str, int] = {}
    for entry in entries:
        first_line.setdefault(entry.source_id, entry.line)
    return sorted(
        entries, key=lambda e: (first_line[e.source_id], STAGE_ORDER.index(Stage(e.stage)), e.line)
    )


def rubrics_import(
    entries: list[RubricEntry], *, file_name: str, progress: Progress = _no_progress
) -> list[ImportedVersion]:
    """Write validated entries in one transaction: every version, or none."""
    now = timezone.now()
    imported: list[ImportedVersion] = []
    with transaction.atomic():
        # Checked again under the transaction: the database may have moved since rubrics_parse.
        again = _database_problems(entries)
        if again:
            _raise_if_any(
                {number: _LineReport(number, messages) for number, messages in again.items()}
            )
        for entry in progress(_write_order(entries)):
            assert entry.question is not None
            version = services.rubric_version_create(
                question=entry.question,
                meta_document=entry.meta_document,
                stage=entry.stage,
                made_by_model=MADE_BY_MODEL,
                now=now,
            )
            imported.append(
                ImportedVersion(entry.source_id, entry.stage, version, version.checks.count())
            )
        AuditEvent.objects.create(
            action="rubrics.import",
            data={
                "file": file_name,
                "versions": len(imported),
                "rubrics": len({i.source_id for i in imported}),
            },
            at=now,
        )
    return imported
