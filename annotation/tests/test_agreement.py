import pytest

from annotation.analysis.agreement import cohen_kappa


def test_perfect_agreement_is_one():
    assert cohen_kappa([("accept", "accept"), ("discard", "discard"), ("revise", "revise")]) == 1


def test_known_value():
    # 10 pairs: observed 0.7; rater 1: 5 accept, 5 discard; rater 2: 6 accept, 4 discard.
    pairs = (
        [("accept", "accept")] * 4
        + [("accept", "discard")] * 1
        + [("discard", "accept")] * 2
        + [("discard", "discard")] * 3
    )
    expected_chance = (5 * 6 + 5 * 4) / 100
    assert cohen_kappa(pairs) == pytest.approx((0.7 - expected_chance) / (1 - expected_chance))


def test_systematic_disagreement_is_negative():
    assert cohen_kappa([("accept", "discard"), ("discard", "accept")]) == pytest.approx(-1)


def test_undefined_cases():
    assert cohen_kappa([]) is None
    assert cohen_kappa([("accept", "accept")] * 3) is None  # chance agreement is 1
