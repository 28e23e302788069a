"""Stored keys and audit events in words, for pages. A page never shows `partially_meets`,
`not_research_intensive` or an event's data as a dict: people read these screens all day."""

from __future__ import annotations

from functools import cache


@cache
def _known() -> dict[str, str]:
    from judging.models import Setting, VerdictValue
    from rubrics.models import Stage

    from .models import REASON_TAGS, CandidateOrigin, CandidateStatus, ImageStatus

    words = {
        # tiers of a check
        "answer_critical": "answer-critical",
        "valuable": "valuable",
        "context": "context",
        # kinds of meta-rubric item and of compiled check
        "fact": "fact",
        "strict_list": "strict list",
        "flexible_list": "flexible list",
        "list_item": "list item",
        "meta_insight": "meta-insight",
        "relation_entity": "related entity",
        "relation_aspect": "aspect of a relation",
        "process": "process",
        "relationship": "relationship",
        "coverage": "coverage",
        "sequence": "sequence",
        "step": "step",
        # the compiler's rules (rubrics/compiler.py Rule): what made a compiled check
        "strict_list.item": "an item of the strict list",
        "flexible_list.baseline": "the baseline of the flexible list",
        "flexible_list.option": "an option of the flexible list",
        "flexible_list.higher_threshold": "the higher threshold of the flexible list",
        "process.step_required": "a required step of the process",
        "process.step_optional": "an optional step of the process",
        "process.sequence_required": "the order of the required steps",
        "process.sequence_all": "the order of all the steps",
        "relationship.entity": "the related entity",
        "relationship.aspect": "an aspect of the relationship",
    }
    for choices in (Setting, Stage, CandidateOrigin):
        words.update({value: str(label) for value, label in choices.choices})
    # Lower case, as "partially meets" is: a legend or a column reads evenly.
    words.update({value: str(label).lower() for value, label in VerdictValue.choices})
    words.update({value: str(label).lower() for value, label in CandidateStatus.choices})
    words.update({value: str(label).lower() for value, label in ImageStatus.choices})
    words.update(dict(REASON_TAGS))
    return words


def words(value) -> str:
    """A stored key in words: a known label, else the key with its underscores as spaces."""
    if value is None:
        return ""
    text = str(value)
    return _known().get(text) or text.replace("_", " ")


def _candidate(event) -> str:
    return f"candidate {event.candidate_id}" if event.candidate_id else "a candidate"


def describe_event(event) -> str:
    """One audit event as a sentence (without who and when, which the page shows beside it)."""
    data = event.data if isinstance(event.data, dict) else {}
    action = event.action
    if action == "candidate.status":
        text = (
            f"{_candidate(event).capitalize()}: {words(data.get('from'))} → {words(data.get('to'))}"
        )
        return f"{text} ({data['reason']})" if data.get("reason") else text
    if action == "candidate.create":
        text = (
            f"{_candidate(event).capitalize()} written, round {data.get('round', '?')}, "
            f"{words(data.get('origin'))}"
        )
        return f"{text}, from candidate {data['parent']}" if data.get("parent") else text
    if action == "question.promote":
        return (
            f"{_candidate(event).capitalize()} became the image's question "
            f"({words(data.get('method'))}): “{data.get('text', '')}”"
        )
    if action.startswith("question.correct."):
        field = {"entity": "Ground-truth entity", "text": "Question wording"}.get(
            action.rsplit(".", 1)[1], "Question"
        )
        return (
            f"{field} corrected from “{data.get('old', '')}” to “{data.get('new', '')}”: "
            f"{data.get('reason', '')}"
        )
    if action == "question.drop":
        return f"Question dropped: {data.get('reason', '')}"
    if action == "question.restore":
        return f"Question restored: {data.get('reason', '')}"
    if action == "images.import":
        skipped = len(data.get("skipped") or [])
        return (
            f"Imported {data.get('imported', 0)} image(s) from {data.get('file') or 'a file'}"
            f" ({words(data.get('source'))}); {skipped} already there, skipped"
        )
    if action == "rubrics.import":
        return (
            f"Imported {data.get('versions', 0)} rubric version(s) of "
            f"{data.get('rubrics', 0)} rubric(s) from {data.get('file') or 'a file'}"
        )
    if action == "guard.verdict":
        verdict = (
            "selected"
            if data.get("selected")
            else (
                "passes"
                if data.get("passes_hard_requirements")
                and data.get("stranger_test_pass")
                and not data.get("boilerplate")
                else "rejected"
            )
        )
        return f"Guard on {_candidate(event)}: {verdict}" + (
            f" ({data['reason']})" if data.get("reason") else ""
        )
    if action == "llm.propose_entity":
        result = data.get("result") or {}
        if result.get("skipped"):
            return f"Entity proposal (job {data.get('job')}) skipped: {result['skipped']}"
        return (
            f"Entity proposed (job {data.get('job')}): “{result.get('entity', '')}”, popularity "
            f"{words(result.get('popularity'))}: {result.get('reason', '')}"
        )
    if action == "entity.confirm":
        return f"Proposed entity “{data.get('entity', '')}” confirmed"
    if action == "entity.correct":
        return (
            f"Proposed entity “{data.get('proposed', '')}” corrected to “{data.get('entity', '')}”"
        )
    if action in ("llm.generate", "llm.guard"):
        result = data.get("result") or {}
        what = "Generation" if action == "llm.generate" else "Guard"
        if result.get("skipped"):
            return f"{what} (job {data.get('job')}) skipped: {result['skipped']}"
        made = result.get("candidates") or result.get("proposed") or []
        if result.get("selected"):
            return f"{what} (job {data.get('job')}) chose candidate {result['selected']}"
        return f"{what} (job {data.get('job')}) wrote {len(made)} candidate(s)"
    if action.startswith("audit.review."):
        verdict = {"agree": "agreed with", "overturn": "overturned"}.get(
            action.rsplit(".", 1)[1], words(action.rsplit(".", 1)[1])
        )
        text = f"Audit: {verdict} review {data.get('review', '?')} of {_candidate(event)}"
        return f"{text}: {data['note']}" if data.get("note") else text
    if action == "review.undo":
        decision = words(data.get("decision"))
        return f"Review of {_candidate(event)} taken back" + (
            f" (the decision was {decision})" if decision else ""
        )
    if action == "gold.create":
        kind = "training item" if data.get("training") else "gold item"
        return f"{kind.capitalize()} added, the expert's decision: {words(data.get('decision'))}"
    if action in ("training.passed", "training.pass"):
        who = data.get("annotator")
        if action == "training.pass":
            return f"Let {who or 'an annotator'} through the training"
        return f"Training passed: {data.get('agreed', '?')} of {data.get('of', '?')} as the expert"
    if action == "training.failed":
        return f"Training failed: {data.get('agreed', '?')} of {data.get('of', '?')} as the expert"
    if action == "training.reset":
        return f"Training reset for {data.get('annotator') or 'an annotator'}: a new attempt"
    if action == "images.source_id_fixed":
        return f"Source id changed from “{data.get('from', '')}” to “{data.get('to', '')}”"
    return words(action.replace(".", " ")).capitalize()
