"""The changes a human round made, and what a rebuild that follows it did with each.

A reviser revises the compiled checklist, not the meta-rubric: a human version's meta-rubric is
its parent's, and its changes live in its checks. Refinement round 2 rebuilds from the
meta-rubric, so each change is handed to it explicitly, with an id, and it must carry each
into the rebuilt items or drop it with a reason (rubrics/llm_jobs.py). This module is the pure
part of that: deriving the changes from the rows, checking a rebuild's answer against them,
and the outcome kept on the new version. No Django: rows in, plain data out.

The changes, derived from the human version's checks against its parent's (matched by check
id; the human version starts as a copy of its parent's live checks):
- add: a check added by hand and still there (its text and tier);
- edit: a check whose text differs from its parent's (before and after);
- retier: a check whose tier differs (before and after); a check both edited and re-tiered
  gives two changes;
- delete: a parent check deleted (its parent's text and the reviser's reason).
A check added and then deleted gives none, nor does one changed and changed back. Moves are not
changes here: the order of the checks is the compiler's. Ids are h1..hN in checklist order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Protocol

ADD, EDIT, RETIER, DELETE = "add", "edit", "retier", "delete"
Op = Literal["add", "edit", "retier", "delete"]
CARRIED, DROPPED = "carried", "dropped"


@dataclass(frozen=True)
class CheckRow:
    """What the derivation reads of one check row."""

    check_id: str
    text: str
    tier: str
    added: bool = False  # added by hand in this round
    deleted: bool = False
    reason: str = ""  # why it was deleted
    source: str = ""  # the meta item or meta-insight it came from


@dataclass(frozen=True)
class HumanChange:
    id: str  # h1..hN
    op: Op
    check_id: str
    source: str  # the meta item or meta-insight of the check ("" for an addition without one)
    text: str  # add: its text; edit: the text after; retier: the check's text; delete: the text
    tier: str  # add and edit: the check's tier; retier: the tier after; delete: the tier it had
    before: str = ""  # edit and retier: the text before the round
    tier_before: str = ""  # retier: the tier before
    reason: str = ""  # delete: the reviser's reason

    def describe(self) -> str:
        """What the change is, in a few words (the repair turns and the pages say it so)."""
        if self.op == ADD:
            return f"addition of {self.check_id} at {_tier(self.tier)}"
        if self.op == EDIT:
            return f"edit of {self.check_id}"
        if self.op == RETIER:
            return (
                f"re-tier of {self.check_id} from {_tier(self.tier_before)} to {_tier(self.tier)}"
            )
        return f"deletion of {self.check_id}"

    def for_prompt(self) -> dict[str, str]:
        """The change's fields (only those of its kind): what prompt_items lists, and what the
        demo provider reads back out of a rebuild's prompt."""
        shown: dict[str, str] = {"id": self.id, "change": self.op, "check": self.check_id}
        if self.source:
            shown["meta_item"] = self.source
        if self.op == ADD:
            shown |= {"text": self.text, "tier": self.tier}
        elif self.op == EDIT:
            shown |= {"before": self.before, "after": self.text, "tier": self.tier}
        elif self.op == RETIER:
            shown |= {"text": self.text, "tier_before": self.tier_before, "tier": self.tier}
        else:
            shown |= {"text": self.text, "tier": self.tier, "reason": self.reason}
        return shown

    def prompt_items(self) -> list[tuple[str, str]]:
        """The change for the rebuild's fenced listing (`{human_changes:fence_each}`): a
        (line, text) pair per text of the change. The line is ours (the change's id and kind,
        the check, where it came from, the tiers) and stays outside; each text (a check's
        words, the reviser's reason) goes in a fence of its own, so no text can pose as a
        change or end another's fence."""
        shown = self.for_prompt()
        where = f" (from {self.source})" if self.source else ""
        if self.op == RETIER:
            tiers = f"from tier {self.tier_before} to tier {self.tier}"
        else:
            tiers = f"at tier {self.tier}"
        first = f"{self.id}, {self.op}: check {self.check_id}{where} {tiers}; "
        texts = [(label, shown[field]) for field, label in PROMPT_TEXTS.items() if field in shown]
        return [
            (f"{first}{label}" if n == 0 else f"{self.id}, {self.op}: {label}", text)
            for n, (label, text) in enumerate(texts)
        ]


