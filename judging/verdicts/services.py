"""Writes of the judging app. `verdicts_record` (and `verdict_record`, one verdict) is the only
writer of verdicts, of the per-tier counts the leaderboards read and of the per-check counts the
check report reads, and keeps them all in one transaction."""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Exists, F, OuterRef, Q

from rubrics.models import RubricCheck

from ..models import (
    COUNT_FIELD,
    CheckAgreement,
    CheckVerdictCount,
    Judge,
    Response,
    ResponseTierCount,
    ScoringConfig,
    Setting,
    Verdict,
    VerdictValue,
)
from .scoring import DEFAULT_SETTINGS, ScoringSettings


class JudgingError(ValueError):
    """A verdict that cannot be recorded as asked."""


# What the judge's prompt shows, in the order the key takes them: judging/runs/llm_jobs.py renders
# its template from exactly these values (a template asking for anything else is refused), so
# whatever the judge sees is in the key. The photo is the image's stored file name (uploads
# never overwrite a file, so a new photo is a new name); "" for a text-only response.
KEY_INPUTS = ("question", "photo", "response", "tier", "check")


def judge_inputs(*, response: Response, tier: str, check_text: str) -> dict[str, str]:
    """The values the judge's prompt shows for one check of one response."""
    question = response.question
    photo = question.image.file.name if response.setting == Setting.MULTIMODAL else ""
    return {
        "question": question.text,
        "photo": photo or "",
        "response": response.text,
        "tier": tier,
        "check": check_text,
    }


def judge_model_identity(judge: Judge) -> str:
    """The judge's configured model (provider, model name and version, parameters): a judge
    switched to another model or version gets new keys, so its old verdicts are not copied."""
    model = judge.llm_model
    if model is None:
        return ""
    params = json.dumps(model.parameters or {}, sort_keys=True, separators=(",", ":"))
    return f"{model.provider}:{model.model}:{params}"


def key_digest(parts: Sequence[str]) -> str:
    """sha256 of the parts, each length-prefixed so that no two different inputs run together
    into the same string."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8")
        digest.update(f"{len(data)}:".encode())
        digest.update(data)
    return digest.hexdigest()


def verdict_key(*, judge: Judge, template_version: str, inputs: Mapping[str, str]) -> str:
    """The key of a verdict: the judge's name and model, the template version, and every
    value its prompt shows (KEY_INPUTS). Equal keys mean the judge saw the same prompt."""
    return key_digest(
        (
            judge.name,
            judge_model_identity(judge),
            template_version,
            *(inputs[name] for name in KEY_INPUTS),
        )
    )


def verdict_find(*, judge: Judge, key: str) -> Verdict | None:
    """An earlier usable verdict with this key (any rubric version): a re-run copies it for
    an unchanged check instead of calling the judge again. Failed verdicts are not reused."""
    return verdicts_find(judge=judge, keys=[key]).get(key)


def verdicts_find(*, judge: Judge, keys: Sequence[str]) -> dict[str, Verdict]:
    """verdict_find for many keys in one query: {key: the earliest usable verdict}."""
    found: dict[str, Verdict] = {}
    for row in (
        Verdict.objects.filter(judge=judge, key__in=set(keys))
        .exclude(verdict=VerdictValue.FAILED)
        .order_by("id")
    ):
        found.setdefault(row.key, row)
    return found


@dataclass(frozen=True)
class Given:
    """One verdict to record on one check (see verdicts_record)."""

    check_id: int  # the RubricCheck row's pk
    verdict: str
    rationale: str = ""
    judge_model_version: str = ""


def _bump(
    *, judge: Judge, response: Response, version_id: int, tier: str, deltas: Counter[str]
) -> None:
    row, _ = ResponseTierCount.objects.get_or_create(
        judge=judge, response=response, version_id=version_id, tier=tier
    )
    changes = {
        COUNT_FIELD[VerdictValue(v)]: F(COUNT_FIELD[VerdictValue(v)]) + n
        for v, n in deltas.items()
        if n
    }
    if changes:
        ResponseTierCount.objects.filter(pk=row.pk).update(**changes)


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
    """Record one judge's verdict on one check of one response, and count it (the rules are
    verdicts_record's)."""
    return verdicts_record(
        judge=judge,
        response=response,
        template_version=template_version,
        given=[Given(check.pk, verdict, rationale, judge_model_version)],
    )[0]


