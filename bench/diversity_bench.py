"""Question diversity at full size: how long the analysis takes, how much memory it needs and
whether it finds the templates the questions were written from.

    .venv/bin/python bench/diversity_bench.py                      # the full-size sets
    .venv/bin/python bench/diversity_bench.py --sets final --app /path/to/other/checkout
    .venv/bin/python bench/diversity_bench.py --sets collapsing    # the earlier bench's sets

Each set runs in a process of its own (so that its peak memory is its own):
`annotation.analysis.diversity.analyse` on it, timed, with the peak resident memory of the
process (`resource.getrusage`, before and after the analysis), the templates found and the
adjusted Rand index against the shapes the questions were written from (1 = found exactly).

- `final`: 1,800 final questions from `tests.question_sets.varied_questions` (60 question
  shapes over 300 entities, about 120 verbs and 110 attributes: 1,744 distinct skeletons).
- `candidates`: 6,000 candidates, another draw of the same generator, plus `--junk` (50)
  texts of 2,000 characters of random words, as a careless import leaves (no template known:
  the ARI is over the 6,000).
- `random`: 2,000 questions of 8 to 20 random words each (every one its own template).
- `collapsing`: 1,800 questions from 20 fixed templates (`generated_questions`), 44 distinct
  skeletons: what this bench measured before.

`--app PATH` runs the analysis of another checkout (with the question sets of this one), to
compare a commit before and after.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SETS = ("final", "candidates", "random", "collapsing")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def _junk(rng: random.Random, count: int, chars: int = 2000) -> list[tuple[str, str]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    texts = []
    for _ in range(count):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append("".join(rng.choice(letters) for _ in range(rng.randint(2, 12))))
        texts.append(" ".join(words)[:chars])
    return [(text, "Junk") for text in texts]


def _random_words(rng: random.Random, count: int) -> list[tuple[str, str]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(count):
        words = [
            "".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
            for _ in range(rng.randint(8, 20))
        ]
        out.append((" ".join(words).capitalize() + "?", words[0].title()))
    return out


def run_one(name: str, app: Path, junk: int) -> dict:
    """In the child process: build the set, import the analysis of `app`, measure."""
    sys.path.insert(0, str(app))
    diversity = importlib.import_module("annotation.analysis.diversity")
    # The question sets of this checkout, loaded by file so that `app`'s analysis stays the one
    # imported (the sets build their questions with it).
    spec = importlib.util.spec_from_file_location("question_sets", REPO / "tests/question_sets.py")
    sets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sets)
    rng = random.Random(5)
    truth: list[int] | None
    if name == "final":
        questions, truth = sets.varied_questions(1800, seed=11)
    elif name == "candidates":
        questions, truth = sets.varied_questions(6000, seed=12)
        questions += [
            diversity.Question(key=f"junk-{i}", text=text, entity=entity, domain="objects")
            for i, (text, entity) in enumerate(_junk(rng, junk))
        ]
    elif name == "random":
        questions = [
            diversity.Question(key=f"rnd-{i}", text=text, entity=entity, domain="objects")
            for i, (text, entity) in enumerate(_random_words(rng, 2000))
        ]
        truth = list(range(len(questions)))
    elif name == "collapsing":
        questions, truth = sets.generated_questions(1800, templates=20)
    else:
        raise SystemExit(f"unknown set {name}")
    diversity.analyse(questions[:50])  # imports scikit-learn and scipy outside the timing
    before = _peak_mb()
    start = time.perf_counter()
    cpu = time.process_time()
    report = diversity.analyse(questions)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    labels = report.labels[: len(truth)]
    return {
        "set": name,
        "questions": len(questions),
        "distinct_texts": len({q.text for q in questions}),
        "templates_known": len(set(truth)),
        "templates_found": report.overall.templates,
        "ari": diversity.adjusted_rand(truth, labels),
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_mb_before": before,
        "peak_mb": _peak_mb(),
        "app": str(app),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=["final", "candidates"])
    parser.add_argument("--app", type=Path, default=REPO, help="the checkout whose analysis runs")
    parser.add_argument("--junk", type=int, default=50, help="2,000-character junk candidates")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a set may take")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.app.resolve(), args.junk)))
        return
    print(os.popen("uptime").read().strip())
    print(
        f"{'set':<11} {'questions':>9} {'known':>6} {'found':>6} {'ARI':>6} {'seconds':>8} "
        f"{'CPU s':>7} {'peak MB':>8} {'(before)':>9}"
    )
    for name in args.sets:
        command = [sys.executable, __file__, "--one", name, "--app", str(args.app)]
        command += ["--junk", str(args.junk)]
        try:
            done = subprocess.run(
                command, capture_output=True, text=True, timeout=args.timeout, check=False
            )
        except subprocess.TimeoutExpired:
            print(f"{name:<11} did not finish within {args.timeout:g} s")
            continue
        if done.returncode != 0:
            print(f"{name:<11} failed (exit {done.returncode}): {done.stderr.strip()[-300:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{r['set']:<11} {r['questions']:>9} {r['templates_known']:>6} "
            f"{r['templates_found']:>6} {r['ari']:>6.3f} {r['seconds']:>8.2f} "
            f"{r['cpu_seconds']:>7.2f} {r['peak_mb']:>8.0f} {r['peak_mb_before']:>9.0f}"
        )


if __name__ == "__main__":
    main()
