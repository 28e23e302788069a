"""The leaderboard benchmark at a tiny size: the generator leaves exactly what verdict_record
would, and the leaderboard agrees with the bench's plain loop over the verdict rows (every
case the generator makes: missing, failed, pending, dropped, an edited rubric). Also the
leaderboard's array arithmetic against scoring.py, response by response."""

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from judging.leaderboard.board import _response_scores, leaderboard
from judging.models import Judge, Response, ResponseTierCount, Verdict
from judging.tests.conftest import final_checks, make_question
from judging.verdicts.scoring import TIERS, ScoringSettings, Unscorable, response_score
from judging.verdicts.services import verdict_record

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import generate_judging_data  # noqa: E402
import leaderboard_bench  # noqa: E402

pytestmark = pytest.mark.django_db

# Shares large enough that 16 questions x 3 models x 2 settings have each case.
TINY = [
    "--questions",
    "16",
    "--models",
    "3",
    "--checks",
    "6",
    "--judges",
    "2",
    "--missing",
    "0.1",
    "--pending",
    "0.1",
    "--failed",
    "0.03",
    "--edited",
    "0.25",
    "--dropped",
    "0.1",
    "--quiet",
]


def test_generator_then_bench_agree(tmp_path, capsys):
    assert generate_judging_data.main(TINY) == 0
    assert Verdict.objects.filter(verdict="failed").exists()
    out = tmp_path / "figures.json"
    assert leaderboard_bench.main(["--no-cold", "--repeat", "1", "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["agreement"]["mismatches"] == 0
    assert figures["agreement"]["rows_checked"] == 2 * 2 * 3  # judges x settings x models
    assert figures["queries_per_leaderboard"] == 5  # as the page asks: with the audit's pairs
    assert figures["questions"] == 16 - 2  # two dropped
    assert "0 mismatches" in capsys.readouterr().out

    board = leaderboard(judge=Judge.objects.get(name="bench-judge-1"), setting="multimodal")
    assert sum(r.missing for r in board.rows) and sum(r.failed for r in board.rows)
    assert sum(r.pending for r in board.rows)
    # A second run is refused without --reset, and --reset starts again from nothing.
    assert generate_judging_data.main(TINY) == 2
    assert generate_judging_data.main([*TINY, "--reset"]) == 0
    assert Judge.objects.count() == 2


def test_custom_scoring_settings_agree_with_the_loop():
    generate_judging_data.main([*TINY, "--judges", "1"])
    custom = ScoringSettings(lambda_=0.3, mu=-1.5, weights=(0.5, 0.5, 0.0))
    judge = Judge.objects.get()
    boards = {
        (judge.name, s): leaderboard(judge=judge, setting=s, settings=custom)
        for s in ("multimodal", "text_only")
    }
    agreement = leaderboard_bench.compare(boards, leaderboard_bench.loop_scores([judge], custom))
    assert agreement["mismatches"] == 0, agreement["first_mismatches"]
    default = leaderboard(judge=judge, setting="multimodal")
    assert {r.model: r.gamut for r in default.rows} != {
        r.model: r.gamut for r in boards[(judge.name, "multimodal")].rows
    }


def test_generated_rows_are_what_verdict_record_leaves():
    """Replay every generated verdict through verdict_record: the same keys, the same counts."""
    generate_judging_data.main(
        [
            "--questions",
            "5",
            "--models",
            "2",
            "--checks",
            "5",
            "--edited",
            "0.4",
            "--failed",
            "0.05",
            "--pending",
            "0.2",
            "--quiet",
        ]
    )
    columns = (
        "judge_id",
        "response_id",
        "version_id",
        "tier",
        "meets",
        "partially",
        "missing",
        "contradicts",
        "failed",
    )
    counts = sorted(ResponseTierCount.objects.values_list(*columns))
    verdicts = list(Verdict.objects.select_related("judge", "response", "check_row").order_by("id"))
    keys = [(v.response_id, v.check_row_id, v.verdict, v.key) for v in verdicts]
    Verdict.objects.all().delete()
    ResponseTierCount.objects.all().delete()
    for v in verdicts:
        verdict_record(
            judge=v.judge,
            response=v.response,
            check=v.check_row,
            verdict=v.verdict,
            rationale=v.rationale,
            template_version=v.template_version,
            judge_model_version=v.judge_model_version,
        )
    assert sorted(ResponseTierCount.objects.values_list(*columns)) == counts
    assert [
        (v.response_id, v.check_row_id, v.verdict, v.key) for v in Verdict.objects.order_by("id")
    ] == keys


def test_array_scores_are_scoring_py_response_by_response():
    rng = random.Random(11)
    for _ in range(50):
        weights = [rng.choice([0.0, rng.uniform(0.01, 1)]) for _ in TIERS]
        weights[rng.randrange(len(TIERS))] = rng.uniform(0.01, 1)  # not all 0
        settings = ScoringSettings(
            lambda_=rng.uniform(0.01, 0.99), mu=-rng.uniform(0.1, 4), weights=tuple(weights)
        )
        counts = np.zeros((40, len(TIERS), 5), dtype=np.int64)
        for row in counts:
            for t in rng.sample(range(len(TIERS)), rng.randint(1, 3)):
                row[t, :4] = [rng.randint(0, 6) for _ in range(4)]
        tiers, present, gamut = _response_scores(counts, settings)
        for i, row in enumerate(counts):
            given = {
                tier: dict(
                    zip(
                        ("meets", "partially_meets", "missing", "contradicts"),
                        row[t, :4].tolist(),
                        strict=True,
                    )
                )
                for t, tier in enumerate(TIERS)
            }
            try:
                want = response_score(given, settings)
            except Unscorable:
                assert np.isnan(gamut[i])
                continue
            # The same operations in the same order: equal to the bit on Python 3.11.
            assert gamut[i] == pytest.approx(want.gamut, rel=0, abs=1e-15)
            if sys.version_info < (3, 12):
                assert gamut[i] == want.gamut
            assert {tier for t, tier in enumerate(TIERS) if present[i, t]} == set(want.tiers)
            for t, tier in enumerate(TIERS):
                if tier in want.tiers:
                    assert tiers[i, t] == want.tiers[tier]


def test_a_response_with_only_weightless_tiers_is_refused(judge, respond):
    question = make_question("q1", tiers=("answer_critical",))
    response = respond(question)
    for check in final_checks(question):
        verdict_record(judge=judge, response=response, check=check, verdict="meets")
    with pytest.raises(Unscorable):
        leaderboard(judge=judge, setting="multimodal", settings=ScoringSettings(weights=(0, 0, 1)))
    assert Response.objects.count() == 1
