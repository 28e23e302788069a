"""judging/leaderboard/analysis.py: hand-worked examples and independent computations (scipy's
Kendall tau-b, numpy means), then properties (hypothesis). No database."""

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judging.leaderboard.analysis import (
    LABELS,
    VERDICTS,
    JudgeRef,
    ModelRef,
    adjacent_swaps,
    common_models,
    confusion,
    kendall_tau_b,
    largest_differences,
    leniency,
    own_models,
    rank_agreement,
    ranking,
    self_preference,
    setting_gaps,
)

scipy_stats = pytest.importorskip("scipy.stats")


def test_the_module_imports_no_django():
    code = (
        "import sys, judging.leaderboard.analysis; "
        "print(any(m.startswith('django') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- Kendall's tau-b -------------------------------------------------------------------------


def test_tau_b_by_hand():
    # 6 pairs: 5 concordant, 1 discordant, no tie.
    assert kendall_tau_b([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(4 / 6)
    # C=4, D=0, one pair tied in x only, one tied in y only: 4 / sqrt(5 * 5).
    assert kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) == pytest.approx(0.8)
    # A pair tied in both counts nowhere: C=2 (0-2, 1-2), D=0, no one-sided tie.
    assert kendall_tau_b([1, 1, 2], [5, 5, 9]) == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_tau_b_undefined():
    assert kendall_tau_b([], []) is None
    assert kendall_tau_b([1.0], [2.0]) is None
    assert kendall_tau_b([3, 3, 3], [1, 2, 3]) is None  # no order on one side
    with pytest.raises(ValueError, match="x has 2 values and y has 1"):
        kendall_tau_b([1, 2], [1])


def test_tau_b_against_scipy_on_fixed_data():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 15))
        x = rng.integers(0, 5, n).tolist()  # few values: many ties
        y = rng.integers(0, 5, n).tolist()
        expected = scipy_stats.kendalltau(x, y, variant="b").statistic
        got = kendall_tau_b(x, y)
        if math.isnan(expected):
            assert got is None
        else:
            assert got == pytest.approx(expected, abs=1e-12)


scores_lists = st.integers(min_value=2, max_value=12).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(-3, 3), min_size=n, max_size=n),
        st.lists(st.integers(-3, 3), min_size=n, max_size=n),
    )
)


@settings(max_examples=300, deadline=None)
@given(scores_lists)
def test_tau_b_properties(pair):
    x, y = pair
    tau = kendall_tau_b(x, y)
    expected = scipy_stats.kendalltau(x, y, variant="b").statistic
    if tau is None:
        assert math.isnan(expected)
        return
    assert -1 <= tau <= 1
    assert tau == pytest.approx(expected, abs=1e-12)
    assert kendall_tau_b(y, x) == pytest.approx(tau)  # symmetric
    assert kendall_tau_b(x, [-v for v in y]) == pytest.approx(-tau)
    assert kendall_tau_b(x, x) == pytest.approx(1.0)
    assert kendall_tau_b([2 * v + 1 for v in x], x) == pytest.approx(1.0)  # monotone map


# --- rankings and swaps ----------------------------------------------------------------------


def test_ranking_best_first_ties_by_name_none_left_out():
    assert ranking({"b": 10.0, "a": 10.0, "c": 50.0, "d": None}) == ["c", "a", "b"]


def test_adjacent_swaps_by_hand():
    a = {"m1": 90.0, "m2": 80.0, "m3": 70.0, "m4": 60.0}
    b = {"m1": 90.0, "m2": 60.0, "m3": 85.0, "m4": 50.0}
    assert adjacent_swaps(a, b) == [("m2", "m3")]
    assert adjacent_swaps(b, a) == [("m3", "m2")]  # the same pair, in b's order
    # c is two places below a under A, but right above a under B: neighbours in B count too.
    a = {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}
    b = {"c": 4.0, "a": 3.0, "b": 2.0, "d": 1.0}
    assert adjacent_swaps(a, b) == [("a", "c"), ("b", "c")]


def test_adjacent_swaps_need_a_strict_reversal_and_both_scores():
    a = {"x": 10.0, "y": 5.0, "z": 1.0}
    b = {"x": 7.0, "y": 7.0, "z": None}  # a tie is no swap; z is not scored by b
    assert adjacent_swaps(a, b) == []


