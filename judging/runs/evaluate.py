"""Evaluate a model on a release in one run: collect the answers it lacks on the release's
questions (each setting asked), then have the release's judges grade them on the release's
rubric versions, as one job (kind `judging.evaluate`, judging/runs/llm_jobs.py): one item per
(setting, question), whose first step answers and whose second judges. One estimate before
(calls, tokens, cost and the time the models' quotas allow), one result after: the model's row
on each judge's board of the release in each setting, with its interval, its score corrected
by the human audit where one exists, its rank and its paired difference to the models ranked
next to it.

`manage.py evaluate`, the judging runs page and the API (/api/judging/evaluate/...) all go
through `evaluate_plan`, `evaluate_estimate`, `evaluate_launch` and `evaluate_result`.

A failure in either step leaves what was done, and a run again continues where it stopped:
its items are only the (setting, question) pairs still lacking an answer or a verdict of one
of the judges, a response that exists is never asked again, a check with a verdict is skipped,
one judged before on the same prompt is copied without a call (the verdict key), and a call
whose answer is in the ledger is answered from it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Count, Exists, OuterRef

from llm.gateway import Observed
from llm.jobs import JobError, job_launch
from llm.models import Job, LLMModel
from llm.prompts import load_prompt
from rubrics.models import RubricCheck

from ..leaderboard.board import Row
from ..leaderboard.comparisons import Paired
from ..models import (
    EvaluatedModel,
    Judge,
    Release,
    ReleaseQuestion,
    Response,
    ResponseTierCount,
    Setting,
)
from ..releases.scores import release_board
from ..releases.selectors import release_versions
from . import llm_jobs
from .services import TYPICAL, call_cost

SETTINGS = tuple(Setting.values)


class EvaluateError(Exception):
    """The run asked for cannot be planned; `field` names the input at fault (model,
    release, settings, judges) for the page and the API."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class EvaluatePlan:
    model: EvaluatedModel
    release: Release
    settings: list[str]
    judges: list[Judge]
    # Judges that scored the release but call no model (their verdicts are imported): left
    # out when no judge was named.
    left_out: list[str] = field(default_factory=list)


def _names(values: Sequence[str]) -> str:
    return ", ".join(values) if values else "none"


def release_judges(release: Release) -> list[Judge]:
    """The judges that have scored the release: those with a verdict on one of its checks."""
    scored = ResponseTierCount.objects.filter(
        judge=OuterRef("pk"),
        version_id__in=ReleaseQuestion.objects.filter(release=release).values("version_id"),
    )
    return list(Judge.objects.filter(Exists(scored)).select_related("llm_model").order_by("name"))


