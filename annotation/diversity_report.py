"""The diversity report of the final questions or of all candidates, for the page, the API and
the `question_diversity` command: the questions read in one query, `diversity.analyse` on them,
the result cached under a hash of what it was computed from (clustering 1,800 questions takes
about a second and a half; the page shows both scopes)."""

from __future__ import annotations

import hashlib
import json

from django.core.cache import cache

from . import diversity
from .models import Candidate, CandidateStatus, FinalQuestion

SCOPES = {
    "final": "final questions (not dropped)",
    "candidates": "all candidate questions, every round",
}
CACHE_SECONDS = 24 * 3600


def scope_questions(scope: str) -> list[diversity.Question]:
    if scope == "final":
        rows = (
            FinalQuestion.objects.filter(dropped_at__isnull=True)
            .order_by("image__source_id")
            .values_list("image__source_id", "text", "image__entity", "image__domain")
        )
    elif scope == "candidates":
        # Gold items are the experts' test questions, not the generator's output.
        rows = (
            Candidate.objects.exclude(status=CandidateStatus.GOLD)
            .order_by("id")
            .values_list("id", "text", "image__entity", "image__domain")
        )
    else:
        raise ValueError(f"unknown scope {scope!r}")
    return [
        diversity.Question(key=str(key), text=text, entity=entity, domain=domain)
        for key, text, entity, domain in rows
    ]


def diversity_report(scope: str, *, top: int = 20) -> dict:
    """The report as plain data (the JSON of the page and the API)."""
    questions = scope_questions(scope)
    digest = hashlib.sha256(
        json.dumps(
            [
                scope,
                top,
                diversity.DISTANCE_THRESHOLD,
                [(q.key, q.text, q.entity, q.domain) for q in questions],
            ]
        ).encode()
    ).hexdigest()
    key = f"diversity:{digest}"
    cached = cache.get(key)
    if cached is None:
        cached = as_dict(scope, diversity.analyse(questions, top=top))
        cache.set(key, cached, CACHE_SECONDS)
    return cached


def _figures(figures: diversity.Figures) -> dict:
    return {
        "questions": figures.questions,
        "templates": figures.templates,
        "top5_share": figures.top5_share,
        "top20_share": figures.top20_share,
        "opening_trigrams": figures.opening_trigrams,
        "entropy_bits": figures.entropy_bits,
        "normalized_entropy": figures.normalized_entropy,
    }


def as_dict(scope: str, report: diversity.DiversityReport) -> dict:
    return {
        "scope": scope,
        "overall": _figures(report.overall),
        "domains": [
            {"domain": domain, **_figures(figures)} for domain, figures in report.domains.items()
        ],
        "templates": [
            {
                "rank": t.rank,
                "size": t.size,
                "share": t.share,
                "skeleton": t.skeleton,
                "domains": t.domains,
                "examples": [
                    {"key": q.key, "text": q.text, "domain": q.domain} for q in t.examples
                ],
            }
            for t in report.templates
        ],
        "size_distribution": [
            {"size": size, "templates": count} for size, count in report.size_distribution
        ],
        "method": {
            "distance_threshold": diversity.DISTANCE_THRESHOLD,
            "domain_tied_share": diversity.DOMAIN_TIED_SHARE,
        },
    }


DOMAIN_COLUMNS = [
    "domain",
    "questions",
    "templates",
    "top5_share",
    "top20_share",
    "opening_trigrams",
    "entropy_bits",
    "normalized_entropy",
]
TEMPLATE_COLUMNS = ["rank", "size", "share", "skeleton", "domains", "examples"]


def csv_rows(report: dict, table: str) -> tuple[list[str], list[dict]]:
    """One table of the report as CSV rows: `domains` (with an `all` row first) or
    `templates`."""
    if table == "domains":
        return DOMAIN_COLUMNS, [{"domain": "all", **report["overall"]}, *report["domains"]]
    if table == "templates":
        return TEMPLATE_COLUMNS, [
            {
                **t,
                "domains": "; ".join(f"{d} {n}" for d, n in t["domains"].items()),
                "examples": " | ".join(e["text"] for e in t["examples"]),
            }
            for t in report["templates"]
        ]
    raise ValueError(f"unknown table {table!r}")
