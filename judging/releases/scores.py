"""Scores of a release (or of the working draft), from the verdicts that exist.

A release's questions are scored on the rubric versions it froze, with the scoring parameters
it froze: the leaderboard's own computation (judging/leaderboard/board.py, `release=`), over
the per-tier counts of those versions. Verdicts are never copied or re-made here: a check that
a later rubric version left unchanged was judged once and, by its verdict key, copied onto each
version that holds it when a judge run reaches that version (judging/runs/llm_jobs.py); until
then the responses that lack verdicts on a release's checks are *pending*, counted per model,
with the estimate of the judge run that would fill them (judging/runs/services.run_estimate,
on the release's versions).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm.jobs import JobError

from ..leaderboard.board import RESAMPLES, SEED, Leaderboard, Row, leaderboard
from ..models import Judge, Release, Setting
from ..runs.services import Estimate, run_estimate
from ..verdicts.scoring import ScoringSettings
from ..verdicts.services import scoring_settings
from .selectors import release_versions, scope_label


@dataclass
class ReleaseBoard:
    """One judge's board in one setting over a scope (a release, or None: the draft).

    pending   responses that still wait for verdicts on the scope's checks (sum over rows)
    missing   (model, question) pairs with no response in this setting (sum over rows)
    estimate  the judge run that would give the pending responses their verdicts (calls,
              tokens, cost, with the copies by verdict key left out); None when nothing is
              pending or the judge has no model to call (`estimate_note` says which)
    """

    release: Release | None
    board: Leaderboard
    pending: int
    missing: int
    estimate: Estimate | None
    estimate_note: str

    @property
    def label(self) -> str:
        return scope_label(self.release)

    def row(self, model: str) -> Row | None:
        """The row of a model (by its name), or None when it has no response in the scope."""
        return next((r for r in self.board.rows if r.model == model), None)


def pending_estimate(release: Release | None, judge: Judge, setting: str) -> Estimate | None:
    """The estimate of judging what waits in this scope, judge and setting; None when
    nothing waits or the judge has no model to call."""
    if judge.llm_model is None:
        return None
    versions = release_versions(release)
    try:
        return run_estimate(
            "judge",
            {
                "judge": judge,
                "models": [],
                "settings": [setting],
                "ids": list(versions),
                "versions": versions,
            },
        )
    except JobError:
        return None


def release_board(
    release: Release | None,
    *,
    judge: Judge,
    setting: str = Setting.MULTIMODAL,
    audit: bool = False,
    estimate: bool = True,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    settings: ScoringSettings | None = None,
) -> ReleaseBoard:
    """Score every model on `release` (None: the working draft, with today's scoring
    settings) for one judge and setting, from the verdicts that exist. `settings`: the
    scoring parameters when the caller has read them already (a page that shows them)."""
    if settings is None:
        settings = release.scoring_settings() if release is not None else scoring_settings()
    board = leaderboard(
        judge=judge,
        setting=setting,
        settings=settings,
        audit=audit,
        release=release,
        resamples=resamples,
        seed=seed,
    )
    pending = sum(row.pending for row in board.rows)
    found = pending_estimate(release, judge, setting) if (estimate and pending) else None
    if not pending:
        note = "Every response has its verdicts on this scope's checks."
    elif judge.llm_model is None:
        note = f"The judge {judge.name} has no model to call; its verdicts are imported."
    elif found is not None:
        note = found.note
    else:
        note = (
            "The responses that wait cannot be judged yet: their questions have no frozen rubric."
        )
    return ReleaseBoard(
        release=release,
        board=board,
        pending=pending,
        missing=sum(row.missing for row in board.rows),
        estimate=found,
        estimate_note=note,
    )


def release_score(
    release: Release | None, *, model: str, judge: Judge, setting: str = Setting.MULTIMODAL
) -> Row | None:
    """One model's row (Gamut x100, interval, tiers, scored/missing/failed/pending) on a
    scope for one judge and setting; None when the model has no response in it."""
    return release_board(release, judge=judge, setting=setting, estimate=False).row(model)
