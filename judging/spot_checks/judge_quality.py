"""Each judge measured against people, with the people measured against each other beside it.

Human labels are the first grade of every graded spot check: those drawn among the judges'
disagreements and those of the random audit (`source` picks one kind; the audit alone is the
unbiased picture, the disagreements are by construction the hard cases). For each judge, on the
pairs it gave a verdict on (failed ones left out): precision, recall and F1 per verdict (the
person's verdict is the truth), macro-F1 and Cohen's kappa, overall and by tier, domain and
rubric stage (the stage of the check's rubric version), all from scikit-learn's metrics.

The human-human ceiling: on the audit pairs graded by two people, the second person's verdicts
measured against the first's with the same measures. A judge is "as good as a second person"
when, on those same doubly graded pairs, its mean kappa with the two people is at least the
people's kappa with each other; with fewer than MIN_DOUBLE such pairs it is not decided (None).

Calibration: of the judge's "contradicts" (which costs |mu| checks) and "partially meets"
verdicts, how many people confirmed, and what people said instead.

Three queries whatever the number of spot checks: the graded spot checks, the judges' verdicts
on them, the judges.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db.models import Q
from sklearn.metrics import cohen_kappa_score, f1_score, precision_recall_fscore_support

from ..leaderboard.ppi import VERDICT_INDEX, from_counts, rectifier_spread
from ..models import Judge, ResponseTierCount, SpotCheck, Verdict, VerdictValue
from ..verdicts.scoring import TIERS, ScoringSettings
from .services import GRADES

SOURCES = ("all", "audit", "disagreement")
GROUPS = ("all", "tier", "domain", "stage")
CALIBRATED = (VerdictValue.CONTRADICTS, VerdictValue.PARTIALLY_MEETS)
MIN_DOUBLE = 30


def _finite(x: float) -> float | None:
    return None if x is None or math.isnan(x) else float(x)


def measures(truth: list[str], predicted: list[str]) -> dict[str, Any]:
    """Precision, recall, F1 and support per verdict, macro-F1 and Cohen's kappa of
    `predicted` against `truth` (scikit-learn). A verdict nobody predicted has precision None;
    one that never is the truth has recall None; kappa is None when it is undefined (one
    verdict only on both sides)."""
    out: dict[str, Any] = {"pairs": len(truth), "exact": sum(map(str.__eq__, truth, predicted))}
    if not truth:
        return {**out, "kappa": None, "macro_f1": None, "verdicts": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined ratios come back as nan, shown as None
        p, r, f, support = precision_recall_fscore_support(
            truth, predicted, labels=GRADES, zero_division=math.nan
        )
        kappa = cohen_kappa_score(truth, predicted, labels=GRADES)
        present = sorted(set(truth) | set(predicted))
        macro = f1_score(truth, predicted, labels=present, average="macro", zero_division=0)
    predicted_counts = Counter(predicted)
    verdicts = {
        v: {
            "precision": _finite(p[i]) if predicted_counts[v] else None,
            "recall": _finite(r[i]) if support[i] else None,
            "f1": _finite(f[i]) if predicted_counts[v] or support[i] else None,
            "support": int(support[i]),
        }
        for i, v in enumerate(GRADES)
    }
    return {**out, "kappa": _finite(kappa), "macro_f1": _finite(macro), "verdicts": verdicts}


@dataclass
class Label:
    response_id: int
    check_id: int
    tier: str
    domain: str
    stage: str
    person: str
    second: str  # "" unless graded twice


def labels(source: str = "all") -> list[Label]:
    kind = {"all": Q(), "audit": Q(audit=True), "disagreement": Q(disagreement=True)}[source]
    return [
        Label(*row)
        for row in SpotCheck.objects.filter(kind, graded_at__isnull=False)
        .order_by("pk")
        .values_list(
            "response_id",
            "check_row_id",
            "check_row__tier",
            "response__question__image__domain",
            "check_row__version__stage",
            "verdict",
            "second_verdict",
        )
    ]


def _grouped(items: list[tuple[Label, str, str]]) -> list[dict[str, Any]]:
    """measures() of (label, truth, predicted) items overall and per tier, domain, stage."""
    groups: dict[tuple[str, str], tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for label, truth, predicted in items:
        for by in GROUPS:
            value = "all" if by == "all" else getattr(label, by)
            groups[(by, value)][0].append(truth)
            groups[(by, value)][1].append(predicted)
    return [
        {"by": by, "value": value, **measures(*groups[(by, value)])}
        for by, value in sorted(groups, key=lambda k: (GROUPS.index(k[0]), k[1]))
    ]


def _calibration(pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    out = []
    for verdict in CALIBRATED:
        people = Counter(person for judge, person in pairs if judge == verdict)
        given = sum(people.values())
        out.append(
            {
                "verdict": str(verdict),
                "given": given,
                "confirmed": people[verdict],
                "rate": people[verdict] / given if given else None,
                "people": {v: people[v] for v in GRADES},
            }
        )
    return out


def _kappa(a: list[str], b: list[str]) -> float | None:
    return measures(a, b)["kappa"]


def judge_quality(source: str = "all") -> dict[str, Any]:
    if source not in SOURCES:
        raise ValueError(source)
    graded = labels(source)
    by_pair = {(x.response_id, x.check_id): x for x in graded}
    judged: dict[int, list[tuple[Label, str]]] = defaultdict(list)
    if graded:
        for judge_id, r, c, verdict in (
            Verdict.objects.filter(response_id__in={x.response_id for x in graded})
            .exclude(verdict=VerdictValue.FAILED)
            .order_by("pk")
            .values_list("judge_id", "response_id", "check_row_id", "verdict")
        ):
            label = by_pair.get((r, c))
            if label is not None:
                judged[judge_id].append((label, verdict))
    double = [x for x in graded if x.second]
    people = _grouped([(x, x.person, x.second) for x in double])
    people_kappa = _kappa([x.person for x in double], [x.second for x in double])
    judges = []
    for judge in Judge.objects.order_by("name"):
        items = judged.get(judge.pk, [])
        on_double = [(x, v) for x, v in items if x.second]
        judge_kappa = None
        if on_double:
            kappas = [
                _kappa([getattr(x, who) for x, _ in on_double], [v for _, v in on_double])
                for who in ("person", "second")
            ]
            judge_kappa = None if None in kappas else sum(kappas) / 2
        decided = len(on_double) >= MIN_DOUBLE and None not in (judge_kappa, people_kappa)
        judges.append(
            {
                "judge": judge.name,
                "groups": _grouped([(x, x.person, v) for x, v in items]),
                "calibration": _calibration([(v, x.person) for x, v in items]),
                "ceiling": {
                    "double_pairs": len(on_double),
                    "judge_kappa": judge_kappa,
                    "people_kappa": people_kappa,
                    "as_good_as_a_second_person": (judge_kappa >= people_kappa)
                    if decided
                    else None,
                },
            }
        )
    return {
        "source": source,
        "labels": len(graded),
        "double": len(double),
        "min_double": MIN_DOUBLE,
        "people": people,
        "judges": judges,
    }


VERDICT_COLUMNS = [f"{v}_{m}" for v in GRADES for m in ("precision", "recall", "f1", "support")]
EXPORT_COLUMNS = ["who", "by", "value", "pairs", "exact", "kappa", "macro_f1", *VERDICT_COLUMNS]


def export_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per (judge or "people", group): the tables of the page."""
    rows = []
    for who, groups in [("people", report["people"])] + [
        (j["judge"], j["groups"]) for j in report["judges"]
    ]:
        for g in groups:
            row = {k: g[k] for k in ("by", "value", "pairs", "exact", "kappa", "macro_f1")}
            for v, m in g["verdicts"].items():
                for name, value in m.items():
                    row[f"{v}_{name}"] = value
            rows.append({"who": who, **row})
    return rows


