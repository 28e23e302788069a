"""export_benchmark OUT_DIR: the benchmark as it stands, as files that hash the same each time."""

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter
from tqdm import tqdm

from rubrics.exporting import ExportError, collect, export, export_to_folder
from rubrics.hf_export import export_hf


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, but the description keeps its line breaks."""


class Command(BaseCommand):
    help = """Export the benchmark as it stands into OUT_DIR.

Writes:
  gamut.jsonl    one line per question in the benchmark (a final question that
                 is not dropped and whose rubric has a frozen version), sorted
                 by source id: id, image, entity, domain, popularity, question,
                 meta_rubric and checks (of the rubric's final version, with
                 their snippets), rubric_stage
  images/        the photos, named as gamut.jsonl names them
  manifest.json  counts (questions, checks, checks per tier, questions per
                 rubric stage, questions left out), each file's SHA-256 and the
                 content hash (LC_ALL=C sha256sum gamut.jsonl images/* | sha256sum)

With --layout huggingface: a Hugging Face dataset folder instead, data/test-*.parquet
(one row per question with its photo's bytes), a README.md dataset card (features,
licence, content hash), gamut_inspect/ (an inspect_ai task: `inspect eval
gamut_inspect/task.py`) and manifest.json.

With --release NAME: exactly that release (manage.py release list), its questions
on the rubric versions it froze, with its scoring settings; the manifest and the
dataset card name the release and its hash.

Two exports of the same state (or of the same release) are byte-identical.
OUT_DIR must be new or empty unless --force. The export is written beside
OUT_DIR first and renamed into place at the end, so a failed export leaves
OUT_DIR as it was. Exit status 2 when the export cannot be made (or no release
has that name)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument(
            "out_dir", type=Path, metavar="OUT_DIR", help="the folder to write (new or empty)"
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace OUT_DIR and everything in it when it is not empty",
        )
        parser.add_argument(
            "--layout",
            choices=["gamut", "huggingface"],
            default="gamut",
            help="gamut (default: gamut.jsonl, images/, manifest.json) or huggingface (a "
            "dataset folder: data/test-00000-of-00001.parquet with the photos inside, a "
            "README.md dataset card, gamut_inspect/ (an inspect_ai task) and manifest.json)",
        )
        parser.add_argument(
            "--release",
            metavar="NAME",
            help="export this release (manage.py release list) rather than the current state",
        )
        parser.add_argument(
            "--progress",
            choices=["auto", "always", "never"],
            default="auto",
            help="progress bar on stderr (auto: when stderr is a terminal)",
        )

    def handle(
        self,
        *args,
        out_dir: Path,
        force: bool,
        layout: str,
        progress: str,
        release: str | None = None,
        **options,
    ):
        show = {"auto": sys.stderr.isatty(), "always": True, "never": False}[progress]
        writer = export_hf if layout == "huggingface" else export
        if release is not None:
            from judging.releases.selectors import release_named

            found = release_named(release)
            if found is None:
                raise CommandError(
                    f"No release named {release}; manage.py release list shows them.",
                    returncode=2,
                )
            writer = partial(writer, contents=collect(found))
        try:
            manifest = export_to_folder(
                out_dir,
                force=force,
                progress=lambda items: tqdm(
                    items, desc="copying images", unit=" images", disable=not show, file=sys.stderr
                ),
                writer=writer,
            )
        except ExportError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        counts = manifest.counts
        tiers = ", ".join(f"{n} {tier}" for tier, n in counts["checks_per_tier"].items())
        stages = ", ".join(
            f"{n} {stage}" for stage, n in counts["questions_per_rubric_stage"].items() if n
        )
        left_out = counts["left_out"]
        self.stdout.write(f"questions by rubric stage: {stages or 'none'}")
        self.stdout.write(f"checks: {tiers}")
        self.stdout.write(
            f"left out: {left_out['dropped']} dropped question(s), "
            f"{left_out['without_rubric']} without a finished rubric"
        )
        if "release" in manifest.data:
            named = manifest.data["release"]
            self.stdout.write(f"release {named['name']}, release hash {named['content_hash']}")
        self.stdout.write(
            self.style.SUCCESS(
                f"exported {counts['questions']} question(s) and {counts['checks']} check(s) to "
                f"{out_dir}; content hash {manifest.content_hash}"
            )
        )
