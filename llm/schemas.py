"""Response schemas with the ids a reply may name, built per call (constrained decoding).

A response model is a static pydantic class; what it cannot say statically is which ids exist:
the guard's candidate ids, the audit's snippet ids, a rebuild's input items. Nothing but the
prompt's prose told the model, and a model that does not read ids out of prose (many
open-weight ones) answered with ids of its own. So a model marks, in its JSON Schema, the
fields that name an id of a set and the lists that hold one element per id of a set:

    class Verdict(BaseModel):
        id: str = Field(json_schema_extra=names("snippets"))

    class Audit(BaseModel):
        verdicts: list[Verdict] = Field(json_schema_extra=one_each("snippets"))

and each call gives the sets (`gateway.call_structured(..., ids={"snippets": ["s1", "s2"]})`).
`response_schema(model, ids)` is then the model's JSON Schema with the marks replaced: a field
that names an id gets `enum` (strings or integers, as the ids are), a list that holds one element
per id gets `minItems` = `maxItems` = their count, a list of ids from an empty set gets
`maxItems: 0`. That is what the providers send (Gemini's `responseJsonSchema`, whose documented
subset has `enum` on strings and integers and `minItems`/`maxItems`; a strict `json_schema` to
OpenAI-compatible servers, which vLLM enforces by guided decoding), and what the ledger's request
hash covers. The stage's own check stays the last line: a schema bounds a list's length, it does
not make its ids distinct.

Costs. The static part (the model's schema, its marks) is built once per class, and the classes
are the code's own, a fixed few. The per-call schema is a fresh dict, never cached, so a
long-running worker keeps nothing per call (a cache keyed by a class built per call would grow
with every call). A model without marks (the judge's) gets the same cached dict as before, so
its calls cost nothing more and its request hashes do not change.

Pure Python (pydantic only): the rubric compiler marks its snippet citations with it too.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

# The marks, as JSON Schema annotations (an unknown keyword is an annotation); never sent.
NAMES = "x-ids"  # on a string or integer (or a union with null): one id of the set
ONE_EACH = "x-each-id"  # on a list: one element per id of the set
_MARKS = (NAMES, ONE_EACH)

Id = str | int
# The id sets of a call, canonical and hashable: (name, ids in the order given), by name.
IdSets = tuple[tuple[str, tuple[Id, ...]], ...]


class SchemaIdsError(ValueError):
    """A call's id sets do not fit its response model's marks (a set missing, or one given that
    the model does not mark): a mistake in the calling code, not in the model's answer."""


def names(id_set: str) -> dict[str, str]:
    """`json_schema_extra` of a field whose value is one id of `id_set`."""
    return {NAMES: id_set}


def one_each(id_set: str) -> dict[str, str]:
    """`json_schema_extra` of a list that holds one element per id of `id_set`."""
    return {ONE_EACH: id_set}


def id_sets(ids: Mapping[str, Iterable[Id]] | None) -> IdSets:
    """A call's sets in their canonical form (duplicates dropped, the first place kept)."""
    if not ids:
        return ()
    return tuple((name, tuple(dict.fromkeys(ids[name]))) for name in sorted(ids))


@functools.cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A response model's JSON Schema as pydantic makes it, marks and all, built once per class
    (pydantic builds it anew on every call, and each request needs it twice). Shared: readers
    must not change it."""
    return model.model_json_schema()


@functools.cache
def marked_sets(model: type[BaseModel]) -> frozenset[str]:
    """The id sets a response model's schema marks."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.update(str(node[mark]) for mark in _MARKS if mark in node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json_schema(model))
    return frozenset(found)


def response_schema(model: type[BaseModel], ids: IdSets = ()) -> dict[str, Any]:
    """The JSON Schema to send for `model` with the call's id sets (see the module's text).

    A model without marks gets its cached schema itself: build nothing, share it, change it
    never. Raises SchemaIdsError when the sets given are not the ones the model marks."""
    wanted = marked_sets(model)
    given = dict(ids)
    if set(given) != wanted:
        missing, extra = sorted(wanted - set(given)), sorted(set(given) - wanted)
        raise SchemaIdsError(
            f"{model.__name__} marks the id sets {sorted(wanted)}; the call gave "
            f"{sorted(given)}"
            + (f" (missing {missing})" if missing else "")
            + (f" (not marked: {extra})" if extra else "")
        )
    if not wanted:
        return json_schema(model)
    return _constrained(json_schema(model), given)


def _constrained(node: Any, ids: dict[str, tuple[Id, ...]]) -> Any:
    """A copy of `node` with every mark replaced by the constraint it stands for."""
    if isinstance(node, list):
        return [_constrained(value, ids) for value in node]
    if not isinstance(node, dict):
        return node
    out = {key: _constrained(value, ids) for key, value in node.items() if key not in _MARKS}
    if NAMES in node and ids[node[NAMES]]:
        _enum(out, ids[node[NAMES]])
    if ONE_EACH in node:
        out["minItems"] = out["maxItems"] = len(ids[node[ONE_EACH]])
    items = node.get("items")
    if isinstance(items, dict) and NAMES in items and not ids[items[NAMES]]:
        # A list of ids from an empty set (a rubric without evidence cites none) can only be
        # empty; an enum of nothing is not a schema a provider takes.
        out["maxItems"] = 0
    return out


def _enum(node: dict[str, Any], values: tuple[Id, ...]) -> None:
    if "anyOf" in node:  # e.g. `int | None`: the ids go on the branches that are not null
        node["anyOf"] = [
            branch if branch.get("type") == "null" else {**branch, "enum": list(values)}
            for branch in node["anyOf"]
        ]
    else:
        node["enum"] = list(values)