def audit_spread(settings: ScoringSettings) -> tuple[float, str, int]:
    """`ppi.rectifier_spread` of the graded audit pairs under every judge, from the judges'
    per-tier counts of the audited responses (as the leaderboard computes it); the graded spot
    checks of any kind while the audit has none (the hard cases: the width predicted from
    them errs on the wide side). Returns the spread, the kind used and the questions."""
    for source in ("audit", "all"):
        people = {
            (r, c): (version, tier, verdict)
            for r, c, version, tier, verdict in SpotCheck.objects.filter(
                Q(audit=True) if source == "audit" else Q(), graded_at__isnull=False
            )
            .order_by()
            .values_list(
                "response_id", "check_row_id", "check_row__version_id", "check_row__tier", "verdict"
            )
            if tier in TIERS
        }
        if not people:
            continue
        responses = {r for r, _ in people}
        pairs: dict[tuple[int, int, int], list[tuple[int, int, int]]] = defaultdict(list)
        for judge_id, r, c, verdict in (
            Verdict.objects.filter(
                response_id__in=responses, check_row_id__in={c for _, c in people}
            )
            .exclude(verdict=VerdictValue.FAILED)
            .order_by()
            .values_list("judge_id", "response_id", "check_row_id", "verdict")
        ):
            if (r, c) in people:
                version, tier, person = people[(r, c)]
                pairs[(judge_id, r, version)].append(
                    (TIERS.index(tier), VERDICT_INDEX[verdict], VERDICT_INDEX[person])
                )
        counts: dict[tuple[int, int, int], np.ndarray] = {}
        for judge_id, r, version, tier, *row in (
            ResponseTierCount.objects.filter(response_id__in=responses)
            .order_by()
            .values_list(
                "judge_id",
                "response_id",
                "version_id",
                "tier",
                "meets",
                "partially",
                "missing",
                "contradicts",
                "failed",
            )
        ):
            key = (judge_id, r, version)
            if key in pairs and tier in TIERS:
                cell = counts.setdefault(key, np.zeros((len(TIERS), 5)))
                cell[TIERS.index(tier)] = row
        keys = [k for k in sorted(counts) if not counts[k][:, 4].any()]  # no failed verdict
        judge_counts = np.array([counts[k][:, :4] for k in keys]).reshape(-1, len(TIERS), 4)
        flat = [(i, *pair) for i, k in enumerate(keys) for pair in pairs[k]]
        spread = rectifier_spread(from_counts(judge_counts, flat), settings)
        if not math.isnan(spread):
            return spread, source, len(keys)
    return math.nan, "", 0
