"""Writes of the judging app. `verdict_record` is the only writer of verdicts and of the
per-tier counts the leaderboards read, and keeps both in one transaction."""

from __future__ import annotations

import hashlib

from django.db import transaction
from django.db.models import F

from rubrics.models import RubricCheck

from .models import COUNT_FIELD, Judge, Response, ResponseTierCount, Verdict, VerdictValue


class JudgingError(ValueError):
    """A verdict that cannot be recorded as asked."""


def verdict_key(*, judge: Judge, template_version: str, check_text: str,
                response_text: str) -> str:
    """sha256 of judge, template version, check text and response text, each length-prefixed
    so that no two different inputs run together into the same string."""
    digest = hashlib.sha256()
    for part in (judge.name, template_version, check_text, response_text):
        data = part.encode("utf-8")
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def verdict_find(*, judge: Judge, key: str) -> Verdict | None:
    """An earlier usable verdict with this key (any rubric version): a re-run copies it for
    an unchanged check instead of calling the judge again. Failed verdicts are not reused."""
    return (Verdict.objects.filter(judge=judge, key=key)
            .exclude(verdict=VerdictValue.FAILED).order_by("id").first())


def _bump(*, judge: Judge, response: Response, check: RubricCheck, verdict: str,
          by: int) -> None:
    row, _ = ResponseTierCount.objects.get_or_create(
        judge=judge, response=response, version_id=check.version_id, tier=check.tier
    )
    field = COUNT_FIELD[VerdictValue(verdict)]
    ResponseTierCount.objects.filter(pk=row.pk).update(**{field: F(field) + by})


@transaction.atomic
def verdict_record(
    *,
    judge: Judge,
    response: Response,
    check: RubricCheck,
    verdict: str,
    rationale: str = "",
    template_version: str = "",
    judge_model_version: str = "",
) -> Verdict:
    """Record one judge's verdict on one check of one response, and count it.

    Re-recording the same key changes nothing (the first verdict stands), except that a
    `failed` verdict is replaced by a real one when a retry obtains it. Refused: an unknown
    verdict, a check of a draft version (its checks may still change), a deleted check, and a
    check of another question's rubric."""
    if verdict not in VerdictValue.values:
        raise JudgingError(f"unknown verdict {verdict!r}; expected one of "
                           f"{', '.join(VerdictValue.values)}")
    check = RubricCheck.objects.select_related("version__rubric").get(pk=check.pk)
    if check.version.frozen_at is None:
        raise JudgingError("the check's rubric version is a draft; judge frozen versions only")
    if check.deleted_at is not None:
        raise JudgingError("the check was deleted in its version")
    if check.version.rubric.question_id != response.question_id:
        raise JudgingError("the check belongs to another question's rubric")
    key = verdict_key(judge=judge, template_version=template_version, check_text=check.text,
                      response_text=response.text)
    existing = (Verdict.objects.select_for_update()
                .filter(judge=judge, response=response, check_row=check).first())
    if existing is not None:
        if existing.key != key:
            raise JudgingError("this check was judged on another text of the response")
        if existing.verdict != VerdictValue.FAILED or verdict == VerdictValue.FAILED:
            return existing  # idempotent
        _bump(judge=judge, response=response, check=check, verdict=existing.verdict, by=-1)
        existing.verdict = verdict
        existing.rationale = rationale
        existing.judge_model_version = judge_model_version
        existing.save(update_fields=["verdict", "rationale", "judge_model_version"])
        _bump(judge=judge, response=response, check=check, verdict=verdict, by=1)
        return existing
    created = Verdict.objects.create(
        judge=judge, response=response, check_row=check, verdict=verdict, rationale=rationale,
        template_version=template_version, judge_model_version=judge_model_version, key=key,
    )
    _bump(judge=judge, response=response, check=check, verdict=verdict, by=1)
    return created