def evaluate_plan(
    *,
    model: str,
    release: str,
    settings: Sequence[str] = (),
    judges: Sequence[str] = (),
) -> EvaluatePlan:
    """Resolve the names a person gave, or raise EvaluateError saying what is wrong and where.
    No settings: both. No judges: every judge that has scored the release and calls a model."""
    evaluated = EvaluatedModel.objects.select_related("llm_model").filter(name=model).first()
    if evaluated is None:
        known = list(EvaluatedModel.objects.values_list("name", flat=True)[:20])
        raise EvaluateError(
            f"No evaluated model is named {model!r} (known: {_names(known)}). Add it in the "
            "admin (Judging, Evaluated models) with the LLM model it calls.",
            "model",
        )
    found = Release.objects.filter(name=release).first()
    if found is None:
        known = list(Release.objects.values_list("name", flat=True)[:20])
        raise EvaluateError(
            f"No release is named {release!r} (releases: {_names(known)}). "
            + ("" if known else "Cut one first: manage.py release create NAME."),
            "release",
        )
    unknown = [s for s in settings if s not in SETTINGS]
    if unknown:
        raise EvaluateError(
            f"Unknown setting {unknown[0]!r}: expected {' or '.join(SETTINGS)}.", "settings"
        )
    chosen = [s for s in SETTINGS if s in settings] or list(SETTINGS)
    scored = release_judges(found)
    scored_names = [j.name for j in scored]
    if judges:
        named = {
            j.name: j for j in Judge.objects.select_related("llm_model").filter(name__in=judges)
        }
        for name in dict.fromkeys(judges):
            if name not in named:
                raise EvaluateError(
                    f"No judge is named {name!r} (judges that scored {found.name}: "
                    f"{_names(scored_names)}).",
                    "judges",
                )
            if name not in scored_names:
                raise EvaluateError(
                    f"The judge {name} never scored release {found.name}, so the model would "
                    "have no one to be ranked against on its board. Judges that scored it: "
                    f"{_names(scored_names)}.",
                    "judges",
                )
            if named[name].llm_model is None:
                raise EvaluateError(
                    f"The judge {name} calls no model (its verdicts are imported): give it an "
                    "LLM model in the admin (Judging, Judges), or name another judge.",
                    "judges",
                )
        return EvaluatePlan(evaluated, found, chosen, [named[n] for n in dict.fromkeys(judges)])
    callable_ = [j for j in scored if j.llm_model is not None]
    left_out = [j.name for j in scored if j.llm_model is None]
    if not scored:
        raise EvaluateError(
            f"No judge has scored release {found.name} yet: judge its responses first "
            "(Judging runs), then evaluate a model with that judge.",
            "judges",
        )
    if not callable_:
        raise EvaluateError(
            f"No judge that scored release {found.name} calls a model ({_names(left_out)}: "
            "imported verdicts only). Give one an LLM model in the admin (Judging, Judges), "
            "or judge the release with a judge that calls one first.",
            "judges",
        )
    return EvaluatePlan(evaluated, found, chosen, callable_, left_out)


# ---------------------------------------------------------------------------------------------
# What a run would do.


@dataclass(frozen=True)
class Step:
    """One step of the run in one setting: the answers to collect, or one judge's verdicts."""

    step: str  # "collect" or "judge"
    who: str  # the evaluated model, or the judge
    setting: str
    model: str  # the LLM model it calls
    responses: int  # answers to collect, or responses to judge
    calls: int
    tokens_in: int
    tokens_out: int
    cost: Decimal


@dataclass(frozen=True)
class Quota:
    """The time one LLM model's share of the run takes at its configured per-minute limits."""

    model: str
    calls: int
    tokens: int
    requests_per_minute: int
    tokens_per_minute: int
    seconds: float | None  # None: no limit configured, so no quota bounds it

    @property
    def time_words(self) -> str:
        return duration(self.seconds)


@dataclass(frozen=True)
class EvaluateEstimate:
    items: int  # (setting, question) pairs to do
    calls: int
    tokens_in: int
    tokens_out: int
    cost: Decimal
    seconds: float | None  # at the quotas: the slowest model's share (the steps overlap)
    steps: list[Step]
    quotas: list[Quota]
    note: str

    @property
    def time_words(self) -> str:
        return duration(self.seconds)


@dataclass(frozen=True)
class _Scope:
    items: list[tuple[str, dict[str, Any]]]
    steps: list[Step]


