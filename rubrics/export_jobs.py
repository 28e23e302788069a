"""The benchmark export as a background job of the job system (llm/jobs.py): one job of kind
`rubrics.export` with one item, which writes the zip into MEDIA_ROOT/exports/<job id>/ and
keeps its name, size and content hash as the item's result. The Export page and the API show
the exports and hand the finished file out; nothing is written in a web request. Besides the
benchmark's two layouts, the same job writes a release's published leaderboard (the static
site of judging/publish) as a zip: minutes of work at full size, which no request should hold.

The writing runs in a thread of its own (it reads the database there and closes that thread's
connection at the end), so the chunk keeps renewing its lease meanwhile, and it writes how far
it is into the job's `progress` at most once a second. The zip is written beside its final
name and renamed into place when complete: a failed or interrupted export leaves no file that
looks finished. The files of the KEEP newest exports are kept; an older export keeps its record
(who, when, what, the content hash) and says its file was removed.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connections

from llm import jobs
from llm.gateway import Gateway
from llm.models import ItemStatus, Job, JobItem

from .exporting import export, export_to_zip
from .hf_export import export_hf

EXPORT = "rubrics.export"
FOLDER = "exports"
KEEP = 5  # exports whose file is kept
PROGRESS_EVERY_S = 1.0
PARTIAL = ".partial"
NO_RELEASE = "No release has been cut yet: a leaderboard is published from a release."

WRITERS = {"gamut": export, "huggingface": export_hf}
SITE = "site"  # a release's published leaderboard (judging/publish), not the benchmark's files
LAYOUTS = {
    "gamut": "GAMUT files: gamut.jsonl, the photos and manifest.json",
    "huggingface": "Hugging Face dataset: Parquet, dataset card and inspect_ai task",
    SITE: "Published leaderboard: a release's static site, pages that open from disk",
}


def folder() -> Path:
    return Path(settings.MEDIA_ROOT) / FOLDER


def file_name(layout: str, release: str | None, content_hash: str) -> str:
    """gamut-benchmark-[hf-][RELEASE-]HASH (the .zip is added)."""
    short = content_hash.removeprefix("sha256:")[:12]
    parts = ["gamut-benchmark", "hf" if layout == "huggingface" else "", release or "", short]
    # A release name may hold spaces and ( ) +: kept out of the file name.
    return "-".join("".join(c if c.isalnum() or c in "._-" else "_" for c in p) for p in parts if p)


class Progress:
    """Wraps the entries the writer walks through; writes {"done", "total", "what"} into the
    job at most once a second (from the export's thread, over its own connection)."""

    def __init__(self, job_id: int, what: str = "questions") -> None:
        self.job_id, self.what = job_id, what
        self.last = 0.0

    def save(self, done: int, total: int) -> None:
        Job.objects.filter(pk=self.job_id).update(
            progress={"done": done, "total": total, "what": self.what}
        )

    def step(self, message: str) -> None:
        """For work counted in steps rather than entries (the published site): what it does now."""
        now = time.monotonic()
        if now - self.last >= PROGRESS_EVERY_S:
            self.last = now
            Job.objects.filter(pk=self.job_id).update(progress={"step": message.strip()})

    def __call__(self, entries: Iterable) -> Iterator:
        items = list(entries)
        self.save(0, len(items))
        for done, entry in enumerate(items):
            now = time.monotonic()
            if now - self.last >= PROGRESS_EVERY_S:
                self.last = now
                self.save(done, len(items))
            yield entry
        self.save(len(items), len(items))


def write(job_id: int, layout: str, release_name: str | None) -> dict[str, Any]:
    """Write the export of job `job_id`; its result: {"file", "name", "bytes", "content_hash",
    "layout", "release", "questions"}. ExportError (the data lacks something) fails the item
    with its message."""
    from judging.publish.site import site_folder, zip_stream
    from judging.releases.selectors import latest_release, release_named

    from .exporting import ExportError, collect

    release = None
    if release_name:
        release = release_named(release_name)
        if release is None:
            raise ExportError(f"No release is named {release_name!r}.")
    elif layout == SITE:
        release = latest_release()
        if release is None:
            raise ExportError(NO_RELEASE)
    target_dir = folder() / str(job_id)
    target_dir.mkdir(parents=True, exist_ok=True)
    for old in target_dir.glob(f"*{PARTIAL}"):  # an earlier attempt that was interrupted
        old.unlink(missing_ok=True)
    partial = target_dir / f"{uuid.uuid4().hex}{PARTIAL}"
    progress = Progress(job_id)
    try:
        with partial.open("wb") as handle:
            if layout == SITE:
                for chunk in zip_stream(release, progress=progress.step):
                    handle.write(chunk)
                name = f"{site_folder(release)}.zip"
                content_hash, questions = release.content_hash, release.questions.count()
            else:
                manifest = export_to_zip(
                    handle,
                    lambda sink: WRITERS[layout](
                        sink, contents=collect(release), progress=progress
                    ),
                )
                name = file_name(layout, release_name, manifest.content_hash) + ".zip"
                content_hash = manifest.content_hash
                questions = manifest.counts.get("questions")
        final = target_dir / name
        partial.rename(final)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return {
        "file": f"{FOLDER}/{job_id}/{name}",
        "name": name,
        "bytes": final.stat().st_size,
        "content_hash": content_hash,
        "layout": layout,
        "release": release.name if release is not None else None,
        "questions": questions,
    }


def _write_in_thread(job_id: int, payload: dict[str, Any]) -> dict[str, Any]:
    try:
        result = write(job_id, payload["layout"], payload.get("release"))
        prune()
        return result
    finally:
        connections.close_all()  # this thread's connections only


async def run(gateway: Gateway, payload: dict[str, Any]) -> dict[str, Any]:
    return await asyncio.to_thread(_write_in_thread, jobs.current_item.get().job_id, payload)


jobs.register_kind(
    EXPORT,
    run,
    chunk_size=1,
    concurrency=1,
    max_attempts=2,
    title="Export the benchmark",
    item_noun="export",
)


AlreadyRunning = jobs.AlreadyRunning


def launch(user: Any, layout: str, release: str | None = None) -> Job:
    """A new export, unless one is queued or running (AlreadyRunning): two at once would only
    compete for the same disk and worker. ExportError for a site with no release to publish."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}")
    from judging.releases.selectors import latest_release

    from .exporting import ExportError

    if layout == SITE and not release and latest_release() is None:
        raise ExportError(NO_RELEASE)
    jobs.refuse_if_running(EXPORT)
    payload = {"layout": layout, "release": release or None}
    return jobs.job_launch(kind=EXPORT, items=[("export", payload)], params=payload, user=user)


@dataclass
class Export:
    """One export as the page and the API show it."""

    job: Job
    result: dict[str, Any] | None
    error: str

    @property
    def layout(self) -> str:
        return self.job.params.get("layout", "gamut")

    @property
    def release(self) -> str | None:
        """The release exported: the one asked for, or (the published site of) the latest."""
        return (self.result or {}).get("release") or self.job.params.get("release")

    @property
    def path(self) -> Path | None:
        """The finished file, or None (not finished, failed, or removed since)."""
        if not self.result:
            return None
        path = Path(settings.MEDIA_ROOT) / self.result["file"]
        return path if path.is_file() else None

    @property
    def removed(self) -> bool:
        return bool(self.result) and self.path is None

    @property
    def running(self) -> bool:
        return self.job.status in jobs.ACTIVE

    @property
    def percent(self) -> int | None:
        progress = self.job.progress or {}
        if not progress.get("total"):
            return None
        return round(100 * progress["done"] / progress["total"])


def exports(limit: int = 20, job_id: int | None = None) -> list[Export]:
    """The newest exports, newest first (or the one numbered `job_id`). Two queries."""
    found = Job.objects.filter(kind=EXPORT).select_related("launched_by")
    if job_id is not None:
        found = found.filter(pk=job_id)
    found = list(found[:limit])
    items = {
        pk: (status, result, error)
        for pk, status, result, error in JobItem.objects.filter(
            job__in=[job.pk for job in found]
        ).values_list("job_id", "status", "result", "last_error")
    }
    out = []
    for job in found:
        status, result, error = items.get(job.pk, (None, None, ""))
        out.append(Export(job, result if status == ItemStatus.DONE else None, error or ""))
    return out


def one(job_id: int) -> Export | None:
    found = exports(job_id=job_id)
    return found[0] if found else None


def prune(keep: int | None = None) -> list[Path]:
    """Remove the files of finished exports but the `keep` (KEEP) newest; the paths removed."""
    keep = KEEP if keep is None else keep
    removed = []
    kept = 0
    for job_id in Job.objects.filter(kind=EXPORT).values_list("pk", flat=True):
        target = folder() / str(job_id)
        if not target.is_dir():
            continue
        files = [p for p in target.iterdir() if not p.name.endswith(PARTIAL)]
        if not files:
            continue
        kept += 1
        if kept <= keep:
            continue
        for path in files:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed
