"""Time publishing a release's leaderboard at full size (judging/publish/site.py).

Against the database DATABASE_URL selects, filled by generate_judging_data.py (1,813 questions,
14 models, both settings, 35 checks): cuts a release (unless one of that name exists), gives the
bench's images a licence first so that their photos are published too, then times
`publish_folder` into a fresh folder under bench/out/, and with --twice publishes again and
compares every byte. Prints the figures and the load average, and writes them to
bench/out/publish-<time>.json.

    DATABASE_URL=sqlite:////abs/bench/out/x.sqlite3 MEDIA_ROOT=... .venv/bin/python \
        bench/publish_bench.py [--release bench] [--licence cc-by-nc-4.0] [--twice] [--zip]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gamut_site.settings")

import django  # noqa: E402

django.setup()

from annotation.models import ImportBatch  # noqa: E402
from judging.publish.site import publish_folder, zip_stream  # noqa: E402
from judging.releases.selectors import release_named  # noqa: E402
from judging.releases.services import create_release  # noqa: E402

SOURCE_PREFIX = "bench-judging-"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def digest(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", default="bench")
    parser.add_argument(
        "--licence",
        default="cc-by-nc-4.0",
        help="given to the bench's import batches before the release is cut ('' for none: "
        "no photo is published)",
    )
    parser.add_argument("--twice", action="store_true", help="publish again, compare bytes")
    parser.add_argument("--zip", action="store_true", help="also time the zip download")
    args = parser.parse_args(argv)

    figures: dict = {"load_before": load()}
    release = release_named(args.release)
    if release is None:
        ImportBatch.objects.filter(images__source_id__startswith=SOURCE_PREFIX).update(
            license=args.licence
        )
        started = time.perf_counter()
        release = create_release(args.release, "benchmark release")
        figures["cut_seconds"] = round(time.perf_counter() - started, 2)
        print(f"cut release {release.name} in {figures['cut_seconds']} s")
    runs = 2 if args.twice else 1
    folders = []
    for run in range(runs):
        folder = OUT / f"published-{run}"
        shutil.rmtree(folder, ignore_errors=True)
        started = time.perf_counter()
        published = publish_folder(release, folder, progress=lambda m: print(m, flush=True))
        seconds = time.perf_counter() - started
        folders.append(folder)
        figures[f"publish_seconds_{run}"] = round(seconds, 1)
        figures.update(
            questions=published.questions,
            photos=published.photos,
            files=published.files,
            megabytes=round(published.bytes / 1e6, 1),
        )
        print(
            f"published {published.questions} questions, {published.files} files, "
            f"{published.bytes / 1e6:.1f} MB in {seconds:.1f} s (load {load()})",
            flush=True,
        )
    if args.twice:
        same = digest(folders[0]) == digest(folders[1])
        figures["byte_identical"] = same
        print(f"byte-identical: {same}")
    if args.zip:
        started = time.perf_counter()
        size = sum(len(chunk) for chunk in zip_stream(release))
        figures["zip_seconds"] = round(time.perf_counter() - started, 1)
        figures["zip_megabytes"] = round(size / 1e6, 1)
        print(f"zip: {size / 1e6:.1f} MB in {figures['zip_seconds']} s")
    figures["load_after"] = load()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"publish-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(figures, indent=1) + "\n")
    print(f"figures in {path}")
    return 0 if figures.get("byte_identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
