"""Cutting a release, and its content hash.

`create_release(name, notes, by)` freezes the current state: every final question that is not
dropped and whose rubric has a frozen version, on its final version (the latest frozen one,
what the leaderboard scores: `RubricVersion.objects.final`); its text, entity, domain and
popularity as they are now; its image with the source id and, from the image's import batch,
the dataset, split, revision and licence; the scoring parameters in force
(`judging.verdicts.services.scoring_settings`) and the sorted list of the questions' domains.
A question without a frozen rubric version is left out (and counted). A release never changes
(judging/models.py: Release).

The content hash is "sha256:" + the SHA-256 of the canonical JSON (`canonical_json`: sorted
keys, no spaces, UTF-8, no ASCII escaping) of `release_record(...)`:

    {"format": "gamut-release", "format_version": 1,
     "scoring": {"lambda", "mu", "weights": {"answer_critical", "valuable", "context"}},
     "domains": [...],
     "questions": [  # in source id code point order
        {"source_id", "question", "entity", "domain", "popularity", "image",
         "source": {"dataset", "split", "revision", "licence"},
         "rubric": {"stage", "meta_rubric", "checks": [  # live checks, in position order
             {"id", "kind", "tier", "secondary", "source", "text", "snippets",
              "threshold", "options", "steps"}]}}]}

It covers what a score depends on and what a reader of the release is told, and nothing that
names this database or this moment: not the release's name, notes, author or date, nor row ids.
Two releases of the same content have the same hash. It covers the image's file name, not the
photo's bytes (the export's manifest hashes those).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count

from annotation.models import FinalQuestion
from core.errors import InvalidInput
from core.text import clean_text
from rubrics.models import RubricCheck, RubricVersion

from ..models import RELEASE_NAME_MAX, RELEASE_NOTES_MAX, Release, ReleaseQuestion
from ..verdicts.scoring import TIERS, ScoringSettings
from ..verdicts.services import scoring_settings

FORMAT = "gamut-release"
FORMAT_VERSION = 1
# Words the pages and commands use beside release names (/releases/diff/, "draft").
RESERVED = ("cut", "diff", "draft")


class ReleaseError(InvalidInput):
    """A release cannot be cut as asked (400); the message says why, for people, and `field`
    names the input at fault when one is."""


class ReleaseExists(ReleaseError):
    """The name is taken (409): a release never changes, so a new one needs a new name."""

    status = 409


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode()


def _check(row: RubricCheck) -> dict[str, Any]:
    return {
        "id": row.check_id,
        "kind": row.kind,
        "tier": row.tier,
        "secondary": row.secondary,
        "source": row.source,
        "text": row.text,
        "snippets": row.snippets,
        "threshold": row.threshold,
        "options": row.options,
        "steps": row.steps,
    }


def release_record(
    settings: ScoringSettings,
    domains: list[str],
    rows: Iterable[ReleaseQuestion],
    versions: dict[int, RubricVersion],
    checks: dict[int, list[RubricCheck]],
) -> dict[str, Any]:
    """The frozen record the content hash is taken over (the module's docstring). `versions`
    and `checks` are keyed by rubric version id; `checks` lists each version's live checks in
    position order."""
    questions = []
    for row in sorted(rows, key=lambda r: r.source_id):
        version = versions[row.version_id]
        questions.append(
            {
                "source_id": row.source_id,
                "question": row.text,
                "entity": row.entity,
                "domain": row.domain,
                "popularity": row.popularity,
                "image": row.image.file.name,
                "source": {
                    "dataset": row.source,
                    "split": row.source_split,
                    "revision": row.source_revision,
                    "licence": row.licence,
                },
                "rubric": {
                    "stage": version.stage,
                    "meta_rubric": version.meta_rubric,
                    "checks": [_check(c) for c in checks.get(row.version_id, [])],
                },
            }
        )
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "scoring": {
            "lambda": settings.lambda_,
            "mu": settings.mu,
            "weights": dict(zip(TIERS, settings.weights, strict=True)),
        },
        "domains": domains,
        "questions": questions,
    }


def content_hash(record: dict[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(record)).hexdigest()


def _checks_of(version_ids: Iterable[int]) -> dict[int, list[RubricCheck]]:
    """Live checks per version, in position order; one query per 500 versions."""
    ids = sorted(set(version_ids))
    out: dict[int, list[RubricCheck]] = defaultdict(list)
    for start in range(0, len(ids), 500):
        for row in RubricCheck.objects.filter(
            version_id__in=ids[start : start + 500], deleted_at__isnull=True
        ).order_by("version_id", "position", "id"):
            out[row.version_id].append(row)
    return out


def stored_record(release: Release) -> dict[str, Any]:
    """The record of a saved release, read back from its rows."""
    rows = list(release.questions.select_related("image"))
    versions = RubricVersion.objects.in_bulk({r.version_id for r in rows})
    return release_record(
        release.scoring_settings(),
        list(release.domains),
        rows,
        versions,
        _checks_of(versions),
    )


def verify(release: Release) -> bool:
    """Whether the release's rows still give its content hash."""
    return content_hash(stored_record(release)) == release.content_hash


def _plain(error: ValidationError) -> str:
    return " ".join(message for messages in error.message_dict.values() for message in messages)


def _current_rows() -> tuple[list[ReleaseQuestion], dict[int, RubricVersion], int]:
    """Unsaved rows of the current state, the versions they use, and how many questions not
    dropped were left out for lack of a frozen rubric version."""
    questions = list(
        FinalQuestion.objects.filter(dropped_at__isnull=True)
        .select_related("image__import_batch")
        .order_by("id")
    )
    versions = {
        v.rubric.question_id: v
        for v in RubricVersion.objects.final()
        .filter(rubric__question__dropped_at__isnull=True)
        .select_related("rubric")
    }
    sizes = dict(
        RubricCheck.objects.filter(
            version_id__in=[v.pk for v in versions.values()], deleted_at__isnull=True
        )
        .values("version_id")
        .annotate(n=Count("id"))
        .values_list("version_id", "n")
        .order_by()
    )
    rows = []
    without = 0
    for question in questions:
        version = versions.get(question.pk)
        if version is None:
            without += 1
            continue
        image = question.image
        batch = image.import_batch
        rows.append(
            ReleaseQuestion(
                question=question,
                version=version,
                text=question.text,
                entity=image.entity,
                domain=image.domain,
                popularity=image.popularity,
                image=image,
                source_id=image.source_id,
                source=batch.dataset if batch else "",
                source_split=batch.split if batch else "",
                source_revision=batch.revision if batch else "",
                licence=batch.license if batch else "",
                n_checks=sizes.get(version.pk, 0),
                stage=version.stage,
            )
        )
    return rows, {v.pk: v for v in versions.values()}, without


def create_release(name: str, notes: str = "", by: Any = None) -> Release:
    """Cut a release of the current state (the module's docstring), in one transaction.
    Raises ReleaseError, in words for people, for a name that is taken or malformed, notes
    that are too long, or a state with no question to release."""
    try:
        name = clean_text(name, "name", limit=RELEASE_NAME_MAX, multiline=False, label="The name")
        notes = clean_text(notes, "notes", limit=RELEASE_NOTES_MAX, label="The notes", plural=True)
    except InvalidInput as exc:
        raise ReleaseError(exc.message, exc.field) from exc
    if not name:
        raise ReleaseError("Give the release a name, for example v1.0.", "name")
    if name.lower() in RESERVED:
        raise ReleaseError(
            f"{name} names a page of the releases ({', '.join(RESERVED)}); choose another name.",
            "name",
        )
    if Release.objects.filter(name=name).exists():
        raise ReleaseExists(
            f"A release named {name} exists already; a release never changes, so give the "
            "new one another name.",
            "name",
        )
    settings = scoring_settings()
    release = Release(
        name=name,
        notes=notes,
        created_by=by,
        partial_credit=settings.lambda_,
        mu=settings.mu,
        weight_answer_critical=settings.weights[0],
        weight_valuable=settings.weights[1],
        weight_context=settings.weights[2],
    )
    try:
        release.full_clean(exclude=["content_hash", "domains"])
    except ValidationError as exc:
        raise ReleaseError(_plain(exc), next(iter(exc.message_dict), None)) from exc
    with transaction.atomic():
        rows, versions, _without = _current_rows()
        if not rows:
            raise ReleaseError(
                "There is no question to release: no final question that is not dropped has "
                "a frozen rubric version yet."
            )
        release.domains = sorted({row.domain for row in rows})
        record = release_record(settings, release.domains, rows, versions, _checks_of(versions))
        release.content_hash = content_hash(record)
        try:
            with transaction.atomic():
                release.save()
        except IntegrityError as exc:  # the same name, cut at the same moment
            raise ReleaseExists(
                f"A release named {name} exists already; give the new one another name.", "name"
            ) from exc
        for row in rows:
            row.release = release
        ReleaseQuestion.objects.bulk_create(rows, batch_size=500)
    return release
