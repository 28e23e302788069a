import shutil
import sys
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from annotation.images.crag_mm import (
    SPLITS,
    crag_mm_import,
    crag_mm_plan,
    describe,
    domain_mapping,
    domain_mapping_problems,
    read_entities,
)
from annotation.images.importing import ImportProblems
from annotation.models import ImportBatch


class Command(BaseCommand):
    help = (
        "Import images from a local copy of CRAG-MM as the Hugging Face Hub lays it out "
        "(DIR/data/<split>-*.parquet). Every row is checked before anything is written; a bad "
        "row or a missing column fails the whole import with exit status 2. Domains go through "
        "the admin's mapping table (CRAG-MM label -> benchmark domain; /admin/ -> Domain "
        "mappings), rows of labels it leaves out are skipped and counted. --entities gives "
        "the ground-truth entity (and popularity: head, torso, tail) per session id; rows "
        "without one are imported with the entity unconfirmed. Rows with only an image_url "
        "are reported, never fetched. Sessions imported before are skipped."
    )

    def add_arguments(self, parser):
        parser.add_argument("directory", type=Path, help="the dataset folder (holds data/)")
        parser.add_argument("--split", choices=SPLITS, default="validation")
        parser.add_argument(
            "--entities",
            type=Path,
            help="JSONL or CSV: session_id, entity, popularity (head|torso|tail), egocentric",
        )
        parser.add_argument(
            "--revision",
            default="",
            help="the dataset revision (read from "
            "a Hub cache or --local-dir download when left out)",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="check everything and say what would be imported; write nothing",
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
        directory: Path,
        split: str,
        entities: Path | None,
        revision: str,
        dry_run: bool,
        progress: str,
        **options,
    ):
        if not directory.is_dir():
            raise CommandError(f"{directory}: no such folder", returncode=2)
        if entities is not None and not entities.is_file():
            raise CommandError(f"{entities}: no such file", returncode=2)
        show = {"auto": sys.stderr.isatty(), "always": True, "never": False}[progress]

        def bar(desc: str, unit: str):
            return lambda items: tqdm(
                items, desc=desc, unit=unit, disable=not show, file=sys.stderr
            )

        mapping = domain_mapping()
        workdir = Path(tempfile.mkdtemp(prefix="gamut-crag-mm-"))
        try:
            try:
                unknown = domain_mapping_problems(mapping)
                if unknown:
                    raise ImportProblems(unknown)
                known = read_entities(entities) if entities else None
                plan = crag_mm_plan(
                    directory,
                    split=split,
                    mapping=mapping,
                    workdir=workdir,
                    entities=known,
                    revision=revision,
                    progress=bar("checking", " rows"),
                )
            except ImportProblems as exc:
                for problem in exc.problems:
                    self.stderr.write(problem)
                self.stderr.write("nothing was imported.")
                sys.exit(2)
            for line in describe(plan, mapping):
                self.stdout.write(line)
            if dry_run:
                self.stdout.write("dry run: nothing was written.")
                return
            result = crag_mm_import(
                plan,
                actor=None,
                source=ImportBatch.Source.COMMAND,
                progress=bar("storing", " images"),
            )
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        self.stdout.write(
            self.style.SUCCESS(
                f"imported {len(result.imported)} image(s), skipped {len(result.skipped)} "
                "imported before"
            )
        )
