"""The load client's pure parts. Run by hand (bench/ is not in pytest's testpaths):

.venv/bin/python -m pytest -q bench/tests
"""

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from team_load import Draft, normalise, parse_think, percentile, summarise  # noqa: E402


@pytest.mark.parametrize(
    ("path", "endpoint"),
    [
        ("/review/", "/review/"),
        ("/review/123/", "/review/{id}/"),
        ("/review/123/skip/", "/review/{id}/skip/"),
        ("/review/undo/", "/review/undo/"),
        ("/images/bench-00090/photo", "/images/{source_id}/photo"),
        ("/images/", "/images/"),
        ("/rubrics/versions/7/checks/4031/tier/?x=1", "/rubrics/versions/{id}/checks/{id}/tier/"),
        ("/rubrics/versions/7/checks/add/", "/rubrics/versions/{id}/checks/add/"),
    ],
)
def test_normalise_names_an_endpoint_without_its_ids(path, endpoint):
    assert normalise(path) == endpoint


def test_percentile_is_the_nearest_rank_in_milliseconds():
    values = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert percentile(values, 50) == pytest.approx(50)
    assert percentile(values, 95) == pytest.approx(95)
    assert percentile([0.2], 95) == pytest.approx(200)
    assert math.isnan(percentile([], 95))


def test_summarise_reports_count_percentiles_max_and_errors():
    line = summarise([0.010, 0.020, 0.030, 0.040], {"200": 4, "409": 1}, 1)
    assert line["count"] == 4
    assert (line["p50"], line["p95"], line["max"]) == (20.0, 40.0, 40.0)
    assert line["errors"] == 1
    assert line["statuses"] == {"200": 4, "409": 1}


def test_parse_think_reads_a_range_or_zero():
    assert parse_think("2-10") == (2.0, 10.0)
    assert parse_think("0") == (0.0, 0.0)
    with pytest.raises(ValueError):
        parse_think("10-2")


PAGE = """<input type="hidden" name="revision" value="4">
<div class="tier-group tier-answer_critical"><form action="/rubrics/versions/9/checks/11/text/">
<form action="/rubrics/versions/9/checks/12/text/"></div>
<div class="tier-group tier-context"><form action="/rubrics/versions/9/checks/13/text/"></div>
<form method="post" action="/rubrics/versions/9/checks/14/restore/">"""


def test_a_draft_reads_the_page_and_applies_a_fragment():
    draft = Draft(9)
    assert draft.read(PAGE)
    assert draft.revision == 4
    assert draft.tiers == {11: "answer_critical", 12: "answer_critical", 13: "context"}
    assert draft.deleted == [14]
    fragment = (
        '<input type="hidden" name="revision" value="5" hx-swap-oob="outerHTML">'
        '<div hx-swap-oob="beforeend:#checks-valuable"><li id="check-12">'
        '<form action="/rubrics/versions/9/checks/12/text/">'
        '<button name="tier" value="valuable" class="small" disabled>'
    )
    assert draft.apply("retier", 12, 4, fragment) == ""
    assert (draft.revision, draft.tiers[12]) == (5, "valuable")
    # An answer that skips a revision, or carries another check, is not what a browser expects.
    assert draft.apply("retier", 12, 5, fragment) != ""
    assert draft.apply("retier", 11, 4, fragment.replace('value="5"', 'value="6"', 1)) != ""
