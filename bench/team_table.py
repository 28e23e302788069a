"""The figures of team_load.py runs side by side, as a Markdown table (p50 / p95 ms per endpoint).

    .venv/bin/python bench/team_table.py before=bench/out/A.json after=bench/out/B.json

Each argument is LABEL=PATH (a summary JSON that team_load.py wrote); the columns keep their
order. Endpoints measured only in a run's warm-up are marked "(w)".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def cell(run: dict, key: str) -> str:
    line = run["endpoints"].get(key)
    mark = ""
    if not line or not line["count"]:
        line, mark = run.get("warmup_only_endpoints", {}).get(key), " (w)"
    if not line or not line["count"]:
        return "-"
    return f"{line['p50']:.0f} / {line['p95']:.0f}{mark}"


def table(runs: list[tuple[str, dict]]) -> str:
    keys = sorted(
        {k for _, r in runs for k in [*r["endpoints"], *r.get("warmup_only_endpoints", {})]},
        key=lambda k: (k.split()[1], k),
    )
    out = [
        "| endpoint (p50 / p95 ms) | " + " | ".join(label for label, _ in runs) + " |",
        "| --- |" + " --- |" * len(runs),
    ]
    for key in keys:
        if "/login/" in key:
            continue
        out.append(f"| `{key}` | " + " | ".join(cell(r, key) for _, r in runs) + " |")
    out.append(
        "| requests/s (a worker) | "
        + " | ".join(
            f"{r['requests_per_second']} ({r.get('requests_per_second_per_worker') or '-'})"
            for _, r in runs
        )
        + " |"
    )
    out.append(
        "| requests, errors, violations | "
        + " | ".join(f"{r['requests']}, {r['errors']}, {r.get('violations', '-')}" for _, r in runs)
        + " |"
    )
    return "\n".join(out)


def main(argv: list[str]) -> int:
    if not argv or any("=" not in a for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    runs = []
    for arg in argv:
        label, _, path = arg.partition("=")
        runs.append((label, json.loads(Path(path).read_text())))
    print(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
