"""publish_leaderboard --release NAME OUT_DIR: the leaderboard of a release as a static site."""

from __future__ import annotations

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from judging.publish.site import PublishError, publish_folder
from judging.releases.selectors import release_named, releases


class Command(BaseCommand):
    help = (
        "Write the leaderboard of a release as a static site into OUT_DIR (a new or empty "
        "folder): pages that open from disk with no server and nothing fetched from the "
        "internet, SVG charts, every table as CSV and JSON, the photos their licence allows. "
        "The same release gives the same bytes. Open OUT_DIR/index.html."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--release", required=True, metavar="NAME", help="the release's name, e.g. v1.0"
        )
        parser.add_argument("out_dir", metavar="OUT_DIR", help="a new or empty folder")

    def handle(self, *args, release: str, out_dir: str, **options) -> None:
        found = release_named(release)
        if found is None:
            names = ", ".join(r.name for r in releases()) or "none has been cut"
            raise CommandError(f"no release named {release!r} (releases: {names})")
        started = time.perf_counter()
        try:
            published = publish_folder(
                found, Path(out_dir), progress=lambda message: self.stderr.write(message)
            )
        except PublishError as exc:
            raise CommandError(str(exc)) from exc
        seconds = time.perf_counter() - started
        self.stdout.write(
            f"published release {published.release} to {out_dir}: {published.questions} "
            f"question(s), {published.boards} board(s), {published.photos} photo(s) included "
            f"and {published.photos_withheld} left out by their licence, {published.files} "
            f"file(s), {published.bytes / 1e6:.1f} MB, in {seconds:.1f} s. "
            f"Open {Path(out_dir) / 'index.html'}"
        )