@transaction.atomic
def verdicts_record(
    *, judge: Judge, response: Response, given: Sequence[Given], template_version: str = ""
) -> list[Verdict]:
    """Record a judge's verdicts on checks of one response, and count them, in one
    transaction and a handful of queries whatever their number. Returns the verdict rows in
    the order given.

    Re-recording the same key changes nothing (the first verdict stands), except that a
    `failed` verdict is replaced by a real one when a retry obtains it. Refused, and nothing
    recorded: an unknown verdict, a check of a draft version (its checks may still change), a
    deleted check, a check of another question's rubric, a check given twice, and a check
    judged before on another text of the response."""
    for one in given:
        if one.verdict not in VerdictValue.values:
            raise JudgingError(
                f"unknown verdict {one.verdict!r}; expected one of {', '.join(VerdictValue.values)}"
            )
    ids = [one.check_id for one in given]
    if len(set(ids)) != len(ids):
        raise JudgingError("a check was given two verdicts")
    checks = RubricCheck.objects.select_related("version__rubric").in_bulk(ids)
    for check_id in ids:
        check = checks.get(check_id)
        if check is None:
            raise JudgingError(f"there is no check {check_id}")
        if check.version.frozen_at is None:
            raise JudgingError("the check's rubric version is a draft; judge frozen versions only")
        if check.deleted_at is not None:
            raise JudgingError("the check was deleted in its version")
        if check.version.rubric.question_id != response.question_id:
            raise JudgingError("the check belongs to another question's rubric")
    keys = {
        check_id: verdict_key(
            judge=judge,
            template_version=template_version,
            inputs=judge_inputs(
                response=response, tier=checks[check_id].tier, check_text=checks[check_id].text
            ),
        )
        for check_id in ids
    }
    existing = {
        row.check_row_id: row
        for row in Verdict.objects.select_for_update().filter(
            judge=judge, response=response, check_row_id__in=ids
        )
    }
    deltas: dict[tuple[int, str], Counter[str]] = defaultdict(Counter)
    changed: dict[int, tuple[str | None, str]] = {}  # check -> (the verdict it replaces, new)
    created: list[Verdict] = []
    for one in given:
        check, row = checks[one.check_id], existing.get(one.check_id)
        counts = deltas[(check.version_id, check.tier)]
        if row is None:
            row = Verdict(
                judge=judge,
                response=response,
                check_row=check,
                verdict=one.verdict,
                rationale=one.rationale,
                template_version=template_version,
                judge_model_version=one.judge_model_version,
                key=keys[one.check_id],
            )
            created.append(row)
            existing[one.check_id] = row
            counts[one.verdict] += 1
            changed[one.check_id] = (None, one.verdict)
            continue
        if row.verdict != VerdictValue.FAILED or one.verdict == VerdictValue.FAILED:
            if row.key != keys[one.check_id]:
                raise JudgingError(
                    "this check was judged on another prompt (question, photo, "
                    "response, tier or judge model)"
                )
            continue  # idempotent
        # A failed verdict is replaced by the real one, with the key of what was just seen.
        counts[row.verdict] -= 1
        counts[one.verdict] += 1
        changed[one.check_id] = (row.verdict, one.verdict)
        row.verdict, row.rationale = one.verdict, one.rationale
        row.judge_model_version, row.key = one.judge_model_version, keys[one.check_id]
        row.save(update_fields=["verdict", "rationale", "judge_model_version", "key"])
    Verdict.objects.bulk_create(created)
    for (version_id, tier), counts in deltas.items():
        _bump(judge=judge, response=response, version_id=version_id, tier=tier, deltas=counts)
    _tally(judge=judge, response=response, changed=changed)
    return [existing[one.check_id] for one in given]


def _agreement(verdicts: list[str]) -> tuple[int, int]:
    """(shared, differing) of one response on one check from its judges' verdicts: graded by
    two or more judges, and not all alike. A failed verdict is no verdict."""
    given = [v for v in verdicts if v != VerdictValue.FAILED]
    shared = len(given) >= 2
    return int(shared), int(shared and len(set(given)) > 1)