def _scope(plan: EvaluatePlan, *, fresh: bool = False, count_copies: bool = True) -> _Scope:
    """The (setting, question) pairs that lack an answer or a judge's verdicts, and the
    calls each step would make (the copies by verdict key left out, unless not counted: a
    launch needs only the items)."""
    evaluated, release = plan.model, plan.release
    versions = release_versions(release)
    questions = list(
        ReleaseQuestion.objects.filter(release=release)
        .order_by("source_id", "id")
        .values_list("question_id", "source_id", "version_id")
    )
    sizes = dict(
        RubricCheck.objects.filter(version_id__in=set(versions.values()), deleted_at__isnull=True)
        .values("version_id")
        .annotate(n=Count("pk"))
        .values_list("version_id", "n")
    )
    items: list[tuple[str, dict[str, Any]]] = []
    steps: list[Step] = []
    answerer = evaluated.llm_model
    for setting in plan.settings:
        answered = dict(
            Response.objects.filter(
                model=evaluated, setting=setting, question_id__in=list(versions)
            ).values_list("question_id", "pk")
        )
        missing = [q for q, _, _ in questions if q not in answered]
        if missing and answerer is None:
            raise EvaluateError(
                f"{evaluated.name} lacks {len(missing)} answer(s) on release {release.name} "
                f"({Setting(setting).label}) and calls no model: give it an LLM model in the "
                "admin (Judging, Evaluated models), or import its answers "
                "(manage.py import_responses).",
                "model",
            )
        if missing:
            assert answerer is not None
            per_in, per_out = TYPICAL[(llm_jobs.COLLECT, setting)]
            n = len(missing)
            steps.append(
                Step(
                    "collect",
                    evaluated.name,
                    setting,
                    answerer.name,
                    n,
                    n,
                    n * per_in,
                    n * per_out,
                    call_cost(answerer, n * per_in, n * per_out),
                )
            )
        new_checks = sum(sizes.get(versions[q], 0) for q in missing)
        lacking: set[int] = set()  # responses lacking a verdict of some judge
        for judge in plan.judges:
            assert judge.llm_model is not None
            found = llm_jobs.judge_scope(
                judge=judge,
                model_ids=[evaluated.pk],
                settings=[setting],
                versions=versions,
                fresh=fresh,
                count_copies=count_copies,
            )
            ids = {p["response_id"] for _, p in found.items}
            lacking |= ids
            calls = found.calls + new_checks
            if not calls and not missing:
                continue
            per_in, per_out = TYPICAL[(llm_jobs.JUDGE, "")]
            steps.append(
                Step(
                    "judge",
                    judge.name,
                    setting,
                    judge.llm_model.name,
                    len(ids) + len(missing),
                    calls,
                    calls * per_in,
                    calls * per_out,
                    call_cost(judge.llm_model, calls * per_in, calls * per_out),
                )
            )
        for question_id, source_id, version_id in questions:
            response = answered.get(question_id)
            if response is None or response in lacking:
                items.append(
                    (
                        f"{setting}/{source_id}",
                        {"question_id": question_id, "setting": setting, "version_id": version_id},
                    )
                )
    return _Scope(items, steps)


def quota_time(model: LLMModel, calls: int, tokens: int) -> float | None:
    """Seconds `calls` requests of `tokens` in all take at the model's per-minute limits: the
    rate llm's pacing allows them (llm.gateway.Observed.rate). None without a limit."""
    rate = Observed(
        model.requests_per_minute, model.tokens_per_minute, answers=calls, tokens=tokens
    ).rate
    if not calls:
        return 0.0
    return calls / rate if rate > 0 else None


def _quotas(plan: EvaluatePlan, steps: list[Step]) -> list[Quota]:
    models = {m.name: m for m in [plan.model.llm_model, *(j.llm_model for j in plan.judges)] if m}
    calls: dict[str, int] = defaultdict(int)
    tokens: dict[str, int] = defaultdict(int)
    for step in steps:
        calls[step.model] += step.calls
        tokens[step.model] += step.tokens_in + step.tokens_out
    return [
        Quota(
            name,
            calls[name],
            tokens[name],
            models[name].requests_per_minute,
            models[name].tokens_per_minute,
            quota_time(models[name], calls[name], tokens[name]),
        )
        for name in sorted(calls)
    ]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def duration(seconds: float | None) -> str:
    """Seconds as people read a duration: "about 3 min", "about 2 h 10 min"."""
    if seconds is None:
        return "not bounded by a quota"
    if seconds < 60:
        return f"about {max(1, math.ceil(seconds))} s"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def evaluate_estimate(plan: EvaluatePlan, *, fresh: bool = False) -> EvaluateEstimate:
    """What the run would do and cost. Raises JobError when it has nothing to do."""
    scope = _scope(plan, fresh=fresh)
    if not scope.items:
        raise JobError(
            f"{plan.model.name} has every answer and every verdict of "
            f"{_names([j.name for j in plan.judges])} on release {plan.release.name} "
            f"({', '.join(Setting(s).label for s in plan.settings)}): nothing to do."
        )
    quotas = _quotas(plan, scope.steps)
    bounded = [q.seconds for q in quotas if q.seconds is not None]
    unbounded = [q.model for q in quotas if q.seconds is None and q.calls]
    notes = [
        f"{_plural(len(scope.items), 'question')} x setting to do on release "
        f"{plan.release.name}: each is answered (when {plan.model.name} has no answer yet), "
        "then judged on the release's rubric version by "
        f"{_names([j.name for j in plan.judges])}, as soon as its answer is in.",
        "Checks already judged are skipped and an unchanged check judged before on the same "
        "answer is copied without a call, so a run again continues where it stopped.",
    ]
    if plan.left_out:
        notes.append(
            f"Left out (they scored the release but call no model): {_names(plan.left_out)}."
        )
    if unbounded:
        notes.append(
            f"No per-minute limit is set for {_names(unbounded)}: the time spent there "
            "depends on how fast the model answers and how many workers run."
        )
    return EvaluateEstimate(
        items=len(scope.items),
        calls=sum(s.calls for s in scope.steps),
        tokens_in=sum(s.tokens_in for s in scope.steps),
        tokens_out=sum(s.tokens_out for s in scope.steps),
        cost=sum((s.cost for s in scope.steps), Decimal("0")),
        seconds=max(bounded) if bounded else None,
        steps=scope.steps,
        quotas=quotas,
        note=" ".join(notes),
    )


