"""The 95% interval width of a PPI++-corrected Gamut score at several audit sizes, on generated
data shaped like bench/generate_judging_data.py's (1,813 questions of 35 checks, about half
met), with a judge that agrees with people on a share of the checks and leans lenient on the
rest. Pure: no database; it calls judging/leaderboard/ppi.py, what the leaderboard calls.

    .venv/bin/python bench/ppi_widths.py [--pairs 200 500 1000] [--agree 0.85] [--trials 20]

`--pairs` is the number of audited pairs on ONE board (one model in one setting): an audit of
P pairs spread over the leaderboard's B boards gives each about P / B. For each size it prints
the mean interval width (x100), how often the interval covered people's score, the mean error
of the corrected and of the judge-only score, and the time of one correction (all four scores
of one model: the Gamut score and the three tiers, as the leaderboard computes them).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

from judging.leaderboard.ppi import AuditedQuestion, all_scores, question_counts  # noqa: E402
from judging.verdicts.scoring import DEFAULT_SETTINGS, TIERS, response_score  # noqa: E402

VERDICTS = ("meets", "partially_meets", "missing", "contradicts")


def _tiers(rng: random.Random, n: int) -> list[str]:
    out = ["answer_critical"]
    for _ in range(n - 1):
        x = rng.random()
        out.append("answer_critical" if x < 0.25 else "valuable" if x < 0.7 else "context")
    return out


def _people(rng: random.Random, tiers: list[str], ability: float) -> list[str]:
    out = []
    for tier in tiers:
        p = ability + (0.1 if tier == "answer_critical" else 0)
        if rng.random() < p:
            out.append("meets")
        else:
            x = rng.random()
            out.append("partially_meets" if x < 0.4 else "missing" if x < 0.85 else "contradicts")
    return out


def _judge(rng: random.Random, people: list[str], agree: float) -> list[str]:
    """Agrees with people on `agree` of the checks; otherwise, two times in three, one step
    more lenient (missing -> partially, partially -> meets, contradicts -> missing), else any
    other verdict."""
    lenient = {
        "missing": "partially_meets",
        "partially_meets": "meets",
        "contradicts": "missing",
        "meets": "partially_meets",
    }
    out = []
    for v in people:
        if rng.random() < agree:
            out.append(v)
        elif rng.random() < 2 / 3:
            out.append(lenient[v])
        else:
            out.append(rng.choice([w for w in VERDICTS if w != v]))
    return out


def _score(tiers: list[str], verdicts: list[str]):
    counts: dict[str, dict[str, int]] = {}
    for t, v in zip(tiers, verdicts, strict=True):
        counts.setdefault(t, {}).setdefault(v, 0)
        counts[t][v] += 1
    return response_score(counts, DEFAULT_SETTINGS)


def _gamut(tiers: list[str], verdicts: list[str]) -> float:
    return _score(tiers, verdicts).gamut


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, nargs="+", default=[200, 500, 1000])
    parser.add_argument("--questions", type=int, default=1813)
    parser.add_argument("--checks", type=int, default=35)
    parser.add_argument("--agree", type=float, default=0.85, help="judge-people agreement")
    parser.add_argument("--ability", type=float, default=0.45, help="share of checks met")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    world = []
    for _ in range(args.questions):
        tiers = _tiers(rng, args.checks)
        people = _people(rng, tiers, args.ability)
        world.append((tiers, people, _judge(rng, people, args.agree)))
    truth = 100 * float(np.mean([_gamut(t, p) for t, p, _ in world]))
    judged = [_score(t, j) for t, _, j in world]
    judge_scores = np.array([r.gamut for r in judged])
    tier_scores = {
        tier: np.array([r.tiers[tier] for r in judged if tier in r.tiers]) for tier in TIERS
    }
    pairs = [(q, c) for q, (tiers, _, _) in enumerate(world) for c in range(len(tiers))]
    agreement = np.mean([a == b for _, p, j in world for a, b in zip(p, j, strict=True)])
    print(
        f"{args.questions} questions x {args.checks} checks ({len(pairs)} pairs); "
        f"judge-people agreement {agreement:.3f}; people's Gamut x100 {truth:.2f}, "
        f"the judge's {100 * judge_scores.mean():.2f}"
    )
    print("pairs  width  covered  error(PPI)  error(judge)  ms/correction")
    for n in args.pairs:
        widths, covers, errors, seconds = [], 0, [], []
        for _ in range(args.trials):
            audited: dict[int, set[int]] = {}
            for q, c in rng.sample(pairs, n):
                audited.setdefault(q, set()).add(c)
            sample = [
                AuditedQuestion(
                    judge={c: (world[q][0][c], world[q][2][c]) for c in range(args.checks)},
                    people={c: world[q][1][c] for c in checks},
                )
                for q, checks in sorted(audited.items())
            ]
            start = time.perf_counter()
            counts = question_counts(sample)
            result = all_scores(judge_scores, tier_scores, counts, DEFAULT_SETTINGS)["gamut"]
            seconds.append(time.perf_counter() - start)
            low, high = 100 * result.low, 100 * result.high
            widths.append(high - low)
            covers += low <= truth <= high
            errors.append(100 * result.estimate - truth)
        print(
            f"{n:5d}  {np.mean(widths):5.2f}  {covers / args.trials:7.2f}  "
            f"{np.mean(errors):+10.2f}  {100 * judge_scores.mean() - truth:+12.2f}  "
            f"{1000 * np.median(seconds[1:] or seconds):13.1f}"
        )


if __name__ == "__main__":
    main()