# The texts of a change in the rebuild's listing, by their field in for_prompt, in order.
PROMPT_TEXTS = {
    "text": "its text",
    "before": "its text before",
    "after": "its text after",
    "reason": "the reviser's reason",
}


def prompt_items(changes: Sequence[HumanChange]) -> list[tuple[str, str]]:
    """The changes for `{human_changes:fence_each}`: no change, no pair ("(none)")."""
    return [pair for change in changes for pair in change.prompt_items()]


def _tier(tier: str) -> str:
    return tier.replace("_", "-")


def derive_changes(parent: Sequence[CheckRow], human: Sequence[CheckRow]) -> list[HumanChange]:
    """The changes of a human round: `human` its version's checks in checklist order (deleted
    ones too), `parent` its parent's."""
    before = {row.check_id: row for row in parent}
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for row in human:
        seen.add(row.check_id)
        if row.added:
            if not row.deleted:
                found.append(
                    {
                        "op": ADD,
                        "check_id": row.check_id,
                        "source": row.source,
                        "text": row.text,
                        "tier": row.tier,
                    }
                )
            continue
        old = before.get(row.check_id)
        if old is None or old.deleted:
            continue  # nothing of the parent's to change
        base = {"check_id": row.check_id, "source": old.source}
        if row.deleted:
            found.append(
                {**base, "op": DELETE, "text": old.text, "tier": old.tier, "reason": row.reason}
            )
            continue
        if row.text != old.text:
            found.append(
                {**base, "op": EDIT, "text": row.text, "before": old.text, "tier": row.tier}
            )
        if row.tier != old.tier:
            found.append(
                {
                    **base,
                    "op": RETIER,
                    "text": row.text,
                    "tier": row.tier,
                    "before": old.text,
                    "tier_before": old.tier,
                }
            )
    # A parent check missing from the human version altogether (never made by the workspace,
    # which copies every live check) is a deletion without a recorded reason.
    found += [
        {
            "op": DELETE,
            "check_id": row.check_id,
            "source": row.source,
            "text": row.text,
            "tier": row.tier,
        }
        for row in parent
        if row.check_id not in seen and not row.deleted
    ]
    return [HumanChange(id=f"h{n}", **change) for n, change in enumerate(found, start=1)]


# ---------------------------------------------------------------------------------------------
# A rebuild's answer to the changes.


