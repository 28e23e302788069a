"""core.prepared: a query compiled once answers what the ORM query it stands for answers, with
the caller's values, in one query, on SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.db.models import Count, F, Value
from django.utils import timezone

from core.prepared import NotPrepared, Prepared, PreparedUpdate

pytestmark = pytest.mark.django_db

Membership = User.groups.through


def _members(group: str):
    return (
        Membership.objects.select_related("user", "group")
        .annotate(shout=F("group__name"))
        .filter(group__name=group)
        .order_by("user__username")
    )


MEMBERS = Prepared(_members, group=str)


def test_a_read_gives_the_orms_instances_with_their_related_rows_and_annotations(
    alice, bob, carol, django_assert_num_queries
):
    for name, people in (("annotator", [alice, bob]), ("adjudicator", [carol])):
        expected = list(_members(name))
        with django_assert_num_queries(1):
            got = MEMBERS.all(group=name)
            # select_related: the user and the group came with the row, no query of their own.
            seen = [(m.user.username, m.group.name, m.shout) for m in got]
        assert [m.user.username for m in expected] == [p.username for p in people]
        assert seen == [(m.user.username, m.group.name, m.shout) for m in expected]
        assert [m.pk for m in got] == [m.pk for m in expected]
        assert got[0].user.date_joined == expected[0].user.date_joined  # converted as the ORM
        assert not got[0]._state.adding and got[0]._state.db == "default"
    assert MEMBERS.all(group="nobody") == [] and MEMBERS.first(group="nobody") is None


def test_datetimes_compare_as_the_orms(django_assert_num_queries):
    now = timezone.now()
    for key, expires in (("live-session-1", now + timedelta(minutes=5)), ("old-session-1", now)):
        Session.objects.create(session_key=key, session_data="x", expire_date=expires)
    live = Prepared(
        lambda key, now: Session.objects.filter(session_key=key, expire_date__gt=now),
        key=str,
        now=timezone.datetime,
    )
    with django_assert_num_queries(1):
        assert live.first(key="live-session-1", now=now).expire_date == now + timedelta(minutes=5)
    assert live.first(key="old-session-1", now=now) is None
    assert live.first(key="old-session-1", now=now - timedelta(seconds=1)) is not None


def test_values_lists_named_and_not(alice, bob, carol):
    def counted(named: bool):
        return lambda minimum: (
            Group.objects.annotate(n=Count("user"))
            .filter(n__gte=minimum)
            .order_by("name")
            .values_list("name", "n", named=named)
        )

    for named in (True, False):
        prepared = Prepared(counted(named), minimum=int)
        assert prepared.all(minimum=2) == list(counted(named)(2))
        assert prepared.all(minimum=1) == list(counted(named)(1))
    assert Prepared(counted(True), minimum=int).first(minimum=2).name == "annotator"


def test_an_update_changes_the_rows_it_matches_and_says_how_many(alice, bob):
    rename = PreparedUpdate(
        lambda pk, username, name: (
            User.objects.filter(pk=pk, username=username),
            {"last_name": name, "first_name": F("username")},
        ),
        pk=int,
        username=str,
        name=str,
    )
    assert rename.run(pk=alice.pk, username="alice", name="Liddell") == 1
    assert rename.run(pk=bob.pk, username="alice", name="Dylan") == 0
    alice.refresh_from_db()
    bob.refresh_from_db()
    assert (alice.first_name, alice.last_name) == ("alice", "Liddell")
    assert bob.last_name == ""


def test_an_integer_no_column_can_hold_matches_nothing_without_a_query(
    alice, django_assert_num_queries
):
    """As the ORM answers it (Django 5 raises EmptyResultSet for an out-of-range integer), not
    the driver's overflow error, a 500 for an id in a URL."""
    by_pk = Prepared(lambda pk: User.objects.filter(pk=pk), pk=int)
    touch = PreparedUpdate(lambda pk: (User.objects.filter(pk=pk), {"last_name": "x"}), pk=int)
    with django_assert_num_queries(0):
        assert by_pk.all(pk=2**70) == [] and by_pk.first(pk=-(2**64)) is None
        assert touch.run(pk=2**63) == 0
    assert by_pk.first(pk=alice.pk) == alice
    # A count is an IntegerField, which PostgreSQL's driver is given as an Int4: beyond it, no
    # row (and no query on PostgreSQL), as for the ORM.
    counted = Prepared(
        lambda n: User.objects.annotate(n=Count("groups")).filter(n=n).order_by("pk"), n=int
    )
    assert counted.all(n=2**40) == list(User.objects.annotate(n=Count("groups")).filter(n=2**40))
    assert counted.all(n=2**40) == [] and counted.all(n=1) == [alice]
    with pytest.raises(TypeError):
        by_pk.all(pk=str(alice.pk))
    with pytest.raises(TypeError):
        by_pk.all(pk=True)
    with pytest.raises(TypeError):
        by_pk.all(key=alice.pk)


def test_a_parameter_that_does_not_reach_the_sql_as_itself_is_refused(alice):
    contains = Prepared(lambda name: User.objects.filter(username__contains=name), name=str)
    with pytest.raises(NotPrepared, match="'name'"):
        contains.all(name="ali")
    ignored = Prepared(lambda name: User.objects.filter(username="alice"), name=str)
    with pytest.raises(NotPrepared, match="'name'"):
        ignored.all(name="alice")
    sliced = Prepared(lambda pk: User.objects.filter(pk__gte=pk)[:2], pk=int)
    with pytest.raises(NotPrepared, match="slice"):
        sliced.all(pk=1)
    values = Prepared(lambda pk: User.objects.filter(pk=pk).values("username"), pk=int)
    with pytest.raises(NotPrepared, match="ValuesIterable"):
        values.all(pk=alice.pk)


def test_a_constant_of_the_query_stays_a_constant(alice, bob):
    """Values the query holds itself (here a literal) are kept as they were compiled, beside
    the caller's."""
    tagged = Prepared(
        lambda pk: User.objects.annotate(tag=Value("demo")).filter(pk__gte=pk).order_by("pk"),
        pk=int,
    )
    for pk in (alice.pk, bob.pk):
        expected = list(User.objects.filter(pk__gte=pk).order_by("pk"))
        assert [(u.username, u.tag) for u in tagged.all(pk=pk)] == [
            (u.username, "demo") for u in expected
        ]