def _tally(*, judge: Judge, response: Response, changed: dict[int, tuple[str | None, str]]) -> None:
    """Keep CheckVerdictCount and CheckAgreement in step with the verdicts just recorded or
    replaced (check -> (the verdict replaced or None, the new one)). Seven queries whatever
    the number of checks."""
    if not changed:
        return
    ids = sorted(changed)
    setting = response.setting
    CheckAgreement.objects.bulk_create(
        [CheckAgreement(check_row_id=c, setting=setting) for c in ids], ignore_conflicts=True
    )
    CheckVerdictCount.objects.bulk_create(
        [CheckVerdictCount(judge=judge, check_row_id=c, setting=setting) for c in ids],
        ignore_conflicts=True,
    )
    # Locked before the other judges' verdicts are read, in check order: another judge's
    # verdict on the same check waits here until this one is committed, and then sees it.
    agreements = {
        row.check_row_id: row
        for row in CheckAgreement.objects.select_for_update()
        .filter(setting=setting, check_row_id__in=ids)
        .order_by("check_row_id")
    }
    counts = {
        row.check_row_id: row
        for row in CheckVerdictCount.objects.select_for_update()
        .filter(judge=judge, setting=setting, check_row_id__in=ids)
        .order_by("check_row_id")
    }
    others: dict[int, list[str]] = defaultdict(list)
    for check_id, verdict in (
        Verdict.objects.filter(response=response, check_row_id__in=ids)
        .exclude(judge=judge)
        .values_list("check_row_id", "verdict")
    ):
        others[check_id].append(verdict)
    moved = []
    for check_id, (old, new) in changed.items():
        count = counts[check_id]
        if old is not None:
            field = COUNT_FIELD[VerdictValue(old)]
            setattr(count, field, getattr(count, field) - 1)
        field = COUNT_FIELD[VerdictValue(new)]
        setattr(count, field, getattr(count, field) + 1)
        before = _agreement([*others[check_id], *([old] if old else [])])
        after = _agreement([*others[check_id], new])
        if before != after:
            agreement = agreements[check_id]
            agreement.shared += after[0] - before[0]
            agreement.differing += after[1] - before[1]
            moved.append(agreement)
    CheckVerdictCount.objects.bulk_update(counts.values(), list(COUNT_FIELD.values()))
    if moved:
        CheckAgreement.objects.bulk_update(moved, ["shared", "differing"])


def check_tallies_rebuild(
    *,
    verdicts=Verdict,
    check_counts=CheckVerdictCount,
    agreements=CheckAgreement,
    batch_size: int = 5000,
) -> tuple[int, int]:
    """Write CheckVerdictCount and CheckAgreement afresh from the verdicts, as
    `verdicts_record` would have left them: for the migration that adds them (which passes its
    historical models) and for bench/generate_judging_data.py, which writes verdicts in bulk.
    Returns the rows written of each."""
    check_counts.objects.all().delete()
    agreements.objects.all().delete()
    kinds = {field: Count("pk", filter=Q(verdict=value)) for value, field in COUNT_FIELD.items()}
    rows = (
        verdicts.objects.values("judge_id", "check_row_id", "response__setting")
        .annotate(**kinds)
        .order_by()
    )
    written = [0, 0]
    batch = []
    for row in rows.iterator(chunk_size=batch_size):
        batch.append(
            check_counts(
                judge_id=row["judge_id"],
                check_row_id=row["check_row_id"],
                setting=row["response__setting"],
                **{field: row[field] for field in COUNT_FIELD.values()},
            )
        )
        if len(batch) >= batch_size:
            written[0] += len(check_counts.objects.bulk_create(batch))
            batch = []
    written[0] += len(check_counts.objects.bulk_create(batch))
    given = verdicts.objects.exclude(verdict=VerdictValue.FAILED)
    other = given.filter(check_row_id=OuterRef("check_row_id"), response_id=OuterRef("response_id"))
    shared = (
        given.filter(Exists(other.exclude(pk=OuterRef("pk"))))
        .values("check_row_id", "response__setting")
        .annotate(
            shared=Count("response_id", distinct=True),
            differing=Count(
                "response_id",
                distinct=True,
                filter=Q(Exists(other.exclude(verdict=OuterRef("verdict")))),
            ),
        )
        .order_by()
    )
    batch = [
        agreements(
            check_row_id=row["check_row_id"],
            setting=row["response__setting"],
            shared=row["shared"],
            differing=row["differing"],
        )
        for row in shared
    ]
    written[1] = len(agreements.objects.bulk_create(batch, batch_size=batch_size))
    return written[0], written[1]


def scoring_settings() -> ScoringSettings:
    """The benchmark's scoring settings: the ScoringConfig row, or the method's defaults."""
    row = ScoringConfig.objects.filter(pk=1).first()
    return row.as_settings() if row is not None else DEFAULT_SETTINGS