def test_fully_reversed_ranking_swaps_every_neighbour():
    a = {f"m{i}": float(i) for i in range(6)}
    b = {m: -s for m, s in a.items()}
    assert len(adjacent_swaps(a, b)) == 5


distinct_scores = st.integers(min_value=2, max_value=9).flatmap(
    lambda n: st.tuples(st.permutations(range(n)), st.permutations(range(n)))
)


@settings(max_examples=300, deadline=None)
@given(distinct_scores)
def test_no_swap_exactly_when_the_orders_agree(pair):
    xs, ys = pair
    models = [f"m{i}" for i in range(len(xs))]
    a = {m: float(v) for m, v in zip(models, xs, strict=True)}
    b = {m: float(v) for m, v in zip(models, ys, strict=True)}
    swaps = adjacent_swaps(a, b)
    assert {frozenset(p) for p in swaps} == {frozenset(p) for p in adjacent_swaps(b, a)}
    for high, low in swaps:
        assert a[high] > a[low] and b[high] < b[low]
    tau = kendall_tau_b(xs, ys)
    assert (swaps == []) == (tau == pytest.approx(1.0))


def test_rank_agreement_uses_the_models_both_judges_scored():
    scores = {
        "j1": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 9.0},
        "j2": {"a": 1.0, "b": 2.0, "c": 3.0, "d": None},
        "j3": {"a": 3.0, "b": 2.0, "c": 1.0},
    }
    pairs = {(p.judge_a, p.judge_b): p for p in rank_agreement(scores)}
    assert list(pairs) == [("j1", "j2"), ("j1", "j3"), ("j2", "j3")]
    assert pairs[("j1", "j2")].models == 3 and pairs[("j1", "j2")].tau == pytest.approx(-1)
    assert pairs[("j1", "j3")].tau == pytest.approx(1) and pairs[("j1", "j3")].swaps == []
    assert pairs[("j1", "j2")].swaps == [("a", "b"), ("b", "c")]


# --- settings --------------------------------------------------------------------------------


def test_setting_gaps_cost_is_text_only_minus_multimodal():
    rows = setting_gaps({"a": 20.0, "b": 50.0, "c": 10.0}, {"a": 60.0, "b": 45.0, "d": 5.0})
    assert [(r.model, r.cost) for r in rows] == [("a", 40.0), ("b", -5.0), ("c", None), ("d", None)]
    assert rows[2].multimodal == 10.0 and rows[2].text_only is None


# --- judges ----------------------------------------------------------------------------------

SCORES = {
    "gemini-judge": {"gemini": 60.0, "gpt": 40.0, "claude": 50.0},
    "gpt-judge": {"gemini": 50.0, "gpt": 44.0, "claude": 38.0, "llama": 10.0},
    "claude-judge": {"gemini": 46.0, "gpt": 30.0, "claude": 47.0},
}


def test_largest_differences_by_hand():
    rows = {r.model: r for r in largest_differences(SCORES)}
    assert rows["gemini"].difference == pytest.approx(14.0)
    assert (rows["gemini"].high, rows["gemini"].low) == ("gemini-judge", "claude-judge")
    assert rows["llama"].difference is None  # a single judge scored it
    # gemini and gpt both spread 14 (ties by name), claude 12, llama last.
    assert [r.model for r in largest_differences(SCORES)] == ["gemini", "gpt", "claude", "llama"]


def test_leniency_by_hand_and_against_numpy():
    assert common_models(SCORES) == ["claude", "gemini", "gpt"]
    rows = {r.judge: r for r in leniency(SCORES)}
    # gemini-judge: mean 50 over the common three; the others: (50+44+38+46+30+47)/6 = 42.5.
    assert rows["gemini-judge"].mean == pytest.approx(50.0)
    assert rows["gemini-judge"].others == pytest.approx(42.5)
    assert rows["gemini-judge"].leniency == pytest.approx(7.5)
    assert rows["gpt-judge"].models == 3  # llama, scored by one judge only, is left out
    matrix = np.array([[SCORES[j][m] for m in ("claude", "gemini", "gpt")] for j in SCORES])
    for i, judge in enumerate(SCORES):
        others = np.delete(matrix, i, axis=0)
        assert rows[judge].leniency == pytest.approx(matrix[i].mean() - others.mean())


def test_leniency_without_common_models():
    rows = leniency({"a": {"x": 1.0}, "b": {"y": 2.0}})
    assert all(r.leniency is None and r.models == 0 for r in rows)


