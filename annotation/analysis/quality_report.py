"""Per-annotator accuracy on gold items and audit overturn rate, overall and week by week, for
the agreement page and its CSV and JSON. Two queries; the rest is counting in Python."""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta

from django.utils import timezone

from ..models import AuditVerdict, GoldReview, ReviewAudit


def week_of(moment) -> date:
    """The Monday of the (local) week a moment falls in."""
    day = timezone.localtime(moment).date()
    return day - timedelta(days=day.weekday())


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def quality_report() -> dict:
    """{"annotators": [...], "weeks": [...]}: each annotator's gold answers (and how many took
    the expert's decision), reviews audited (and how many were overturned), and the same per
    week (Monday's date), with everyone's figures of the week under "all"."""
    counts: dict[tuple[str, date | None], dict[str, int]] = defaultdict(
        lambda: {"gold": 0, "gold_agreed": 0, "audited": 0, "overturned": 0}
    )

    def add(username: str, week: date, field: str, agreed_field: str, hit: bool) -> None:
        for key in ((username, None), (username, week), ("all", week)):
            counts[key][field] += 1
            counts[key][agreed_field] += int(hit)

    for username, created, agrees in GoldReview.objects.values_list(
        "annotator__username", "created_at", "agrees"
    ).iterator(chunk_size=5000):
        add(username, week_of(created), "gold", "gold_agreed", agrees)
    for username, audited, verdict in (
        ReviewAudit.objects.exclude(verdict="")
        .values_list("annotator__username", "audited_at", "verdict")
        .iterator(chunk_size=5000)
    ):
        add(username, week_of(audited), "audited", "overturned", verdict == AuditVerdict.OVERTURN)

    def row(username: str, week: date | None, c: dict[str, int]) -> dict:
        out = {"annotator": username}
        if week is not None:
            out["week"] = week.isoformat()
        return {
            **out,
            **c,
            "gold_accuracy": _share(c["gold_agreed"], c["gold"]),
            "overturn_rate": _share(c["overturned"], c["audited"]),
        }

    annotators = [
        row(username, None, c)
        for (username, week), c in sorted(counts.items(), key=lambda kv: kv[0][0])
        if week is None
    ]
    weeks = [
        row(username, week, c)
        for (username, week), c in sorted(
            counts.items(), key=lambda kv: (kv[0][1] or date.min, kv[0][0] != "all", kv[0][0])
        )
        if week is not None
    ]
    return {"annotators": annotators, "weeks": weeks}


ANNOTATOR_COLUMNS = [
    "annotator",
    "gold",
    "gold_agreed",
    "gold_accuracy",
    "audited",
    "overturned",
    "overturn_rate",
]
WEEK_COLUMNS = ["week", *ANNOTATOR_COLUMNS]


def trend_chart(weeks: list[dict], *, width: int = 100, height: int = 40) -> dict:
    """Everyone's weekly gold accuracy and overturn rate on a width x height box (0 % at the
    bottom, 100 % at the top): SVG polyline points and each point's (x, y, label) for a marker
    with its value; weeks without data are gaps. `drawn` is False under two weeks: one week is
    a single point, not a trend, and the page says so instead of drawing an empty box."""
    overall = [w for w in weeks if w["annotator"] == "all"]
    n = len(overall)

    def marks(field: str) -> list[tuple[str, str, str]]:
        out = []
        for i, w in enumerate(overall):
            if w[field] is None:
                continue
            x = width * (i / (n - 1) if n > 1 else 0.5)
            out.append(
                (f"{x:.1f}", f"{height * (1 - w[field]):.1f}", f"{w['week']}: {w[field]:.0%}")
            )
        return out

    accuracy, overturn = marks("gold_accuracy"), marks("overturn_rate")
    return {
        "weeks": [w["week"] for w in overall],
        "drawn": n >= 2,
        "accuracy": " ".join(f"{x},{y}" for x, y, _ in accuracy),
        "overturn": " ".join(f"{x},{y}" for x, y, _ in overturn),
        "accuracy_marks": accuracy,
        "overturn_marks": overturn,
        "width": width,
        "height": height,
    }
