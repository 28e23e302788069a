"""Benchmark of the meta-rubric compiler: 2,000 generated meta-rubrics of about 35 checks each.

    .venv/bin/python bench/compile_rubrics.py [--rubrics 2000] [--repeat 3] [--seed 1]

The documents are generated first (deterministically from --seed) as decoded JSON, as the import
command and the LLM jobs hand them over; that time is not measured. Each run then validates and
compiles every document, timing the two phases apart. Prints the figures of every run and the
best; the target (validate + compile of all of them under 1 s) is reported, not enforced.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # run as a script: the repository's packages come first

from rubrics.compiler import TIERS, compile_rubric, validate  # noqa: E402

TARGET_S = 1.0
WORDS = (
    "braised",
    "beef",
    "red",
    "wine",
    "onion",
    "carrot",
    "garlic",
    "thyme",
    "bay",
    "leaf",
    "bacon",
    "mushroom",
    "stock",
    "shallot",
    "cognac",
    "butter",
    "flour",
    "parsley",
    "pepper",
    "salt",
    "pot",
    "oven",
    "hours",
    "lardons",
    "pearl",
    "Burgundy",
    "Dijon",
    "Charolais",
    "Pinot",
    "noir",
    "casserole",
    "simmer",
    "brown",
    "marinate",
)


def phrase(rng: random.Random, words: int = 4) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def members(rng: random.Random, prefix: str, count: int) -> list[str]:
    # A numbered suffix keeps members distinct however the words fall.
    return [f"{phrase(rng, 2)} {prefix}{k}" for k in range(1, count + 1)]


def insights(rng: random.Random, next_id: list[int], snippets: list[str]) -> list[dict[str, Any]]:
    made = []
    for _ in range(rng.choice((0, 0, 1))):
        next_id[0] += 1
        made.append(
            {
                "id": f"M{next_id[0]}",
                "statement": phrase(rng, 8),
                "tier": rng.choice(TIERS),
                "snippets": rng.sample(snippets, rng.randint(0, 1)),
            }
        )
    return made


def generate(rng: random.Random) -> dict[str, Any]:
    """One meta-rubric of every item type; about 35 checks on average."""
    snippets = [f"s{k}" for k in range(1, 7)]
    next_id = [0]
    items: list[dict[str, Any]] = []

    def add(kind: str, tier: str, **fields: Any) -> None:
        items.append(
            {
                "id": f"I{len(items) + 1}",
                "type": kind,
                "tier": tier,
                "snippets": rng.sample(snippets, rng.randint(0, 2)),
                **fields,
            }
        )

    for _ in range(rng.randint(3, 5)):
        add("fact", rng.choice(TIERS), statement=phrase(rng, 10))
    add(
        "strict_list",
        "answer_critical",
        topic=phrase(rng, 3),
        items=members(rng, "i", rng.randint(4, 7)),
        meta_insights=insights(rng, next_id, snippets),
    )
    short = rng.randint(5, 7)
    add(
        "flexible_list",
        rng.choice(("answer_critical", "valuable")),
        topic=phrase(rng, 3),
        options=members(rng, "o", short),
        baseline=rng.choice(([2], [2, 3])),
        meta_insights=insights(rng, next_id, snippets),
    )
    long = rng.randint(9, 16)
    extra = {"extra_thresholds": [5, long]} if rng.random() < 0.3 else {}
    add(
        "flexible_list",
        rng.choice(TIERS),
        topic=phrase(rng, 3),
        options=members(rng, "p", long),
        baseline=rng.choice(([2], [2, 4])),
        meta_insights=insights(rng, next_id, snippets),
        **extra,
    )
    steps = [
        {"text": phrase(rng, 6) + f" (step {k})", "required": rng.random() < 0.7}
        for k in range(1, rng.randint(5, 7) + 1)
    ]
    add(
        "process",
        rng.choice(("answer_critical", "valuable")),
        topic=phrase(rng, 3),
        steps=steps,
        meta_insights=insights(rng, next_id, snippets),
    )
    add(
        "relationship",
        rng.choice(("valuable", "context")),
        entity=phrase(rng, 2),
        relation=phrase(rng, 6),
        aspects=members(rng, "a", rng.randint(3, 4)),
    )
    return {
        "schema_version": 1,
        "question": "What is this and how is it made?",
        "entity": phrase(rng, 2),
        "snippets": [
            {
                "id": sid,
                "url": f"https://example.org/{sid}",
                "title": phrase(rng, 3),
                "text": phrase(rng, 12),
            }
            for sid in snippets
        ],
        "items": items,
    }


def run_once(documents: list[dict[str, Any]]) -> tuple[float, float, int]:
    gc.collect()  # start each run from the same heap, not with the last run's garbage
    start = time.perf_counter()
    metas = [validate(document) for document in documents]
    validated = time.perf_counter()
    checks = sum(len(compile_rubric(meta)) for meta in metas)
    compiled = time.perf_counter()
    return validated - start, compiled - validated, checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rubrics", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    rng = random.Random(args.seed)
    documents = [generate(rng) for _ in range(args.rubrics)]
    print(
        f"{args.rubrics} meta-rubrics generated (seed {args.seed}), "
        f"{sum(len(d['items']) for d in documents)} items"
    )
    totals = []
    for run in range(1, args.repeat + 1):
        validate_s, compile_s, checks = run_once(documents)
        total = validate_s + compile_s
        totals.append(total)
        print(
            f"run {run}: {checks} checks ({checks / args.rubrics:.1f} a rubric); "
            f"validate {validate_s:.3f} s + compile {compile_s:.3f} s = {total:.3f} s "
            f"({total / args.rubrics * 1e6:.0f} us a rubric, {checks / total:,.0f} checks/s)"
        )
    best = min(totals)
    verdict = "met" if best < TARGET_S else "MISSED"
    print(
        f"best {best:.3f} s, median {statistics.median(totals):.3f} s for {args.rubrics} "
        f"rubrics; target < {TARGET_S:.0f} s: {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
