"""Response import: a JSONL file of answers produced elsewhere, validated whole before anything
is written (like the image import).

One JSON object a line: {"source_id", "model", "setting": "multimodal"|"text_only",
"response"}. A bad line (not JSON, a missing or unknown field, an unknown source id, a dropped
question, a bad setting, a (source_id, model, setting) given twice) fails the whole import with
one message per bad line, naming its line number. A response that exists already is skipped and
reported. A model name not seen before becomes a new EvaluatedModel.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction

from annotation.images.importing import ImportProblems, json_line
from annotation.models import FinalQuestion
from core.errors import InvalidInput
from core.text import clean_source_id, clean_text

from ..models import EvaluatedModel, Response, Setting

FIELDS = ("source_id", "model", "setting", "response")
MODEL_MAX = 100  # EvaluatedModel.name's max_length
# An answer is long prose (a deep-research report can run to tens of thousands of characters);
# the cap keeps one line from storing megabytes.
RESPONSE_MAX = 200_000


def _text_problems(obj: dict) -> list[str]:
    """The boundary's checks (core.text) on the line's texts: a safe source id, a model name of
    one line without controls or bidirectional overrides, an answer without control
    characters, each within its length."""
    checks = {
        "source_id": lambda value: clean_source_id(value.strip()),
        "model": lambda value: clean_text(value, "model", limit=MODEL_MAX, multiline=False),
        "response": lambda value: clean_text(value, "response", limit=RESPONSE_MAX, strip=False),
    }
    problems = []
    for name, check in checks.items():
        value = obj.get(name)
        if isinstance(value, str) and value.strip():
            try:
                check(value)
            except InvalidInput as exc:
                problems.append(exc.message)
    return problems


@dataclass
class ResponseEntry:
    line: int
    source_id: str
    model: str
    setting: str
    text: str
    question_id: int = 0


@dataclass
class ResponseImportResult:
    imported: int
    skipped: list[tuple[str, str, str]]
    new_models: list[str]


def responses_parse(lines: Iterable[str]) -> list[ResponseEntry]:
    """Validate every line (against the database too); raise ImportProblems listing each bad
    line, or return the entries."""
    problems: list[tuple[int, str]] = []
    entries: list[ResponseEntry] = []
    first_line_of: dict[tuple[str, str, str], int] = {}
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        obj, problem = json_line(raw)
        if problem:
            problems.append((number, problem))
            continue
        if not isinstance(obj, dict):
            problems.append((number, "not a JSON object"))
            continue
        line_problems = []
        for name in FIELDS:
            value = obj.get(name)
            if value is None:
                line_problems.append(f"missing field {name!r}")
            elif not isinstance(value, str) or not value.strip():
                line_problems.append(f"field {name!r} must be non-empty text")
        unknown = sorted(set(obj) - set(FIELDS))
        if unknown:
            line_problems.append(f"unknown field {unknown[0][:60]!r}")
        line_problems += _text_problems(obj)
        setting = obj.get("setting")
        if isinstance(setting, str) and setting.strip() and setting not in Setting.values:
            line_problems.append(f"setting must be multimodal or text_only, not {setting[:60]!r}")
        if line_problems:
            problems.append((number, "; ".join(line_problems)))
            continue
        entry = ResponseEntry(
            line=number,
            source_id=obj["source_id"].strip(),
            model=obj["model"].strip(),
            setting=setting,
            text=obj["response"],
        )
        earlier = first_line_of.setdefault((entry.source_id, entry.model, setting), number)
        if earlier != number:
            problems.append(
                (
                    number,
                    f"({entry.source_id!r}, {entry.model!r}, {setting!r}) repeats line {earlier}",
                )
            )
            continue
        entries.append(entry)

    questions = {
        source_id: (pk, dropped_at)
        for pk, source_id, dropped_at in FinalQuestion.objects.filter(
            image__source_id__in={e.source_id for e in entries}
        ).values_list("pk", "image__source_id", "dropped_at")
    }
    for entry in entries:
        found = questions.get(entry.source_id)
        if found is None:
            problems.append((entry.line, f"source_id {entry.source_id!r} has no final question"))
        elif found[1] is not None:
            problems.append((entry.line, f"the question of {entry.source_id!r} was dropped"))
        else:
            entry.question_id = found[0]
    if problems:
        raise ImportProblems([f"line {n}: {text}" for n, text in sorted(problems)])
    if not entries:
        raise ImportProblems(["the file has no lines"])
    return entries


@transaction.atomic
def responses_import(entries: list[ResponseEntry]) -> ResponseImportResult:
    """Write validated entries in one transaction; existing responses are skipped."""
    names = {e.model for e in entries}
    models = {m.name: m for m in EvaluatedModel.objects.filter(name__in=names)}
    new_models = sorted(names - set(models))
    for name in new_models:
        models[name] = EvaluatedModel.objects.create(name=name)
    existing = set(
        Response.objects.filter(
            question_id__in={e.question_id for e in entries}, model__name__in=names
        ).values_list("question_id", "model__name", "setting")
    )
    skipped, new = [], []
    for e in entries:
        if (e.question_id, e.model, e.setting) in existing:
            skipped.append((e.source_id, e.model, e.setting))
        else:
            new.append(
                Response(
                    model=models[e.model], question_id=e.question_id, setting=e.setting, text=e.text
                )
            )
    Response.objects.bulk_create(new, batch_size=500)
    return ResponseImportResult(imported=len(new), skipped=skipped, new_models=new_models)
