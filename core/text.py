"""The checks on every text that enters, before the database sees it.

PostgreSQL refuses NUL in text (a 500 if it gets that far) and a lone surrogate cannot even be
encoded; SQLite enforces no length at all. So the limits are ours, applied where the text enters
(services, serializers, importers) and, as a backstop, to every request by
core.middleware.InputBoundaryMiddleware."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from .errors import InvalidInput

# C0 and C1 controls and DEL, less tab, line feed and carriage return (multi-line texts keep
# those); lone surrogates (U+D800-DFFF) cannot be stored in UTF-8 at all.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_LINE_BREAKS = re.compile(r"[\t\n\r\u2028\u2029\x85]")
# The explicit bidirectional embeddings, overrides and isolates: in a name (a model, an entity)
# they make it display as another text ("Trojan Source"). Marks (U+200E, U+200F) stay allowed.
_BIDI_CONTROLS = re.compile(r"[\u202a-\u202e\u2066-\u2069]")

SOURCE_ID_MAX = 200
SOURCE_ID_PATTERN = r"[A-Za-z0-9_.:-]+"
_SOURCE_ID = re.compile(rf"\A{SOURCE_ID_PATTERN}\Z")

# Any one value of a request: longer than every field's own limit, so the field's limit speaks
# first; what is longer still is refused whatever the field.
MAX_VALUE = 20_000

# The limits of what people type on the pages: one number for the service that refuses a longer
# text and for the page's field (its maxlength and counter, core.context_processors.limits).
MAX_QUESTION_TEXT = 2000  # a candidate's or question's text, a revision of it
MAX_COMMENT = 5000  # a review's or adjudication's comment, an audit's note, a gold item's note
MAX_ENTITY = 500  # Image.entity's max_length
MAX_CHECK_TEXT = 2000  # a rubric check's text
MAX_REASON = 2000  # why a check was deleted, a question corrected or dropped
MAX_SPOT_NOTE = 2000  # a spot check's note
MAX_SOURCE_IDS = 10_000  # the jobs page's box of source ids, one per line (about 500 of them)
MAX_DATASET_REVISION = 100  # ImportBatch.revision's max_length: the CRAG-MM copy's revision
LIMITS = {
    "question": MAX_QUESTION_TEXT,
    "comment": MAX_COMMENT,
    "entity": MAX_ENTITY,
    "check": MAX_CHECK_TEXT,
    "reason": MAX_REASON,
    "spot_note": MAX_SPOT_NOTE,
    "source_ids": MAX_SOURCE_IDS,
    "revision": MAX_DATASET_REVISION,
}


def bad_character(
    value: str, *, multiline: bool = True, bidi_controls: bool | None = None
) -> str | None:
    """A description of the first character the text may not hold, or None. A single-line text
    (a name) holds no line break and no bidirectional override; `bidi_controls` says otherwise
    for either kind."""
    if bidi_controls is None:
        bidi_controls = multiline
    found = _CONTROL.search(value)
    if found is None and not multiline:
        found = _LINE_BREAKS.search(value)
    if found is None and not bidi_controls:
        found = _BIDI_CONTROLS.search(value)
    if found is None:
        return None
    char = found.group()
    name = unicodedata.name(char, "a control character")
    return f"U+{ord(char):04X} ({name.lower()}) at character {found.start() + 1}"


def clean_text(
    value: Any,
    field: str,
    *,
    limit: int,
    required: bool = False,
    multiline: bool = True,
    strip: bool = True,
    bidi_controls: bool | None = None,
    label: str | None = None,
    plural: bool = False,
) -> str:
    """The text, stripped, or InvalidInput naming the field: not text, empty when required,
    holding a control character (or, in a single-line text, a line break or a bidirectional
    override), or longer than `limit` characters. `label`: the field as the page names it
    ("The comment"), for the message; the error's `field` stays the form's key. `plural`: the
    label names several things ("The notes are longer ...")."""
    what = label or field
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text.", field)
    if strip:
        value = value.strip()
    if required and not value:
        raise InvalidInput(f"{what} {'are' if plural else 'is'} required.", field)
    if len(value) > limit:
        # A page's field (labelled) says how far over it is; a file's field keeps its key.
        raise InvalidInput(
            f"{label} {'are' if plural else 'is'} longer than {limit:,} characters "
            f"({len(value):,} sent): shorten {'them' if plural else 'it'}."
            if label
            else f"{field} is longer than {limit} characters.",
            field,
        )
    bad = bad_character(value, multiline=multiline, bidi_controls=bidi_controls)
    if bad:
        raise InvalidInput(f"{what} may not contain {bad}.", field)
    return value


def json_text_problems(
    value: Any, path: str, *, limit: int, bidi_controls: bool = True, most: int = 20
) -> list[str]:
    """The problems of every text inside a decoded JSON value (its strings and its objects'
    keys), each named by its JSON path, as clean_text would state them: the database would
    refuse a NUL inside a JSON column as it does in a text one. At most `most` problems."""
    problems: list[str] = []
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack and len(problems) < most:
        node, where = stack.pop()
        if isinstance(node, str):
            try:
                clean_text(node, where, limit=limit, strip=False, bidi_controls=bidi_controls)
            except InvalidInput as exc:
                problems.append(exc.message)
        elif isinstance(node, dict):
            children = []
            for key, child in node.items():
                bad = bad_character(key, multiline=False)
                if bad or len(key) > limit:
                    problems.append(
                        f"{where} has a key that "
                        + (
                            f"may not contain {bad}."
                            if bad
                            else f"is longer than {limit} characters."
                        )
                    )
                    continue
                children.append((child, f"{where}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(node, list):
            stack.extend(reversed([(child, f"{where}[{i}]") for i, child in enumerate(node)]))
    return problems[:most]


def clean_source_id(value: Any, field: str = "source_id") -> str:
    """An image's source id: letters, digits and `-_.:`, at most SOURCE_ID_MAX characters. It
    is part of addresses (/images/<source_id>/), so `/`, `?`, `#`, spaces and the like would
    make pages that cannot be linked; an id of dots alone would be read as a path step."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(f"{field} is required.", field)
    if len(value) > SOURCE_ID_MAX:
        raise InvalidInput(f"{field} is longer than {SOURCE_ID_MAX} characters.", field)
    if not _SOURCE_ID.match(value) or not value.strip("."):
        raise InvalidInput(
            f"{field} may hold only letters, digits and - _ . : (not {value[:50]!r}).", field
        )
    return value


def clean_int(
    value: Any,
    field: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    required: bool = True,
) -> int | None:
    """A whole number from a form post or a query, or InvalidInput naming the field."""
    if value is None or value == "":
        if required:
            raise InvalidInput(f"{field} is required.", field)
        return None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidInput(f"{field} must be a whole number.", field)
    if isinstance(value, str):
        value = value.strip()
        if not re.fullmatch(r"[+-]?\d{1,18}", value):
            raise InvalidInput(f"{field} must be a whole number.", field)
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"{field} must be a whole number.", field) from exc
    if minimum is not None and number < minimum:
        raise InvalidInput(f"{field} must be at least {minimum}.", field)
    if maximum is not None and number > maximum:
        raise InvalidInput(f"{field} must be at most {maximum}.", field)
    return number