def evaluate_launch(*, user: Any, plan: EvaluatePlan, fresh: bool = False) -> Job:
    """Launch the run as one job; raises JobError when nothing is left to do."""
    scope = _scope(plan, fresh=fresh, count_copies=False)
    if not scope.items:
        raise JobError(
            f"{plan.model.name} has every answer and every verdict on release "
            f"{plan.release.name}: nothing to do."
        )
    answerer = plan.model.llm_model
    if (
        answerer is not None
        and not answerer.active
        and any(s.step == "collect" for s in scope.steps)
    ):
        raise JobError(f"{plan.model.name}'s LLM model {answerer.name!r} is switched off.")
    for judge in plan.judges:
        assert judge.llm_model is not None
        if not judge.llm_model.active:
            raise JobError(
                f"The judge {judge.name}'s LLM model {judge.llm_model.name!r} is switched off."
            )
    return job_launch(
        kind=llm_jobs.EVALUATE,
        items=scope.items,
        user=user,
        params={
            "model_id": plan.model.pk,
            "evaluated_model": plan.model.name,
            "model": answerer.name if answerer else "",
            "release_id": plan.release.pk,
            "release": plan.release.name,
            "settings": plan.settings,
            "judges": [[j.pk, j.name] for j in plan.judges],
            "answer_prompts": {
                s: load_prompt(llm_jobs.ANSWER_PROMPT[Setting(s)]).version for s in plan.settings
            },
            "judge_prompt": llm_jobs.judge_template().prompt.version,
            "fresh": fresh,
        },
    )


def plan_of(job: Job) -> EvaluatePlan:
    """The plan an evaluate job was launched with (from its params)."""
    params = job.params
    judges = {j.pk: j for j in Judge.objects.filter(pk__in=[pk for pk, _ in params["judges"]])}
    return EvaluatePlan(
        model=EvaluatedModel.objects.get(pk=params["model_id"]),
        release=Release.objects.get(pk=params["release_id"]),
        settings=list(params["settings"]),
        judges=[judges[pk] for pk, _ in params["judges"] if pk in judges],
    )


# ---------------------------------------------------------------------------------------------
# Where a run stands, step by step (from the rows, so a run again shows what is there).


@dataclass(frozen=True)
class StepProgress:
    label: str
    done: int
    total: int

    @property
    def percent(self) -> float:
        return round(100 * self.done / self.total, 1) if self.total else 100.0