judge_scores = st.integers(min_value=2, max_value=5).flatmap(
    lambda k: st.lists(
        st.lists(st.floats(-100, 100), min_size=3, max_size=3), min_size=k, max_size=k
    )
)


@settings(max_examples=200, deadline=None)
@given(judge_scores)
def test_leniencies_sum_to_zero(matrix):
    scores = {f"j{i}": dict(zip("abc", row, strict=True)) for i, row in enumerate(matrix)}
    total = sum(r.leniency for r in leniency(scores))
    assert total == pytest.approx(0.0, abs=1e-9)


def test_own_models_rules_in_order():
    judges = [
        JudgeRef("gemini-judge", 1, "gemini-2.5-pro"),
        JudgeRef("GPT-4o_judge", None, ""),
        JudgeRef("sonnet", 7, "claude-sonnet-4"),
        JudgeRef("llama judge", None, "other"),
        JudgeRef("judge", None, ""),
    ]
    models = [
        ModelRef("gemini-pro", 1, ""),  # rule 1: the same LLM model
        ModelRef("gpt-4o", None, ""),  # rule 3: the name less "_judge"
        ModelRef("claude", 3, "Claude-Sonnet-4"),  # rule 2: the provider model name
        ModelRef("Gemini Judge", None, ""),
    ]
    assert own_models(judges, models) == {
        "gemini-judge": ["gemini-pro"],  # rule 1 wins over the name rule ("Gemini Judge")
        "GPT-4o_judge": ["gpt-4o"],
        "sonnet": ["claude"],
        "llama judge": [],
        "judge": [],
    }


def test_self_preference_by_hand():
    own = {"gemini-judge": ["gemini"], "gpt-judge": ["gpt"], "claude-judge": []}
    leniencies = leniency(SCORES)
    rows = {r.judge: r for r in self_preference(SCORES, own, leniencies)}
    assert set(rows) == {"gemini-judge", "gpt-judge"}
    g = rows["gemini-judge"]
    assert (g.own, g.others, g.gap, g.judges) == (60.0, 48.0, 12.0, 2)
    assert g.net == pytest.approx(12.0 - 7.5)
    assert rows["gpt-judge"].gap == pytest.approx(44.0 - 35.0)
    lonely = self_preference({"j": {"m": 5.0}}, {"j": ["m"]})
    assert lonely[0].others is None and lonely[0].gap is None and lonely[0].judges == 0


# --- confusion -------------------------------------------------------------------------------


def test_confusion_by_hand():
    matrix = confusion(
        [
            ("meets", "meets", 6),
            ("meets", "missing", 2),
            ("missing", "missing", 2),
            ("failed", "meets", 1),
        ]
    )
    assert matrix.counts["meets"]["missing"] == 2 and matrix.counts["failed"]["meets"] == 1
    assert (matrix.total, matrix.graded) == (11, 10)
    assert matrix.agreement == pytest.approx(0.8)
    # observed 0.8; A: meets 8, missing 2; B: meets 6, missing 4; expected (48 + 8) / 100.
    assert matrix.kappa == pytest.approx((0.8 - 0.56) / (1 - 0.56))
    body = matrix.as_dict()
    assert body["labels"] == list(LABELS) and body["counts"][0][:3] == [6, 0, 2]


def test_confusion_undefined_and_refused():
    assert confusion([]).agreement is None and confusion([]).kappa is None
    assert confusion([("meets", "meets", 3)]).kappa is None  # one verdict throughout
    with pytest.raises(ValueError, match="unknown verdict pair"):
        confusion([("meets", "great", 1)])


verdict_pairs = st.lists(
    st.tuples(st.sampled_from(LABELS), st.sampled_from(LABELS), st.integers(1, 5)), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(verdict_pairs)
def test_confusion_properties(pairs):
    matrix = confusion(pairs)
    swapped = confusion([(b, a, n) for a, b, n in pairs])
    assert matrix.total == sum(n for *_, n in pairs)
    for a, b in itertools.product(LABELS, LABELS):
        assert matrix.counts[a][b] == swapped.counts[b][a]
    if matrix.kappa is not None:
        assert -1 <= matrix.kappa <= 1
        assert swapped.kappa == pytest.approx(matrix.kappa)
    if matrix.agreement is not None:
        assert 0 <= matrix.agreement <= 1
    graded = sum(n for a, b, n in pairs if a in VERDICTS and b in VERDICTS)
    assert matrix.graded == graded
