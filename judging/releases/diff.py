"""What changed between two scopes: two releases, or a release and the working draft.

Questions are matched by their final question (the same photo's question in both): *added*
when only B holds it, *dropped* when only A does. A question both hold is *changed* when its
rubric version differs; its checks are then matched by check id among each version's live
checks, as the compiler (`rubrics/compiler.py`: an id is its item's id and its position among
that item's checks, the same on every compile) and the human rounds (`rubrics/human_changes.py`:
a human version copies its parent's ids, H<n> for an added check) identify them:

    added       an id only B's version has
    removed     an id only A's version has (deleted in a round, or no longer compiled)
    reworded    the same id with another text
    re-tiered   the same id in another tier (a check both reworded and re-tiered is both)

A question whose version changed but whose checks match in id, text and tier (a version that
only changed the meta-rubric's snippets, say) is listed with no check change.

Per model, for each judge and setting: the change of its Gamut score from A to B over the
questions both scopes hold and on which the model is scored in both, with the paired interval
and p-value of judging/leaderboard/comparisons.py (`paired`: the mean of the per-question
differences and its 95% t interval; each question one image), x100: "B moved model X by +2.3
(1.1 to 3.5)". Each scope is scored with its own scoring parameters (a release's frozen ones,
today's for the draft).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from annotation.models import FinalQuestion
from rubrics.models import RubricCheck

from ..leaderboard.comparisons import Paired, paired
from ..models import Judge, Release, Setting
from .scores import release_board
from .selectors import release_versions, scope_label

ADDED, REMOVED, REWORDED, RETIERED = "added", "removed", "reworded", "re-tiered"


@dataclass(frozen=True)
class CheckChange:
    check_id: str
    change: str  # ADDED, REMOVED, REWORDED or RETIERED
    tier: str  # B's tier (A's for a removed check)
    text: str  # B's text (A's for a removed check)
    tier_before: str = ""  # re-tiered: A's tier
    text_before: str = ""  # reworded: A's text

    def as_dict(self) -> dict:
        return {
            "check": self.check_id,
            "change": self.change,
            "tier": self.tier,
            "text": self.text,
            "tier_before": self.tier_before,
            "text_before": self.text_before,
        }


@dataclass
class QuestionChange:
    source_id: str
    version_a: int
    version_b: int
    checks: list[CheckChange] = field(default_factory=list)

    def count(self, change: str) -> int:
        return sum(c.change == change for c in self.checks)

    def as_dict(self) -> dict:
        return {
            "source_id": self.source_id,
            "checks": [c.as_dict() for c in self.checks],
            **{k: self.count(k) for k in (ADDED, REMOVED, REWORDED, RETIERED)},
        }


@dataclass(frozen=True)
class ModelShift:
    judge: str
    setting: str
    model: str
    score_a: float | None  # the model's Gamut x100 on A, all its scored questions of A
    score_b: float | None
    change: Paired  # B - A over the shared questions scored in both, x100

    def as_dict(self) -> dict:
        return {
            "judge": self.judge,
            "setting": self.setting,
            "model": self.model,
            "score_a": self.score_a,
            "score_b": self.score_b,
            "questions": self.change.n,
            "change": self.change.difference,
            "ci_low": self.change.low,
            "ci_high": self.change.high,
            "p": self.change.p,
        }


@dataclass
class ReleaseDiff:
    a: Release | None
    b: Release | None
    added: list[str]  # source ids, code point order
    dropped: list[str]
    changed: list[QuestionChange]
    unchanged: int  # questions both hold on the same rubric version
    shared: int  # questions both hold
    scoring_a: dict
    scoring_b: dict
    shifts: list[ModelShift] = field(default_factory=list)

    @property
    def label_a(self) -> str:
        return scope_label(self.a)

    @property
    def label_b(self) -> str:
        return scope_label(self.b)

    def totals(self) -> dict[str, int]:
        return {
            k: sum(q.count(k) for q in self.changed) for k in (ADDED, REMOVED, REWORDED, RETIERED)
        }

    def as_dict(self) -> dict:
        return {
            "a": self.label_a,
            "b": self.label_b,
            "questions_added": self.added,
            "questions_dropped": self.dropped,
            "questions_shared": self.shared,
            "questions_unchanged": self.unchanged,
            "questions_changed": [q.as_dict() for q in self.changed],
            "checks": self.totals(),
            "scoring_a": self.scoring_a,
            "scoring_b": self.scoring_b,
            "models": [s.as_dict() for s in self.shifts],
        }


def _scoring(release: Release | None) -> dict:
    from ..verdicts.services import scoring_settings

    s = release.scoring_settings() if release is not None else scoring_settings()
    return {"lambda": s.lambda_, "mu": s.mu, "weights": list(s.weights)}


def _source_ids(question_ids: set[int]) -> dict[int, str]:
    return dict(
        FinalQuestion.objects.filter(pk__in=question_ids)
        .values_list("pk", "image__source_id")
        .order_by()
    )


def _live_checks(version_ids: set[int]) -> dict[int, dict[str, tuple[str, str]]]:
    """{version id: {check id: (tier, text)}} of the live checks."""
    out: dict[int, dict[str, tuple[str, str]]] = {v: {} for v in version_ids}
    ids = sorted(version_ids)
    for start in range(0, len(ids), 500):
        for version_id, check_id, tier, text in RubricCheck.objects.filter(
            version_id__in=ids[start : start + 500], deleted_at__isnull=True
        ).values_list("version_id", "check_id", "tier", "text"):
            out[version_id][check_id] = (tier, text)
    return out


def check_changes(
    a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]]
) -> list[CheckChange]:
    """The changes from A's checks to B's ({check id: (tier, text)}), in check id order."""
    out: list[CheckChange] = []
    for check_id in sorted(set(a) | set(b)):
        if check_id not in a:
            out.append(CheckChange(check_id, ADDED, *b[check_id]))
        elif check_id not in b:
            out.append(CheckChange(check_id, REMOVED, *a[check_id]))
        else:
            (tier_a, text_a), (tier_b, text_b) = a[check_id], b[check_id]
            if text_a != text_b:
                out.append(CheckChange(check_id, REWORDED, tier_b, text_b, text_before=text_a))
            if tier_a != tier_b:
                out.append(CheckChange(check_id, RETIERED, tier_b, text_b, tier_before=tier_a))
    return out


def _shifts(
    a: Release | None, b: Release | None, judges: list[Judge], settings: list[str]
) -> list[ModelShift]:
    out = []
    for judge in judges:
        for setting in settings:
            board_a = release_board(a, judge=judge, setting=setting, estimate=False).board
            board_b = release_board(b, judge=judge, setting=setting, estimate=False).board
            shared = sorted(set(board_a.question_ids) & set(board_b.question_ids))
            index_a = {q: i for i, q in enumerate(board_a.question_ids)}
            index_b = {q: i for i, q in enumerate(board_b.question_ids)}
            rows_a = {r.model: r for r in board_a.rows}
            rows_b = {r.model: r for r in board_b.rows}
            for model in sorted(set(board_a.scores) & set(board_b.scores)):
                x = board_b.scores[model][[index_b[q] for q in shared]]
                y = board_a.scores[model][[index_a[q] for q in shared]]
                out.append(
                    ModelShift(
                        judge=judge.name,
                        setting=setting,
                        model=model,
                        score_a=rows_a[model].gamut,
                        score_b=rows_b[model].gamut,
                        change=paired(model, model, x, y),
                    )
                )
    return out


def release_diff(
    a: Release | None,
    b: Release | None,
    *,
    judges: list[Judge] | None = None,
    settings: list[str] | None = None,
    scores: bool = True,
) -> ReleaseDiff:
    """What changed from A to B (either may be None: the working draft). `judges` (default:
    every judge) and `settings` (default: both) choose the model shifts computed; `scores=False`
    leaves them out (the questions and checks alone)."""
    versions_a, versions_b = release_versions(a), release_versions(b)
    names = _source_ids(set(versions_a) | set(versions_b))
    added = sorted(names[q] for q in set(versions_b) - set(versions_a))
    dropped = sorted(names[q] for q in set(versions_a) - set(versions_b))
    both = set(versions_a) & set(versions_b)
    moved = sorted((q for q in both if versions_a[q] != versions_b[q]), key=lambda q: names[q])
    checks = _live_checks({versions_a[q] for q in moved} | {versions_b[q] for q in moved})
    changed = [
        QuestionChange(
            names[q],
            versions_a[q],
            versions_b[q],
            check_changes(checks[versions_a[q]], checks[versions_b[q]]),
        )
        for q in moved
    ]
    diff = ReleaseDiff(
        a=a,
        b=b,
        added=added,
        dropped=dropped,
        changed=changed,
        unchanged=len(both) - len(moved),
        shared=len(both),
        scoring_a=_scoring(a),
        scoring_b=_scoring(b),
    )
    if scores:
        diff.shifts = _shifts(
            a,
            b,
            list(judges) if judges is not None else list(Judge.objects.order_by("name")),
            list(settings) if settings is not None else [s.value for s in Setting],
        )
    return diff
