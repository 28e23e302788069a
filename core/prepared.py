"""Queries built and compiled once, run many times: for the few queries that every request of a
hot page makes (the session, its user, the workspace's draft and checks).

The ORM builds a query's tree and compiles its SQL at every call: for a lookup by primary key
about 300 of its 564 us (in-process, PostgreSQL; bench/README.md, "The page's template, and
where the next fifth is"). A `Prepared` query is written as the ORM query it stands for, built
by a function of its parameters; the first call on a database compiles it with a placeholder
value for each parameter and remembers where in the SQL's parameters each placeholder went.
Every later call runs the same SQL with the caller's values, through the connection's own
cursor (so Django's query counting, logging and execute wrappers see it), and makes its results
as the ORM would: model instances (with select_related and annotations), named tuples, or the
number of rows an UPDATE changed.

An integer parameter beyond what its column's type holds makes the whole query match nothing
(right for the conditions joined by AND that these queries are; where such a value sits in an
OR, use the ORM). A parameter must reach the SQL as itself: a lookup that rewrites its value
(`__contains`, `__in` on a list) or a value written into the SQL's text (a slice's LIMIT) is
refused when the query is compiled, never run wrong. No library does this: the two that did
(django-prepared-queries, django-prepared-query) are unmaintained.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connections, transaction
from django.db.models import QuerySet
from django.db.models.query import (
    ModelIterable,
    NamedValuesListIterable,
    ValuesListIterable,
    get_related_populators,
)
from django.db.models.sql import UpdateQuery
from django.db.models.utils import create_namedtuple_class

# The placeholders: values no caller passes, each of its type, each in range for its column
# (Django 5 answers an integer out of a column's range with no query at all).
_PLACEHOLDER_INT = 1_987_654_300
_PLACEHOLDER_TIME = datetime(1987, 6, 5, 4, 3, 2, tzinfo=UTC)

# The integers a parameter can carry: PostgreSQL's bigint and SQLite's INTEGER, or what
# psycopg's wrapper of the column's type holds (the ORM passes an IntegerField's value as an
# Int4). Beyond them no row matches, as the ORM answers it, instead of the driver raising.
_BITS = {"Int2": 16, "Int4": 32, "Int8": 64}


def _int_range(wrapper: type) -> tuple[int, int]:
    bits = _BITS.get(wrapper.__name__, 64)
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


class NotPrepared(Exception):
    """The query cannot be run compiled once: a parameter does not reach the SQL as itself."""


def _placeholder(kind: type, n: int) -> Any:
    if kind is int:
        return _PLACEHOLDER_INT + n
    if kind is str:
        return f"gamut-prepared-{n}-placeholder"
    if kind is datetime:
        return _PLACEHOLDER_TIME.replace(microsecond=n)
    raise TypeError(f"A prepared parameter is an int, a str or a datetime, not {kind!r}.")


def _adapt(kind: type, value: Any, connection) -> Any:
    """The value as the ORM passes it for a column of this kind (SQLite takes datetimes as text,
    adapted to the current time zone)."""
    if kind is datetime:
        return connection.ops.adapt_datetimefield_value(value)
    return value


@dataclass(frozen=True)
class _Compiled:
    sql: str
    # Per parameter of the SQL: (name, kind, wrapper) of the caller's value (the wrapper the
    # ORM put an integer in, or None), or (None, the constant, None).
    slots: tuple[tuple[str | None, Any, type | None], ...]
    make: Callable[[Any, list], Any]


def _same(placeholder: Any, param: Any) -> bool:
    """Whether a parameter of the compiled SQL is this placeholder (an integer maybe in one of
    psycopg's wrappers; a bool is no integer here)."""
    if isinstance(placeholder, int):
        return isinstance(param, int) and not isinstance(param, bool) and param == placeholder
    return type(param) is type(placeholder) and param == placeholder


class _Query:
    def __init__(self, build: Callable[..., Any], **params: type):
        self._build = build
        self._params = params
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def _compile(self, alias: str, connection) -> _Compiled:
        placeholders = {
            name: _placeholder(kind, n) for n, (name, kind) in enumerate(self._params.items())
        }
        sql, params, make = self._sql(self._build(**placeholders), alias)
        adapted = {
            name: (_adapt(self._params[name], value, connection), self._params[name])
            for name, value in placeholders.items()
        }
        slots = []
        for param in params:
            name = next((n for n, (v, _) in adapted.items() if _same(v, param)), None)
            if name is None:
                slots.append((None, param, None))
            else:
                wrapper = type(param) if isinstance(param, int) else None
                slots.append((name, adapted[name][1], wrapper))
        found = {name for name, _, _ in slots if name}
        for name, value in placeholders.items():
            inlined = str(value) in sql or str(adapted[name][0]) in sql
            if name not in found or inlined:
                raise NotPrepared(f"The parameter {name!r} does not reach the SQL as itself.")
        return _Compiled(sql, tuple(slots), make)

    def _run(self, values: dict[str, Any], using: str):
        if values.keys() != self._params.keys():
            raise TypeError(f"Give exactly {', '.join(self._params)}.")
        for name, kind in self._params.items():
            if kind is int and type(values[name]) is not int:
                raise TypeError(f"{name} must be an int, not {type(values[name]).__name__}.")
        connection = connections[using]
        key = (using, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(using, connection)
        params = []
        for name, held, wrapper in compiled.slots:
            if name is None:
                params.append(held)  # the query's own constant
            elif wrapper is None:
                params.append(_adapt(held, values[name], connection))
            else:
                low, high = _int_range(wrapper)
                if not low <= values[name] <= high:
                    return None  # no row has it
                params.append(values[name] if wrapper is int else wrapper(values[name]))
        return compiled, connection, params

    def _sql(self, built, alias: str):
        raise NotImplementedError


class Prepared(_Query):
    """A read: `build(**params)` returns the QuerySet (of model instances, or values_list,
    named or not), unsliced; `all()` gives its rows, `first()` the first or None."""

    def all(self, *, using: str = "default", **values) -> list:
        ran = self._run(values, using)
        if ran is None:
            return []
        compiled, connection, params = ran
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        return compiled.make(connection, rows)

    def first(self, *, using: str = "default", **values):
        rows = self.all(using=using, **values)
        return rows[0] if rows else None

    def _sql(self, queryset: QuerySet, alias: str):
        if queryset.query.is_sliced:
            raise NotPrepared("A slice is written into the SQL: take the rows' first instead.")
        compiler = queryset.query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        fields = [s[0] for s in compiler.select[: compiler.col_count]]
        converters = [
            (position, convs, expression)
            for position, (convs, expression) in compiler.get_converters(fields).items()
        ]

        def converted(connection, rows: list) -> list:
            if not converters:
                return rows
            out = []
            for row in rows:
                row = list(row)
                for position, convs, expression in converters:
                    value = row[position]
                    for convert in convs:
                        value = convert(value, expression, connection)
                    row[position] = value
                out.append(row)
            return out

        iterable = queryset._iterable_class
        if iterable is ModelIterable:
            return sql, params, self._models(compiler, alias, converted)
        if iterable is NamedValuesListIterable:
            query = queryset.query
            names = queryset._fields or [
                *query.extra_select,
                *query.values_select,
                *query.annotation_select,
            ]
            shape = create_namedtuple_class(*names)
            new = tuple.__new__
            return sql, params, lambda c, rows: [new(shape, r) for r in converted(c, rows)]
        if iterable is ValuesListIterable:
            return sql, params, lambda c, rows: [tuple(r) for r in converted(c, rows)]
        raise NotPrepared(f"{iterable.__name__} is not prepared: use models or values_list.")

    @staticmethod
    def _models(compiler, alias: str, converted) -> Callable[[Any, list], list]:
        """Model instances, made as Django's ModelIterable makes them (from_db, the related
        populators of select_related, the annotations as attributes)."""
        select, klass_info = compiler.select, compiler.klass_info
        annotations = list(compiler.annotation_col_map.items())
        model = klass_info["model"]
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        init_list = [f[0].target.attname for f in select[start:end]]

        related = get_related_populators(klass_info, select, alias)

        def make(connection, rows: list) -> list:
            objects = []
            for row in converted(connection, rows):
                obj = model.from_db(alias, init_list, row[start:end])
                for populator in related:
                    populator.populate(row, obj)
                for name, position in annotations:
                    setattr(obj, name, row[position])
                objects.append(obj)
            return objects

        return make


class PreparedUpdate(_Query):
    """An UPDATE: `build(**params)` returns (QuerySet, {field: value}) as `.update()` takes
    them; `run()` gives the number of rows it changed."""

    def run(self, *, using: str = "default", **values) -> int:
        ran = self._run(values, using)
        if ran is None:
            return 0
        compiled, connection, params = ran
        with (
            transaction.mark_for_rollback_on_error(using=using),
            connection.cursor() as cursor,
        ):
            cursor.execute(compiled.sql, params)
            return cursor.rowcount

    def _sql(self, built: tuple[QuerySet, dict], alias: str):
        queryset, changes = built
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(changes)
        query.clear_select_clause()
        if query.related_updates:
            raise NotPrepared("An update of several tables is not prepared.")
        compiler = query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        if query.related_ids is not None or query.count_active_tables() != 1:
            raise NotPrepared("An update that joins another table is not prepared.")
        return sql, params, None