class Compiled(Protocol):
    """What the checks read of a compiled check (rubrics.compiler.Check)."""

    @property
    def id(self) -> str: ...
    @property
    def tier(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Answer:
    """What a rebuild says of one change."""

    id: str
    outcome: str  # carried | dropped
    item: str = ""
    reason: str = ""


def entries(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A meta-rubric's items and meta-insights by id."""
    found: dict[str, dict[str, Any]] = {}
    for item in meta.get("items", []):
        found[item["id"]] = item
        for insight in item.get("meta_insights") or []:
            found[insight["id"]] = insight
    return found


def change_problems(
    changes: Sequence[HumanChange],
    answers: Sequence[Answer],
    *,
    input_meta: dict[str, Any],
    document: dict[str, Any],
    compiled: Sequence[Compiled] | None,
) -> list[str]:
    """What makes a rebuild's answer lose a human change, each naming the change and what was
    lost (and its JSON path in the answer): every change answered exactly once; a dropped one
    with a reason; a carried addition, edit or re-tier named by an item of the rebuild that
    compiles to a check at the human's tier, an addition by an item that is new or changed; and
    none undone: an edit compiled back to its old text, a re-tier back at its old tier, a
    deleted check compiled again with its text. `compiled` is None when the document does not
    compile (its own problems are reported elsewhere): only the answers are checked then."""
    by_id = {change.id: change for change in changes}
    problems: list[str] = []
    answered: set[str] = set()
    for n, answer in enumerate(answers):
        at = f"human_changes[{n}]"
        change = by_id.get(answer.id)
        if change is None:
            known = ", ".join(by_id) or "none"
            problems.append(
                f"{at}.id: {answer.id!r} is not a change of the human round (its changes: {known})"
            )
            continue
        if answer.id in answered:
            problems.append(f"{at}.id: {answer.id} is answered already; answer each change once")
            continue
        answered.add(answer.id)
        problems += _answer_problems(at, change, answer, input_meta, document, compiled)
    unanswered = [change for change in changes if change.id not in answered]
    if unanswered:
        listed = "; ".join(f"{c.id} ({c.describe()}: {_quoted(c)})" for c in unanswered)
        problems.append(
            f"human_changes: no answer for {listed}; carry each into the items and name the item, "
            "or drop it with a reason"
        )
    return problems


def _quoted(change: HumanChange) -> str:
    text = change.text if len(change.text) <= 120 else change.text[:117] + "..."
    return f'"{text}"'


def _answer_problems(
    at: str,
    change: HumanChange,
    answer: Answer,
    input_meta: dict[str, Any],
    document: dict[str, Any],
    compiled: Sequence[Compiled] | None,
) -> list[str]:
    name = f"{change.id} ({change.describe()})"
    if answer.outcome == DROPPED:
        if not answer.reason.strip():
            return [f"{at}.reason: {name} is dropped without a reason; give it, or carry it"]
        return []
    rebuilt = entries(document)
    item = answer.item.strip()
    if change.op != DELETE:
        if not item:
            return [
                f"{at}.item: {name} is carried but names no item; name the item or "
                "meta-insight of the rebuild that carries it"
            ]
        if item not in rebuilt:
            return [f"{at}.item: {item!r} is no item or meta-insight of the rebuild ({name})"]
    elif item and item not in rebuilt and item not in entries(input_meta):
        return [f"{at}.item: {item!r} is no item or meta-insight of the rebuild ({name})"]
    if compiled is None:
        return []
    problems: list[str] = []
    if change.op != DELETE and not any(
        c.source == item and c.tier == change.tier for c in compiled
    ):
        problems.append(
            f"{at}: {name} is carried by {item}, which compiles to no check at "
            f"{_tier(change.tier)}; carry it at that tier or drop it with a reason"
        )
    if (
        change.op == ADD
        and rebuilt.get(item) is not None
        and (rebuilt[item] == entries(input_meta).get(item))
    ):
        problems.append(
            f"{at}: {name} is carried by {item}, which is the input's {item} unchanged; put "
            "the added check into an item (changed or new) or drop it with a reason"
        )
    same = next((c for c in compiled if c.id == change.check_id), None)
    if same is None:
        return problems
    if change.op == EDIT and same.text == change.before:
        problems.append(
            f"{at}: {name} is reverted: the rebuild compiles {change.check_id} to its text "
            "before the reviser's edit; carry the edit or drop it with a reason"
        )
    elif (
        change.op == RETIER
        and same.tier == change.tier_before
        and (same.text in (change.text, change.before))
    ):
        problems.append(
            f"{at}: {name} is reverted: the rebuild compiles {change.check_id} at "
            f"{_tier(change.tier_before)} again; carry the re-tier or drop it with a reason"
        )
    elif change.op == DELETE and same.text == change.text:
        problems.append(
            f"{at}: {name} is not carried: the rebuild compiles {change.check_id} again with "
            "the deleted text; remove what it came from or drop the change with a reason"
        )
    return problems


def outcomes(
    changes: Sequence[HumanChange], answers: Sequence[Answer], compiled: Sequence[Compiled]
) -> list[dict[str, Any]]:
    """Each change with what the rebuild did with it, as the new version keeps it: `outcome`,
    `item` and `checks` (the checks of the new version that carry it: its item's at the human's
    tier, or only the check of the same id among them) when carried, `why` when dropped (the
    LLM's words; a carried change's note too). The answers passed change_problems."""
    said = {answer.id: answer for answer in answers}
    kept = []
    for change in changes:
        answer = said[change.id]
        entry = {**asdict(change), "outcome": answer.outcome, "why": answer.reason.strip()}
        entry["item"], entry["checks"] = "", []
        if answer.outcome == CARRIED:
            entry["item"] = answer.item.strip()
            if change.op != DELETE:
                at_tier = [
                    c.id for c in compiled if c.source == entry["item"] and c.tier == change.tier
                ]
                entry["checks"] = [change.check_id] if change.check_id in at_tier else at_tier
        kept.append(entry)
    return kept


def describe(entry: dict[str, Any]) -> str:
    """An outcome entry's change in a few words (for pages reading the stored JSON)."""
    fields = HumanChange.__dataclass_fields__
    return HumanChange(**{k: v for k, v in entry.items() if k in fields}).describe()
