"""Question diversity on generated questions: how long the analysis takes at full size and
whether it finds the templates the questions were written from.

    .venv/bin/python bench/diversity_bench.py [--questions 1800] [--templates 20 8 3]

For each number of templates it writes that many questions (tests/question_sets.py: 10 domains,
entities and domain words filled in, template sizes skewed as generated questions are), runs
`annotation.analysis.diversity.analyse` and prints the figures the /diversity/ page shows, the
adjusted Rand index against the known templates (1 = found exactly) and the time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from annotation.analysis.diversity import adjusted_rand, analyse  # noqa: E402
from tests.question_sets import generated_questions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1800)
    parser.add_argument("--templates", type=int, nargs="+", default=[20, 8, 3])
    args = parser.parse_args()
    analyse(generated_questions(50, templates=3)[0])  # imports scikit-learn outside the timing
    print(
        f"{'written from':>12} {'found':>6} {'ARI':>6} {'top5':>6} {'top20':>6} "
        f"{'trigrams':>9} {'entropy':>8} {'norm.':>6} {'seconds':>8}"
    )
    for templates in args.templates:
        questions, truth = generated_questions(args.questions, templates=templates)
        start = time.perf_counter()
        report = analyse(questions)
        seconds = time.perf_counter() - start
        o = report.overall
        print(
            f"{templates:>12} {o.templates:>6} {adjusted_rand(truth, report.labels):>6.3f} "
            f"{o.top5_share:>6.1%} {o.top20_share:>6.1%} {o.opening_trigrams:>9} "
            f"{o.entropy_bits:>8.2f} {o.normalized_entropy:>6.2f} {seconds:>8.2f}"
        )


if __name__ == "__main__":
    main()
