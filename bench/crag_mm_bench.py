"""A CRAG-MM-shaped import at full size: how long `import_crag_mm` takes and how much memory.

    .venv/bin/python bench/crag_mm_bench.py [--rows 2000] [--shards 4] [--keep DIR]

Writes a dataset in the Hub's layout (DIR/data/validation-0000N-of-0000M.parquet: session_id,
an image struct with JPEG bytes of 800x600 photos, image_url, turns, answers) over CRAG-MM's 13
domain labels, 5% of the rows with only an image_url, an entities file for 80% of the sessions;
then runs the command on a throwaway SQLite database and media folder, once as a dry run and once
for real, and prints the seconds and the peak memory of each (a child process each, so the peak
is the import's own).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABELS = [
    "animal",
    "other",
    "shopping",
    "book",
    "general object recognition",
    "local",
    "vehicle",
    "plants and gardening",
    "style and fashion",
    "food",
    "text understanding",
    "sports and games",
    "math and science",
]


def photo(rng: random.Random) -> bytes:
    from PIL import Image, ImageFilter

    noise = Image.effect_noise((800, 600), rng.uniform(20, 60)).convert("RGB")
    tint = Image.new("RGB", (800, 600), tuple(rng.randrange(256) for _ in range(3)))
    out = io.BytesIO()
    Image.blend(noise, tint, 0.6).filter(ImageFilter.SMOOTH).save(out, format="JPEG", quality=85)
    return out.getvalue()


def write(folder: Path, rows: int, shards: int, seed: int = 11) -> tuple[int, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    turn = pa.struct(
        [
            ("interaction_id", pa.string()),
            ("domain", pa.string()),
            ("query_category", pa.string()),
            ("dynamism", pa.string()),
            ("query", pa.string()),
            ("image_quality", pa.string()),
        ]
    )
    answer = pa.struct([("interaction_id", pa.string()), ("ans_full", pa.string())])
    schema = pa.schema(
        [
            ("session_id", pa.string()),
            ("image", image),
            ("image_url", pa.string()),
            ("turns", pa.list_(turn)),
            ("answers", pa.list_(answer)),
        ]
    )
    (folder / "data").mkdir(parents=True)
    photos = [photo(rng) for _ in range(40)]  # a pool, so writing the data set is quick
    entities = []
    size = 0
    per = -(-rows // shards)
    for shard in range(shards):
        batch = []
        for index in range(shard * per, min(rows, (shard + 1) * per)):
            session = f"crag-{index:05d}"
            url_only = rng.random() < 0.05
            data = None if url_only else photos[index % len(photos)]
            size += len(data or b"")
            batch.append(
                {
                    "session_id": session,
                    "image": None if url_only else {"bytes": data, "path": None},
                    "image_url": f"https://example.org/{session}.jpg" if url_only else None,
                    "turns": [
                        {
                            "interaction_id": f"{session}-0",
                            "domain": rng.choice(LABELS),
                            "query_category": "simple",
                            "dynamism": "static",
                            "query": f"what is this thing number {index}?",
                            "image_quality": "normal",
                        }
                    ],
                    "answers": [
                        {"interaction_id": f"{session}-0", "ans_full": f"It is thing {index}."}
                    ],
                }
            )
            if rng.random() < 0.8:
                entities.append(
                    {
                        "session_id": session,
                        "entity": f"Thing {index}",
                        "popularity": rng.choice(["head", "torso", "tail"]),
                    }
                )
        pq.write_table(
            pa.Table.from_pylist(batch, schema=schema),
            folder / "data" / f"validation-{shard:05d}-of-{shards:05d}.parquet",
        )
    entities_path = folder.parent / "entities.jsonl"
    entities_path.write_text("".join(json.dumps(e) + "\n" for e in entities))
    return size, entities_path


# The import in a child process that reports its own peak resident memory when it exits.
CHILD = """
import atexit, resource, sys
atexit.register(lambda: sys.stderr.write(
    f"\\nPEAK_KB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n"))
sys.argv = ["manage.py", "import_crag_mm", *sys.argv[1:]]
import runpy
runpy.run_path("manage.py", run_name="__main__")
"""


def run(args: list[str], env: dict) -> tuple[float, float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args, "--progress", "never"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        sys.exit(f"import failed ({done.returncode}):\n{done.stderr[-3000:]}")
    peak = next(
        int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK_KB")
    )
    return seconds, peak / 1024, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--keep", type=Path, help="write the data set here and keep it")
    args = parser.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="gamut-crag-bench-"))
    folder = work / "crag-mm-single-turn-public"
    start = time.perf_counter()
    size, entities = write(folder, args.rows, args.shards)
    on_disk = sum(p.stat().st_size for p in (folder / "data").iterdir())
    print(
        f"wrote {args.rows} rows in {args.shards} shards: {on_disk / 1e6:.0f} MB of Parquet, "
        f"{size / 1e6:.0f} MB of image bytes ({time.perf_counter() - start:.1f} s)"
    )
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{work / 'bench.sqlite3'}",
        "MEDIA_ROOT": str(work / "media"),
        "DJANGO_SETTINGS_MODULE": "gamut_site.settings",
    }
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    common = [str(folder), "--entities", str(entities), "--revision", "bench"]
    seconds, peak, _ = run([*common, "--dry-run"], env)
    print(f"dry run:  {seconds:6.1f} s, peak memory {peak:6.0f} MB")
    seconds, peak, out = run(common, env)
    print(
        f"import:   {seconds:6.1f} s, peak memory {peak:6.0f} MB ({args.rows / seconds:.0f} rows/s)"
    )
    print(
        "  "
        + "\n  ".join(
            line
            for line in out.splitlines()
            if line.startswith(("to import", "left out", "only an", "imported"))
        )
    )
    seconds, _, out = run(common, env)
    print(f"again:    {seconds:6.1f} s ({out.strip().splitlines()[-1]})")


if __name__ == "__main__":
    main()
