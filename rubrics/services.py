"""Every write of stage 2 (apart from the LLM jobs) goes through these functions.

Versions: `rubric_version_create` validates and compiles a meta-rubric into a new version.
Human rounds: `revision_claim` opens (or resumes) the next rubric waiting for a human round as a
draft version holding a copy of its parent's checks; the `check_*` functions edit that draft,
each refused when the caller's `revision` is stale (optimistic locking), each kept as a
`CheckEdit`; `revision_complete` freezes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from annotation.labels import words
from annotation.models import FinalQuestion
from core import access
from core import text as text_limits
from core.errors import Conflict, InvalidInput, NotAllowed, NotFound
from core.text import clean_int, clean_text

from . import compiler
from .models import (
    HUMAN_ROUND_AFTER,
    STAGE_ORDER,
    CheckEdit,
    Origin,
    RevisionClaim,
    Rubric,
    RubricCheck,
    RubricVersion,
    RubricVersionQuerySet,
    Stage,
)

TIERS = compiler.TIERS
MAX_CHECK_TEXT = text_limits.MAX_CHECK_TEXT
MAX_REASON = text_limits.MAX_REASON
SOURCE_MAX = 100  # RubricCheck.source's max_length


class Stale(Conflict):
    """The draft changed since the caller loaded it; `current` is the revision to reload."""

    def __init__(self, current: int):
        super().__init__(
            "Someone else changed this rubric since you loaded it: the current version is "
            "shown, and your change was not saved.",
            None,
        )
        self.current = current


# Kept until the in-flight branches are merged: core.access.is_reviser is the one to ask.
is_reviser = access.is_reviser


# --- versions -------------------------------------------------------------------------------


def _check_rows(version: RubricVersion, checks: list[compiler.Check]) -> list[RubricCheck]:
    return [
        RubricCheck(
            version=version,
            position=position,
            check_id=check.id,
            kind=check.kind,
            tier=check.tier,
            secondary=check.secondary,
            source=check.source,
            rule=check.rule,
            origin=Origin.COMPILED,
            text=check.text,
            snippets=list(check.snippets),
            threshold=check.threshold,
            options=list(check.options) if check.options is not None else None,
            steps=list(check.steps) if check.steps is not None else None,
        )
        for position, check in enumerate(checks, start=1)
    ]


@transaction.atomic
def rubric_version_create(
    *,
    question: FinalQuestion,
    meta_document: Any,
    stage: str,
    made_by=None,
    made_by_model: str = "",
    human_changes: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
) -> RubricVersion:
    """A new LLM or imported version: validated (compiler.MetaRubricInvalid when not) and
    compiled. Its parent is the rubric's latest version. `human_changes`: for a refinement
    that follows a human round, what it did with each of that round's changes
    (rubrics/human_changes.py, outcomes)."""
    now = now or timezone.now()
    if stage not in Stage.values or stage in (Stage.HUMAN_1, Stage.HUMAN_2):
        raise InvalidInput(f"stage must be an LLM stage or imported, not {stage!r}.", "stage")
    # Read under a lock, not from the caller's copy: a drop may have happened since.
    question = FinalQuestion.objects.select_for_update().get(pk=question.pk)
    if question.dropped_at is not None:
        raise Conflict("This question is dropped; restore it before giving it a rubric.")
    meta = compiler.validate(meta_document)
    checks = compiler.compile_rubric(meta)
    rubric, _ = Rubric.objects.get_or_create(question=question, defaults={"created_at": now})
    existing = list(rubric.versions.values_list("stage", "frozen_at"))
    if any(s == stage for s, _ in existing):
        raise Conflict(f"This rubric has a {stage} version already.")
    if any(frozen is None for _, frozen in existing):
        raise Conflict("A human round of this rubric is in progress; wait for it to complete.")
    rank = STAGE_ORDER.index(Stage(stage))
    later = [s for s, _ in existing if STAGE_ORDER.index(Stage(s)) > rank]
    if later:
        # The latest version is the one in use: an earlier stage made now would replace it.
        raise Conflict(f"This rubric has a later version ({', '.join(later)}) than {stage}.")
    version = RubricVersion.objects.create(
        rubric=rubric,
        stage=stage,
        parent=rubric.versions.order_by("-id").first(),
        meta_rubric=meta.model_dump(mode="json"),
        made_by=made_by,
        made_by_model=made_by_model,
        human_changes=human_changes,
        created_at=now,
        frozen_at=now,
    )
    RubricCheck.objects.bulk_create(_check_rows(version, checks))
    return version


# Which version is final is decided once, by RubricVersionQuerySet.final (rubrics/models.py);
# these are its shapes for callers.


def final_version(rubric: Rubric) -> RubricVersion | None:
    """What the benchmark uses now: the latest frozen version (a human draft in progress is
    not part of it until its round is complete)."""
    return RubricVersion.objects.final_of(rubric).first()


def final_version_ids() -> QuerySet[Any, Any]:
    """final_version of every rubric, as a subquery of version ids (for `__in` filters)."""
    return RubricVersion.objects.final().values("id").order_by()


def final_versions_of(question_ids: Sequence[int]) -> dict[int, int]:
    """final_version of these questions' rubrics in one query: {question id: version id}
    (a question without a frozen version is left out)."""
    return dict(
        RubricVersion.objects.final()
        .filter(rubric__question_id__in=question_ids)
        .values_list("rubric__question_id", "id")
        .order_by()
    )


# --- human rounds ---------------------------------------------------------------------------


def _round_for(rubric: Rubric) -> tuple[str, RubricVersion] | None:
    latest = rubric.versions.order_by("-id").first()
    if latest is None:
        return None
    if latest.frozen_at is None:  # a draft in progress
        return latest.stage, latest
    after = HUMAN_ROUND_AFTER.get(latest.stage)
    if after is None or rubric.versions.filter(stage=after).exists():
        return None
    return after, latest


def waiting_versions(*, now: datetime) -> RubricVersionQuerySet:
    """The latest version of every rubric that a reviser could take now, filtered in SQL (not in
    Python, and without the meta-rubrics: the claim and the queue page stay fast however many
    rubrics there are): a draft nobody holds, or a frozen version of a stage that a human round
    follows."""
    return (
        RubricVersion.objects.latest_per_rubric()
        .filter(rubric__question__dropped_at__isnull=True)
        .filter(
            Q(frozen_at__isnull=True, claim__isnull=True)
            | Q(frozen_at__isnull=True, claim__expires_at__lte=now)
            | Q(frozen_at__isnull=False, stage__in=list(HUMAN_ROUND_AFTER))
        )
        .select_related("rubric__question__image", "claim")
        .defer("meta_rubric")
        .order_by("rubric_id")
    )


def revision_queue(*, now: datetime | None = None) -> list[tuple[Rubric, str]]:
    """(rubric, human stage) for every rubric that a reviser could take now."""
    now = now or timezone.now()
    return [
        (v.rubric, v.stage if v.frozen_at is None else HUMAN_ROUND_AFTER[v.stage])
        for v in waiting_versions(now=now)
    ]


def revision_claim(*, user, now: datetime | None = None) -> RubricVersion | None:
    """The draft this reviser holds, or the next rubric waiting for a human round opened as a
    draft (a copy of its parent's checks) and claimed for REVIEW_LEASE."""
    if not is_reviser(user):
        raise NotAllowed("Only rubric revisers revise rubrics.")
    now = now or timezone.now()
    expires_at = now + settings.REVIEW_LEASE
    with transaction.atomic():
        held = (
            RevisionClaim.objects.filter(
                reviser=user, expires_at__gt=now, version__frozen_at__isnull=True
            )
            .select_related("version")
            .first()
        )
        if held is not None and RevisionClaim.objects.filter(pk=held.pk).update(
            expires_at=expires_at
        ):
            return held.version
        # A few at a time: the first that opens is taken, whatever the length of the queue.
        for waiting in waiting_versions(now=now).iterator(chunk_size=10):
            version = _open_round(waiting.rubric, now=now)
            if version is None:
                continue
            taken = RevisionClaim.objects.filter(version=version, expires_at__lte=now).update(
                reviser=user, expires_at=expires_at
            )
            if not taken:
                try:
                    with transaction.atomic():
                        RevisionClaim.objects.create(
                            version=version, reviser=user, expires_at=expires_at
                        )
                except IntegrityError:
                    continue  # someone else took it a moment ago
            return version
    return None


def _open_round(rubric: Rubric, *, now: datetime) -> RubricVersion | None:
    found = _round_for(rubric)
    if found is None:
        return None
    stage, latest = found
    if latest.frozen_at is None:
        return latest
    try:
        with transaction.atomic():
            draft = RubricVersion.objects.create(
                rubric=rubric,
                stage=stage,
                parent=latest,
                meta_rubric=latest.meta_rubric,
                created_at=now,
            )
    except IntegrityError:
        return rubric.versions.filter(stage=stage, frozen_at__isnull=True).first()
    rows = list(latest.checks.filter(deleted_at__isnull=True).order_by("position"))
    for position, row in enumerate(rows, start=1):
        row.pk = None
        row.version = draft
        row.position = position
    RubricCheck.objects.bulk_create(rows)
    return draft


def _moved_on(user, version_id: int, revision: Any, now: datetime) -> bool:
    """The common case of an edit, in one statement: the page's revision is the draft's. A
    conditional UPDATE then finds the draft unfrozen and at that revision, moves the revision
    on and holds the draft's row lock until the end of the transaction (as SELECT ... FOR
    UPDATE would); the claim is renewed after it (a refusal there undoes the move with the
    transaction). False when it changed nothing (no such draft, frozen, a stale or malformed
    revision): the caller then locks and refuses as _editable always has, in the same order."""
    if not is_reviser(user):
        raise NotAllowed("Only rubric revisers revise rubrics.")
    try:
        expected = clean_int(revision, "revision", minimum=0, maximum=2**31 - 1)
    except InvalidInput:
        return False
    moved = RubricVersion.objects.filter(
        pk=version_id, frozen_at__isnull=True, revision=expected
    ).update(revision=F("revision") + 1)
    if moved != 1:
        return False
    _renew_claim(user, version_id, now)
    return True


def _renew_claim(user, version_id: int, now: datetime) -> None:
    """The claim renewed by one UPDATE where it is this reviser's or has lapsed; read only when
    that finds none (another reviser's live claim, or none yet)."""
    expires_at = now + settings.REVIEW_LEASE
    claims = RevisionClaim.objects.filter(version_id=version_id)
    if not claims.filter(Q(reviser=user) | Q(expires_at__lte=now)).update(
        reviser=user, expires_at=expires_at
    ):
        if claims.exists():
            raise NotAllowed("Another reviser holds this rubric for this round.")
        RevisionClaim.objects.update_or_create(
            version_id=version_id, defaults={"reviser": user, "expires_at": expires_at}
        )


def drafts() -> RubricVersionQuerySet:
    """Versions with their parent, whose stage the diff names and whose record of a human
    round's changes a human round 2 draft shows (which of round 1's changes refinement 2
    dropped, and the checks carrying the others); the parent's meta-rubric is never shown."""
    return RubricVersion.objects.select_related("parent").defer("parent__meta_rubric")


def draft_read(version_id: int) -> RubricVersion | None:
    """The version with its parent, as an edit's answer shows it (None: no such one)."""
    return drafts().filter(pk=version_id).first()


def _editable(user, version_id: int, revision: Any, now: datetime) -> RubricVersion:
    """Lock the draft, refuse what may not be edited, and move its revision on by one."""
    if _moved_on(user, version_id, revision, now):
        return draft_read(version_id)
    return _locked(user, version_id, revision, now)


def _locked(user, version_id: int, revision: Any, now: datetime) -> RubricVersion:
    """_editable when _moved_on changed nothing: the draft locked and read, then refused (or,
    should its revision be current after all, moved on). Only the draft is locked."""
    version = drafts().select_for_update(of=("self",)).filter(pk=version_id).first()
    if version is None:
        raise NotFound(f"There is no rubric version {version_id}.")
    if version.frozen_at is not None:
        raise Conflict("This round is complete; the version is frozen.")
    # The transaction undoes the claim's renewal if the revision is refused below.
    _renew_claim(user, version.pk, now)
    try:
        expected = clean_int(revision, "revision", minimum=0, maximum=2**31 - 1)
    except InvalidInput as exc:
        raise InvalidInput(
            "revision must be the number shown with the rubric.", "revision"
        ) from exc
    bumped = RubricVersion.objects.filter(pk=version.pk, revision=expected).update(
        revision=F("revision") + 1
    )
    if bumped != 1:
        raise Stale(version.revision)
    version.revision = expected + 1
    return version


def _row(version: RubricVersion, check_pk: Any, field: str = "check") -> RubricCheck:
    check_pk = clean_int(check_pk, field, minimum=1)
    row = RubricCheck.objects.filter(version=version, pk=check_pk).first()
    if row is None:
        raise NotFound("That check is not part of this rubric version.")
    return row


def _editable_row(
    user, version_id: int, check_pk: Any, revision: Any, now: datetime
) -> RubricCheck:
    """_editable, then _row: the check to edit, with its draft (row.version) locked and moved
    on. In the common case (_moved_on) the row and its draft are read in one query."""
    if not _moved_on(user, version_id, revision, now):
        return _row(_locked(user, version_id, revision, now), check_pk)
    check_pk = clean_int(check_pk, "check", minimum=1)
    row = (
        RubricCheck.objects.select_related("version__parent")
        .defer("version__parent__meta_rubric")
        .filter(version_id=version_id, pk=check_pk)
        .first()
    )
    if row is None:
        raise NotFound("That check is not part of this rubric version.")
    return row


def _snapshot(row: RubricCheck) -> dict:
    return {
        "check_id": row.check_id,
        "text": row.text,
        "tier": row.tier,
        "position": row.position,
        "deleted": row.deleted_at is not None,
        "reason": row.delete_reason,
    }


def _record(version, row, user, op, before, now) -> None:
    CheckEdit.objects.create(
        version=version,
        check_row=row,
        editor=user,
        op=op,
        before=before,
        after=_snapshot(row) if row is not None else None,
        revision=version.revision,
        at=now,
    )
    if row is not None:
        # What the caller's page must carry from now on: the draft's revision after this edit
        # (not the version as read later, which may hold another tab's save as well), and the
        # draft as this edit left it.
        row.revision = version.revision
        row.version = version


def _clean_check_text(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("The check is empty: write a check a judge can read on its own.", "text")
    return " ".join(
        clean_text(text, "text", limit=MAX_CHECK_TEXT, label="The check's text").split()
    )


def _clean_tier(tier: Any) -> str:
    if tier not in TIERS:
        raise InvalidInput(f"tier must be one of {', '.join(TIERS)}.", "tier")
    return tier


def _change_row(
    user,
    version_id: int,
    check_pk: int,
    revision: Any,
    op: str,
    apply: Callable[[RubricCheck], list[str]],
    now: datetime,
) -> RubricCheck:
    """The common path of the one-check edits: lock and bump the draft, change the row (apply
    returns the fields it set), save, and log the edit with the row before and after."""
    row = _editable_row(user, version_id, check_pk, revision, now)
    before = _snapshot(row)
    row.save(update_fields=apply(row))
    _record(row.version, row, user, op, before, now)
    return row


def _by_hand(row: RubricCheck) -> list[str]:
    """A compiled check changed by a person is "edited by hand" from then on."""
    if row.origin == Origin.COMPILED:
        row.origin = Origin.EDITED
    return ["origin"]


@transaction.atomic
def check_edit_text(
    *, user, version_id: int, check_pk: int, text: str, revision: Any, now: datetime | None = None
) -> RubricCheck:
    text = _clean_check_text(text)

    def apply(row: RubricCheck) -> list[str]:
        row.text = text
        return ["text", *_by_hand(row)]

    return _change_row(
        user, version_id, check_pk, revision, CheckEdit.Op.EDIT, apply, now or timezone.now()
    )


@transaction.atomic
def check_retier(
    *, user, version_id: int, check_pk: int, tier: str, revision: Any, now: datetime | None = None
) -> RubricCheck:
    tier = _clean_tier(tier)

    def apply(row: RubricCheck) -> list[str]:
        row.tier = tier
        return ["tier", *_by_hand(row)]

    return _change_row(
        user, version_id, check_pk, revision, CheckEdit.Op.RETIER, apply, now or timezone.now()
    )


@transaction.atomic
def check_delete(
    *, user, version_id: int, check_pk: int, reason: str, revision: Any, now: datetime | None = None
) -> RubricCheck:
    now = now or timezone.now()
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("Give a reason: say why this check goes.", "reason")
    reason = clean_text(reason, "reason", limit=MAX_REASON, label="The reason")

    def apply(row: RubricCheck) -> list[str]:
        if row.deleted_at is not None:
            raise Conflict("This check is deleted already.")
        row.deleted_at, row.delete_reason = now, reason
        return ["deleted_at", "delete_reason"]

    return _change_row(user, version_id, check_pk, revision, CheckEdit.Op.DELETE, apply, now)


@transaction.atomic
def check_restore(
    *, user, version_id: int, check_pk: int, revision: Any, now: datetime | None = None
) -> RubricCheck:
    def apply(row: RubricCheck) -> list[str]:
        if row.deleted_at is None:
            raise Conflict("This check is not deleted.")
        row.deleted_at, row.delete_reason = None, ""
        return ["deleted_at", "delete_reason"]

    return _change_row(
        user, version_id, check_pk, revision, CheckEdit.Op.RESTORE, apply, now or timezone.now()
    )


@transaction.atomic
def check_add(
    *,
    user,
    version_id: int,
    text: str,
    tier: str,
    revision: Any,
    source: str = "",
    after_check_pk: Any = None,
    now: datetime | None = None,
) -> RubricCheck:
    """A check added by hand, optionally linked to a meta item, placed after a given check
    (or at the end)."""
    now = now or timezone.now()
    text, tier = _clean_check_text(text), _clean_tier(tier)
    version = _editable(user, version_id, revision, now)
    source = clean_text(source, "source", limit=SOURCE_MAX, multiline=False, label="The meta item")
    if source and source not in meta_ids(version.meta_rubric):
        raise InvalidInput(
            f"source {source!r} is no item or meta-insight of the meta-rubric.", "source"
        )
    # The positions, to place the new check, and the ids of the checks added by hand, to
    # number it after them.
    rows = list(version.checks.order_by("position").values_list("position", "check_id", "origin"))
    if after_check_pk not in (None, ""):
        anchor = _row(version, after_check_pk, "after")
        position = anchor.position + 1
    else:
        position = (rows[-1][0] + 1) if rows else 1
    RubricCheck.objects.filter(version=version, position__gte=position).update(
        position=F("position") + 1
    )
    added = [check_id for _, check_id, origin in rows if origin == Origin.ADDED]
    number = 1 + max((int(cid[1:]) for cid in added if cid[1:].isdigit()), default=0)
    row = RubricCheck.objects.create(
        version=version,
        position=position,
        check_id=f"H{number}",
        kind="added",
        tier=tier,
        secondary=False,
        source=source,
        rule="",
        origin=Origin.ADDED,
        text=text,
        snippets=_item_snippets(version.meta_rubric, source),
    )
    _record(version, row, user, CheckEdit.Op.ADD, None, now)
    return row


@transaction.atomic
def check_move(
    *,
    user,
    version_id: int,
    check_pk: int,
    revision: Any,
    direction: str | None = None,
    to_position: Any = None,
    now: datetime | None = None,
) -> RubricCheck:
    """Move a check up or down within its tier (direction: to the place of the neighbouring
    live check of its tier; the first stays first), or to a position in the whole list."""
    now = now or timezone.now()
    if direction is not None and direction not in ("up", "down"):
        raise InvalidInput("direction must be up or down.", "direction")
    if direction is None:
        try:
            to_position = int(to_position)
        except (TypeError, ValueError) as exc:
            raise InvalidInput(
                "to_position must be a position in the list.", "to_position"
            ) from exc
    version = _editable(user, version_id, revision, now)
    rows = list(version.checks.order_by("position", "pk"))
    row = next((r for r in rows if r.pk == clean_int(check_pk, "check", minimum=1)), None)
    if row is None:
        raise NotFound("That check is not part of this rubric version.")
    if direction is not None:
        same_tier = [r for r in rows if r.tier == row.tier and r.deleted_at is None]
        if direction == "up":
            neighbour = next((r for r in reversed(same_tier) if r.position < row.position), None)
        else:
            neighbour = next((r for r in same_tier if r.position > row.position), None)
        to_position = neighbour.position if neighbour else row.position
    target = max(1, min(to_position, len(rows)))
    before = _snapshot(row)
    ordered = [r for r in rows if r.pk != row.pk]
    ordered.insert(target - 1, row)
    changed = []
    for position, item in enumerate(ordered, start=1):
        if item.position != position:
            item.position = position
            changed.append(item)
    # Positions are not unique in the schema, so a bulk update needs no shuffle.
    RubricCheck.objects.bulk_update(changed, ["position"])
    _record(version, row, user, CheckEdit.Op.MOVE, before, now)
    return row


@transaction.atomic
def revision_complete(
    *, user, version_id: int, revision: Any, now: datetime | None = None
) -> RubricVersion:
    """Freeze the draft: it becomes the rubric's current version and the rubric moves on."""
    now = now or timezone.now()
    version = _editable(user, version_id, revision, now)
    if not version.checks.filter(deleted_at__isnull=True).exists():
        raise InvalidInput("A rubric needs at least one check.", None)
    RubricVersion.objects.filter(pk=version.pk).update(frozen_at=now, made_by=user)
    version.frozen_at, version.made_by = now, user
    RevisionClaim.objects.filter(version=version).delete()
    _record(version, None, user, CheckEdit.Op.COMPLETE, None, now)
    return version


# --- reading the two sides ------------------------------------------------------------------


def human_round_outcome(version: RubricVersion) -> list[dict[str, Any]] | None:
    """What refinement round 2 did with the changes of human round 1, as this version shows it:
    its own record (it is that refinement), or its parent's (it is the human round after it);
    None when neither follows a human round."""
    if version.human_changes is not None:
        return version.human_changes
    return version.parent.human_changes if version.parent_id else None


def meta_items(meta: dict) -> list[dict]:
    return list(meta.get("items", []))


def meta_ids(meta: dict) -> set[str]:
    return set(meta_id_list(meta))


def meta_id_list(meta: dict) -> list[str]:
    """The ids of the items and meta-insights, in document order (each item, then its
    meta-insights)."""
    ids = []
    for item in meta_items(meta):
        ids.append(item["id"])
        ids.extend(insight["id"] for insight in item.get("meta_insights", []) or [])
    return ids


def _item_snippets(meta: dict, source: str) -> list[str]:
    for item in meta_items(meta):
        if item["id"] == source:
            return list(item.get("snippets", []))
        for insight in item.get("meta_insights", []) or []:
            if insight["id"] == source:
                return list(insight.get("snippets") or item.get("snippets", []))
    return []


@dataclass
class Disagreement:
    kind: str
    message: str
    source: str = ""
    check_ids: list[str] = field(default_factory=list)


def rubric_warnings(meta: dict, rows: list[RubricCheck]) -> list[Disagreement]:
    """Where the checklist and its meta-rubric disagree."""
    live = [r for r in rows if r.deleted_at is None]
    deleted = {r.check_id for r in rows if r.deleted_at is not None}
    by_source: dict[str, list[RubricCheck]] = {}
    for row in live:
        by_source.setdefault(row.source, []).append(row)
    expected = {c.id: c for c in _compiled(meta)}
    warnings: list[Disagreement] = []
    for item in meta_items(meta):
        ids = [item["id"], *(i["id"] for i in item.get("meta_insights", []) or [])]
        for source in ids:
            if source not in by_source:
                warnings.append(
                    Disagreement(
                        "uncovered", f"{source}: no check remains for this meta item.", source
                    )
                )
        if item["type"] == "strict_list":
            missing = [
                item["items"][k - 1]
                for k in range(1, len(item["items"]) + 1)
                if f"{item['id']}.item{k}" in deleted
            ]
            if missing:
                warnings.append(
                    Disagreement(
                        "strict_list",
                        f"{item['id']}: the strict list is missing "
                        + "; ".join(missing)
                        + " (every item is required).",
                        item["id"],
                    )
                )
        if item["type"] == "process":
            gone = [
                k for k in range(1, len(item["steps"]) + 1) if f"{item['id']}.step{k}" in deleted
            ]
            sequences = [r for r in by_source.get(item["id"], []) if r.kind == "sequence"]
            if gone and sequences:
                warnings.append(
                    Disagreement(
                        "sequence",
                        f"{item['id']}: a sequence check still orders steps whose step "
                        f"checks were deleted ({', '.join(f'step {k}' for k in gone)}).",
                        item["id"],
                        [r.check_id for r in sequences],
                    )
                )
    known = meta_ids(meta)
    for row in live:
        if row.source and row.source not in known:
            warnings.append(
                Disagreement(
                    "orphan",
                    f"{row.check_id}: its meta item {row.source} is not in the meta-rubric.",
                    row.source,
                    [row.check_id],
                )
            )
        compiled = expected.get(row.check_id)
        if compiled is not None and row.origin != Origin.ADDED and compiled.tier != row.tier:
            warnings.append(
                Disagreement(
                    "tier",
                    f"{row.check_id} is {words(row.tier)}, but its meta item "
                    f"({row.source}) makes it {words(compiled.tier)}.",
                    row.source,
                    [row.check_id],
                )
            )
    return warnings


def _compiled(meta: dict) -> list[compiler.Check]:
    try:
        return compiler.compile_document(meta)
    except compiler.MetaRubricInvalid:
        return []


@dataclass
class VersionDiff:
    added: list[RubricCheck] = field(default_factory=list)
    removed: list[RubricCheck] = field(default_factory=list)
    changed: list[tuple[RubricCheck, RubricCheck]] = field(default_factory=list)
    retiered: list[tuple[RubricCheck, RubricCheck]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.retiered)


def version_diff(old_rows: Sequence[RubricCheck], new_rows: Sequence[RubricCheck]) -> VersionDiff:
    """Checks matched by id: added, removed, changed text, changed tier."""
    old = {r.check_id: r for r in old_rows if r.deleted_at is None}
    new = {r.check_id: r for r in new_rows if r.deleted_at is None}
    diff = VersionDiff()
    for check_id, row in new.items():
        before = old.get(check_id)
        if before is None:
            diff.added.append(row)
            continue
        if before.text != row.text:
            diff.changed.append((before, row))
        if before.tier != row.tier:
            diff.retiered.append((before, row))
    diff.removed = [row for check_id, row in old.items() if check_id not in new]
    return diff
