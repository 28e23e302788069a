from django import template

from annotation.labels import words as in_words
from rubrics.compiler import is_web_url

register = template.Library()


@register.filter
def keypairs(value: str) -> list[tuple[str, str]]:
    """ "a:Accept,r:Revise" -> [("a", "Accept"), ("r", "Revise")] for the keys dialog."""
    pairs = []
    for item in value.split(","):
        key, _, what = item.partition(":")
        pairs.append((key, what))
    return pairs


@register.filter
def percent(value) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"


@register.filter
def num(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


@register.filter
def get(mapping: dict, key):
    return mapping.get(key, key)


@register.filter
def web_url(value) -> bool:
    """Whether a snippet's URL may be a link's href: http(s) only, whatever a stored rubric
    holds (rows from before the compiler refused other schemes)."""
    return is_web_url(value)


@register.filter
def timeuntil_seconds(moment) -> int:
    """Whole seconds from now until `moment` (0 when past): the page counts down from this on
    the browser's own clock, so a skew between the two clocks does not matter."""
    from django.utils import timezone

    return max(0, int((moment - timezone.now()).total_seconds()))


@register.filter
def words(value) -> str:
    """A stored key in words (`partially_meets` -> "partially meets")."""
    return in_words(value)


@register.filter
def event_words(event) -> str:
    """An audit event as a sentence."""
    from annotation.labels import describe_event

    return describe_event(event)


@register.filter
def readable(value) -> list[tuple[str, str, bool]]:
    """A job item's payload or result as (label, text, structured) rows: each key in words
    ("question_id" -> "question id"), a scalar or a list of scalars as text, anything nested
    as indented JSON (structured). Not a dict: one row of the whole value."""
    import json

    def text(item) -> tuple[str, bool]:
        if isinstance(item, bool):
            return ("yes" if item else "no"), False
        if item is None:
            return "—", False
        if isinstance(item, (str, int, float)):
            return str(item), False
        if isinstance(item, list) and all(isinstance(i, (str, int, float)) for i in item):
            return (", ".join(str(i) for i in item) or "none"), False
        return json.dumps(item, indent=2, ensure_ascii=False, sort_keys=True), True

    if not isinstance(value, dict):
        shown, structured = text(value)
        return [("Value", shown, structured)]
    rows = []
    for key, item in value.items():
        shown, structured = text(item)
        rows.append((in_words(key).capitalize(), shown, structured))
    return rows


@register.filter
def job_title(kind: str) -> str:
    """A job's kind as the pages name it ("annotation.generate" -> "Generate candidates")."""
    from llm.jobs import kind_title

    return kind_title(kind)