def evaluate_progress(plan: EvaluatePlan) -> list[StepProgress]:
    """A line per step: the model's answers on the release's questions (each setting), and
    for each judge the answers with a verdict on every check of their rubric version."""
    versions = release_versions(plan.release)
    total = len(versions) * len(plan.settings)
    answers = Response.objects.filter(
        model=plan.model, setting__in=plan.settings, question_id__in=list(versions)
    ).count()
    steps = [StepProgress(f"answers of {plan.model.name}", answers, total)]
    for judge in plan.judges:
        scope = llm_jobs.judge_scope(
            judge=judge,
            model_ids=[plan.model.pk],
            settings=plan.settings,
            versions=versions,
            count_copies=False,
        )
        judged = scope.responses - scope.without_rubric - len(scope.items)
        steps.append(StepProgress(f"verdicts of {judge.name}", judged, total))
    return steps


# ---------------------------------------------------------------------------------------------
# The result.


@dataclass(frozen=True)
class Neighbour:
    """The model's paired difference to a model ranked next to it, on the questions both
    were scored on (the model minus the neighbour, x100, with its 95% interval)."""

    model: str
    rank: int
    questions: int
    difference: float | None
    low: float | None
    high: float | None
    p_holm: float | None
    significant: bool


@dataclass(frozen=True)
class ResultRow:
    """The model on one judge's board of the release in one setting."""

    setting: str
    judge: str
    row: Row | None  # None: no response of the model scored or waiting in this setting
    rank: int | None  # among the models with a score
    ranked: int  # models with a score
    neighbours: list[Neighbour]

    @property
    def audited(self) -> dict[str, Any] | None:
        """The Gamut score corrected by the human audit (x100, interval, pairs), or None."""
        if self.row is None or not self.row.corrected:
            return None
        corrected = self.row.audited
        return corrected if corrected["estimate"] is not None else None


def _neighbour(model: str, other: str, rank: int, pair: Paired) -> Neighbour:
    """The pair as `model` minus `other`, whichever order the board holds them in."""
    flip = pair.a != model
    d, low, high = pair.difference, pair.low, pair.high
    if flip:
        d = None if d is None else -d
        low, high = (None if high is None else -high), (None if low is None else -low)
    return Neighbour(other, rank, pair.n, d, low, high, pair.p_holm, pair.significant)


def evaluate_result(plan: EvaluatePlan) -> list[ResultRow]:
    """The model's row on each judge's board of the release, in each setting."""
    out = []
    for setting in plan.settings:
        for judge in plan.judges:
            board = release_board(
                plan.release, judge=judge, setting=setting, audit=True, estimate=False
            ).board
            ranked = [r for r in board.rows if r.gamut is not None]
            names = [r.model for r in ranked]
            row = next((r for r in board.rows if r.model == plan.model.name), None)
            rank = names.index(plan.model.name) + 1 if plan.model.name in names else None
            neighbours = []
            if rank is not None:
                pairs = {(p.a, p.b): p for p in board.comparisons}
                for other_rank in (rank - 1, rank + 1):
                    if 1 <= other_rank <= len(names):
                        other = names[other_rank - 1]
                        pair = (
                            pairs.get((plan.model.name, other)) or pairs[(other, plan.model.name)]
                        )
                        neighbours.append(_neighbour(plan.model.name, other, other_rank, pair))
            out.append(ResultRow(setting, judge.name, row, rank, len(names), neighbours))
    return out


def result_dict(result: ResultRow) -> dict[str, Any]:
    """One result row as the API and `--json` give it."""
    row = result.row
    return {
        "setting": result.setting,
        "judge": result.judge,
        "gamut": row.gamut if row else None,
        "ci_low": row.low if row else None,
        "ci_high": row.high if row else None,
        "audited": result.audited,
        "rank": result.rank,
        "ranked": result.ranked,
        "questions": row.questions if row else 0,
        "scored": row.scored if row else 0,
        "pending": row.pending if row else 0,
        "failed": row.failed if row else 0,
        "missing": row.missing if row else 0,
        "neighbours": [
            {
                "model": n.model,
                "rank": n.rank,
                "questions": n.questions,
                "difference": n.difference,
                "ci_low": n.low,
                "ci_high": n.high,
                "p_holm": n.p_holm,
                "significant": n.significant,
            }
            for n in result.neighbours
        ],
    }
