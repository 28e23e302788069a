"""The diversity report of the final questions or of all candidates, for the page, the API and
the `question_diversity` command: the questions read in one query, `diversity.analyse` on them.
The command computes it now (cached under a hash of what it was computed from); the page and the
API show what the background job stored (diversity_jobs.py), with when and how long."""

from __future__ import annotations

import hashlib
import json

from django.core.cache import cache

from llm.models import Job

from ..models import AuditEvent, Candidate, CandidateStatus, FinalQuestion
from . import diversity

SCOPES = {
    "final": "final questions (not dropped)",
    "candidates": "all candidate questions, every round",
}
CACHE_SECONDS = 24 * 3600


def _scope_rows(scope: str) -> tuple[list[diversity.Question], list[tuple[str, int, str]]]:
    """The questions, and for final ones (source id, candidate id, method) of each."""
    if scope == "final":
        rows = (
            FinalQuestion.objects.filter(dropped_at__isnull=True)
            .order_by("image__source_id")
            .values_list(
                "image__source_id",
                "text",
                "image__entity",
                "image__domain",
                "candidate_id",
                "method",
            )
        )
    elif scope == "candidates":
        # Gold items are the experts' test questions, not the generator's output.
        rows = (
            Candidate.objects.exclude(status=CandidateStatus.GOLD)
            .order_by("id")
            .values_list("id", "text", "image__entity", "image__domain", "id", "origin")
        )
    else:
        raise ValueError(f"unknown scope {scope!r}")
    questions, chosen = [], []
    for key, text, entity, domain, candidate_id, method in rows:
        questions.append(diversity.Question(key=str(key), text=text, entity=entity, domain=domain))
        chosen.append((str(key), candidate_id, method))
    return questions, chosen


MANUAL = "promoted by an admin"
UNKNOWN_GUARD = "guard (prompt version not recorded)"


def guard_prompts(finals: list[tuple[str, int, str]]) -> dict[str, str]:
    """Which guard prompt chose each final question (source id -> "guard v1", "guard v2", ...;
    an admin's promotion says so): the guard's `llm.guard` event names the candidate it chose
    and its job, whose params fixed the prompt version at launch. So the figures of questions
    chosen before and after the guard was told of the over-represented templates (v2) can be
    set side by side, clustered together."""
    if not any(method == FinalQuestion.Method.GUARD for _, _, method in finals):
        return {source_id: MANUAL for source_id, _, _ in finals}
    chosen = {
        (source_id, data["result"]["selected"]): data.get("job")
        for source_id, data in AuditEvent.objects.filter(action="llm.guard")
        .order_by("pk")
        .values_list("image__source_id", "data")
        if isinstance(data, dict) and (data.get("result") or {}).get("selected")
    }
    versions = dict(
        Job.objects.filter(pk__in=set(chosen.values())).values_list("pk", "params__prompt_version")
    )
    labels = {}
    for source_id, candidate_id, method in finals:
        if method != FinalQuestion.Method.GUARD:
            labels[source_id] = MANUAL
            continue
        version = versions.get(chosen.get((source_id, candidate_id)))
        labels[source_id] = f"guard v{version}" if version else UNKNOWN_GUARD
    return labels


def gather(scope: str) -> tuple[list[diversity.Question], dict[str, str]]:
    """What the report of a scope is computed from (the database's part): its questions and,
    for final ones, the guard prompt that chose each."""
    questions, finals = _scope_rows(scope)
    return questions, guard_prompts(finals) if scope == "final" else {}


def build(
    scope: str, questions: list[diversity.Question], prompts: dict[str, str], *, top: int = 20
) -> dict:
    """The report as plain data from what `gather` read (no query: the analysis's part)."""
    analysed = diversity.analyse(questions, top=top)
    report = as_dict(scope, analysed)
    report["guard_prompts"] = _by_guard_prompt(questions, analysed.labels, prompts)
    return report


def diversity_report(scope: str, *, top: int = 20) -> dict:
    """The report as plain data, computed now (the command, the guard's launch), cached under a
    hash of what it is computed from. The page and the API show the stored result of the
    background job instead (diversity_jobs)."""
    questions, prompts = gather(scope)
    digest = hashlib.sha256(
        json.dumps(
            [
                scope,
                top,
                diversity.DISTANCE_THRESHOLD,
                [(q.key, q.text, q.entity, q.domain) for q in questions],
                sorted(prompts.items()),
            ]
        ).encode()
    ).hexdigest()
    key = f"diversity:{digest}"
    cached = cache.get(key)
    if cached is None:
        cached = build(scope, questions, prompts, top=top)
        cache.set(key, cached, CACHE_SECONDS)
    return cached


def _by_guard_prompt(
    questions: list[diversity.Question], labels: list[int], prompts: dict[str, str]
) -> list[dict]:
    """The figures of each guard prompt's questions, on the templates of all of them (the same
    clustering: a template shared by v1's and v2's questions is one template in both)."""
    groups: dict[str, list[int]] = {}
    for index, question in enumerate(questions):
        if question.key in prompts:
            groups.setdefault(prompts[question.key], []).append(index)
    return [
        {
            "guard_prompt": name,
            **_figures(diversity.figures_of([questions[i] for i in idx], [labels[i] for i in idx])),
        }
        for name, idx in sorted(groups.items())
    ]


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
GUARD_PROMPT_COLUMNS = ["guard_prompt", *DOMAIN_COLUMNS[1:]]
TEMPLATE_COLUMNS = ["rank", "size", "share", "skeleton", "domains", "examples"]


def csv_rows(report: dict, table: str) -> tuple[list[str], list[dict]]:
    """One table of the report as CSV rows: `domains` (with an `all` row first), `templates`
    or `guard_prompts` (final questions: the figures per guard prompt version)."""
    if table == "domains":
        return DOMAIN_COLUMNS, [{"domain": "all", **report["overall"]}, *report["domains"]]
    if table == "guard_prompts":
        return GUARD_PROMPT_COLUMNS, report.get("guard_prompts", [])
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
