"""The host's speed right now: the CPU milliseconds of a fixed pure-Python workload (integer
arithmetic, dict and string work), the median and the fastest of --runs runs; lower is faster.
This 2-core virtual machine's speed moves by a third or more from one hour to the next (the same
code has given 119 and 147 requests/s half an hour apart), so the server benchmarks print it
before and after their load (bench/lib.sh, run_measured): compare runs only at similar figures.

    .venv/bin/python bench/host_speed.py [--runs 9]
"""

from __future__ import annotations

import argparse
import statistics
import time


def workload() -> int:
    total = 0
    seen: dict[str, int] = {}
    for i in range(300_000):
        total += i * i % 7
        key = f"k{i % 1000}"
        seen[key] = seen.get(key, 0) + 1
    return total + len(seen)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    times = []
    for _ in range(max(1, args.runs)):
        start = time.process_time()
        workload()
        times.append((time.process_time() - start) * 1000)
    print(f"{statistics.median(times):.0f} ms (fastest {min(times):.0f})")


if __name__ == "__main__":
    main()
