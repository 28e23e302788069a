"""The leaderboard of a release as a static site: HTML pages, SVG charts, CSV and JSON tables and
the photos the licences allow, in a folder that opens from disk (file://) with no server, no
script and nothing fetched from the internet.

    publish_folder(release, path) -> Published  the command's (a new or empty folder)
    zip_stream(release) -> Iterator[bytes]      the same files as a zip, the page's download
    Site(release).files()                       every (path, bytes), in a fixed order

Every figure is the app's own: the boards are `judging.releases.scores.release_board` (the
leaderboard's computation over the release's frozen rubric versions and scoring parameters),
the analyses `judging.leaderboard.reports` on the release, one question's verdicts and scores
`reports.question_report` on the release's version of its rubric. Nothing is scored here.

The layout (every link relative; pages at most one folder deep):

    index.html                    every model under every judge and setting, the main chart
    boards/<judge>--<setting>.html  one board: chart, table, paired comparisons, by domain and
                                  by popularity
    settings.html                 multimodal against text-only, per judge
    judges.html                   judges compared, per setting
    models.html, models/<m>.html  a model: its rows, domains, popularity, every question's score
    questions.html, questions/<q>.html  a question: photo, checks by tier, each response's verdicts
    method.html, data.html        the method and parameters; every table's files
    data/*.csv, data/*.json       every table of the pages; data/questions/<q>.{csv,json}
    photos/<q>.<ext>              the photos whose licence allows it (licences.py)
    release.json, style.css

Byte-identical for the same release and the same verdicts: nothing in it says when it was
built, everything is in a fixed order, numbers are written with fixed digits, JSON with sorted
keys, the zip with a fixed date on every entry.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import zipfile
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path, PurePosixPath
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from annotation.labels import words
from annotation.models import FinalQuestion

from ..csv_export import csv_cell
from ..leaderboard import reports
from ..leaderboard.board import (
    COMPARISON_COLUMNS,
    EXPORT_COLUMNS,
    RESAMPLES,
    SEED,
    significance_grid,
)
from ..models import Judge, Release, Setting
from ..releases.scores import ReleaseBoard, release_board
from ..releases.selectors import release_questions
from ..verdicts.scoring import TIERS
from . import charts, licences

FORMAT = "gamut-published-leaderboard"
FORMAT_VERSION = 1
CSS = Path(__file__).with_name("site.css")
TEMPLATES = "judging/publish/"
# Every entry of the zip carries this date: the zip's bytes must not depend on when it was made.
ZIP_DATE = (1980, 1, 1, 0, 0, 0)


class PublishError(Exception):
    """The site cannot be written as asked; the message says why, for people."""


# --- where files go --------------------------------------------------------------------------


class Writer:
    """Counts what it writes; subclasses put the bytes somewhere."""

    def __init__(self) -> None:
        self.files = 0
        self.bytes = 0

    def write(self, path: str, data: bytes) -> None:
        self.files += 1
        self.bytes += len(data)
        self._put(path, data)

    def _put(self, path: str, data: bytes) -> None:
        raise NotImplementedError


class FolderWriter(Writer):
    """Into a folder, which must be new or empty (a leftover file from another release would
    be published with this one)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise PublishError(f"{root} is not an empty folder: choose a new or empty one.")
        root.mkdir(parents=True, exist_ok=True)
        self.root = root

    def _put(self, path: str, data: bytes) -> None:
        target = self.root / PurePosixPath(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


# --- names of files --------------------------------------------------------------------------


def file_names(names: Iterable[str]) -> dict[str, str]:
    """A file name (no extension) for each name: lower case letters, digits, '.', '_' and '-',
    the rest as '-', never two dots in a row nor one at either end. Names that would share one
    (or give none) get 8 hex digits of their SHA-256 after it, so the answer does not depend on
    the names' order."""
    names = sorted(set(names))
    base = {
        n: re.sub(r"\.{2,}", ".", re.sub(r"[^a-z0-9._-]+", "-", n.lower())).strip("-.")
        for n in names
    }
    taken = Counter(base.values())
    out = {}
    for n in names:
        name = base[n]
        if not name or taken[name] > 1:
            digest = hashlib.sha256(n.encode()).hexdigest()[:8]
            name = f"{name}-{digest}" if name else digest
        out[n] = name
    return out


def site_folder(release: Release) -> str:
    """The folder the zip unpacks to: gamut-<release>."""
    return f"gamut-{file_names([release.name])[release.name]}"


# --- bytes of a table ------------------------------------------------------------------------


def csv_bytes(columns: list[str], rows: Iterable[Mapping]) -> bytes:
    """A CSV of `columns` (the header) as the app's pages write it (csv_export.csv_cell: a cell
    that starts like a formula is made text), with \\n line ends."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([csv_cell(c) for c in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(c)) for c in columns])
    return out.getvalue().encode()


def json_bytes(value: Any) -> bytes:
    """Compact, sorted keys: json's C encoder (an indent makes it use its Python one, four
    times slower on a question's thousand verdicts)."""
    return (
        json.dumps(
            value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
        )
        + "\n"
    ).encode()


@dataclass
class Table:
    """One table of a page, written as data/<stem>.csv and data/<stem>.json."""

    stem: str
    title: str
    columns: list[str]
    rows: list[dict]

    @property
    def csv(self) -> str:
        return f"data/{self.stem}.csv"

    @property
    def json(self) -> str:
        return f"data/{self.stem}.json"


@dataclass
class Published:
    release: str
    files: int
    bytes: int
    questions: int
    photos: int
    photos_withheld: int
    boards: int
    tables: list[Table] = field(default_factory=list, repr=False)


# --- the site --------------------------------------------------------------------------------


def _board_name(judge: str, setting: str, names: Mapping[str, str]) -> str:
    return f"{names[judge]}--{setting}"


def _interval_row(label: str, row) -> charts.ChartRow:
    return charts.ChartRow(label, (charts.Mark(row.gamut, row.low, row.high),))


class Site:
    """The state of one publication: what has been computed, and the writer."""

    def __init__(self, release: Release, progress: Callable[[str], None] | None = None) -> None:
        self.release = release
        self.pending: list[tuple[str, bytes]] = []
        self.progress = progress or (lambda message: None)
        self.scoring = release.scoring_settings()
        self.tables: list[Table] = []
        self.identity = {"name": release.name, "content_hash": release.content_hash}
        self.questions = self.boards = self.photos = 0

    # writing

    def files(self) -> Iterator[tuple[str, bytes]]:
        """Every file of the site as (path, bytes), in a fixed order, a few at a time: a
        question's files are handed on before the next question is read."""
        for _ in self.steps():
            yield from self.pending
            self.pending.clear()
        yield from self.pending
        self.pending.clear()

    def emit(self, path: str, data: bytes) -> None:
        self.pending.append((path, data))

    def page(self, path: str, template: str, context: dict) -> None:
        depth = path.count("/")
        html = render_to_string(
            TEMPLATES + template,
            {
                "root": "../" * depth,
                "release": self.release,
                "scoring": self.scoring,
                "cut": self.release.created_at.date().isoformat(),
                "tiers": TIERS,
                **context,
            },
        )
        self.emit(path, html.encode())

    def table(self, stem: str, title: str, columns: list[str], rows: list[dict]) -> Table:
        found = Table(stem, title, columns, rows)
        self.emit(found.csv, csv_bytes(columns, rows))
        self.emit(
            found.json,
            json_bytes(
                {"release": self.identity, "table": title, "columns": columns, "rows": rows}
            ),
        )
        # data.html lists the tables (their rows are not kept: a model's is 50,000 at full size)
        self.tables.append(Table(stem, title, columns, []))
        return found

    # the build

    def steps(self) -> Iterator[None]:
        """Compute and emit the site, pausing (yield) after each piece of work."""
        release = self.release
        rows = list(release_questions(release).select_related("image", "version"))
        judges = list(Judge.objects.select_related("llm_model").order_by("name"))
        self.judge_files = file_names(j.name for j in judges)
        self.question_files = file_names(r.source_id for r in rows)
        self.progress(f"scoring {len(judges)} judge(s) in {len(Setting.values)} settings")
        boards: dict[tuple[str, str], ReleaseBoard] = {
            (j.name, s): release_board(
                release,
                judge=j,
                setting=s,
                audit=True,
                estimate=False,
                resamples=RESAMPLES,
                seed=SEED,
            )
            for j in judges
            for s in Setting.values
        }
        models = sorted({r.model for b in boards.values() for r in b.board.rows})
        self.model_files = file_names(models)
        board_list = [
            {
                "judge": j.name,
                "setting": s,
                "href": f"boards/{_board_name(j.name, s, self.judge_files)}.html",
                "board": boards[(j.name, s)],
            }
            for j in judges
            for s in Setting.values
        ]
        self.progress(f"writing {len(board_list)} board(s)")
        for entry in board_list:
            self.board_page(entry, board_list)
            yield
        self.progress("comparing the settings and the judges")
        settings = [
            (j, reports.settings_report(j, scoring=self.scoring, release=release)) for j in judges
        ]
        self.settings_page(settings)
        compared = [
            (s, reports.judges_report(setting=s, scoring=self.scoring, release=release))
            for s in Setting.values
        ]
        self.judges_page(compared)
        self.progress(f"writing {len(rows)} question page(s)")
        outcomes: dict = defaultdict(dict)
        yield from self.question_pages(rows, outcomes)
        self.progress(f"writing {len(models)} model page(s)")
        yield from self.model_pages(models, board_list, rows, outcomes, [j.name for j in judges])
        self.index_page(models, board_list, rows, judges)
        self.method_page(rows)
        self.emit("style.css", CSS.read_bytes())
        self.emit("release.json", json_bytes(self.release_record(rows, judges, models)))
        self.page("data.html", "data.html", {"nav": "data", "tables": self.tables})
        self.questions, self.boards = len(rows), len(board_list)

    def release_record(self, rows, judges, models) -> dict:
        release = self.release
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "release": release.name,
            "content_hash": release.content_hash,
            "notes": release.notes,
            "cut": release.created_at.date().isoformat(),
            "scoring": {
                "lambda": self.scoring.lambda_,
                "mu": self.scoring.mu,
                "weights": dict(zip(TIERS, self.scoring.weights, strict=True)),
            },
            "domains": release.domains,
            "questions": len(rows),
            "judges": [j.name for j in judges],
            "models": models,
            "settings": list(Setting.values),
            "bootstrap": {"resamples": RESAMPLES, "seed": SEED},
        }

    # one board

    def board_page(self, entry: dict, board_list: list[dict]) -> None:
        rb: ReleaseBoard = entry["board"]
        board = rb.board
        stem = _board_name(entry["judge"], entry["setting"], self.judge_files)
        what = f"{entry['judge']}, {Setting(entry['setting']).label}"
        table = self.table(
            f"{stem}-rows",
            f"Leaderboard: {what}",
            EXPORT_COLUMNS,
            [r.as_dict() for r in board.rows],
        )
        comparisons = self.table(
            f"{stem}-comparisons",
            f"Paired comparisons: {what}",
            COMPARISON_COLUMNS,
            [p.as_dict() for p in board.comparisons],
        )
        domains = self.breakdown(stem, "domain", what, board.rows, board.domains, "by_domain")
        popularity = self.breakdown(
            stem, "popularity", what, board.rows, board.popularities, "by_popularity"
        )
        chart = charts.dot_chart(
            [_interval_row(r.model, r) for r in board.rows if r.gamut is not None],
            series=["Gamut"],
            title=f"Gamut score x100 of each model, {what}",
            description="Each model's Gamut score with its 95% bootstrap interval over "
            "questions; the table below holds the same numbers.",
            ident="board-chart",
        )
        self.page(
            f"boards/{stem}.html",
            "board.html",
            {
                "nav": "boards",
                "entry": entry,
                "rb": rb,
                "board": board,
                "rows": self.ranked(board.rows),
                "chart": chart,
                "matrix": significance_grid(board),
                "boards": board_list,
                "table": table,
                "comparisons": comparisons,
                "domains": domains,
                "popularity": popularity,
                "model_files": self.model_files,
            },
        )

    def ranked(self, rows) -> list[dict]:
        """The rows with their rank (1, 2, ...; none for a model with nothing scored), their
        file name and their corrected score."""
        out = []
        for rank, row in enumerate(rows, start=1):
            out.append(
                {
                    "row": row,
                    "rank": rank if row.gamut is not None else None,
                    "file": self.model_files[row.model],
                    "corrected": row.audited,
                }
            )
        return out

    def breakdown(self, stem, kind, what, rows, keys, attribute) -> dict:
        """The models' scores by domain or by popularity, as a table and its page shape."""
        columns = ["model", kind, "gamut", "scored", "questions"]
        data = [
            {
                "model": r.model,
                kind: key,
                "gamut": getattr(r, attribute)[key].gamut,
                "scored": getattr(r, attribute)[key].scored,
                "questions": getattr(r, attribute)[key].questions,
            }
            for r in rows
            for key in keys
        ]
        table = self.table(f"{stem}-{kind}", f"By {kind}: {what}", columns, data)
        grid = [
            {
                "model": r.model,
                "file": self.model_files[r.model],
                "cells": [
                    {
                        **vars(getattr(r, attribute)[key]),
                        "shade": charts.shade(getattr(r, attribute)[key].gamut),
                    }
                    for key in keys
                ],
            }
            for r in rows
        ]
        return {"table": table, "keys": keys, "grid": grid}

    # the analyses

    def settings_page(self, settings: list[tuple[Judge, dict]]) -> None:
        sections = []
        for judge, report in settings:
            stem = f"settings-{self.judge_files[judge.name]}"
            table = self.table(
                stem,
                f"Multimodal against text-only: {judge.name}",
                reports.SETTINGS_COLUMNS,
                report["rows"],
            )
            chart = charts.dot_chart(
                [
                    charts.ChartRow(
                        r["model"],
                        (
                            charts.Mark(
                                r["multimodal"], r["multimodal_ci_low"], r["multimodal_ci_high"]
                            ),
                            charts.Mark(
                                r["text_only"], r["text_only_ci_low"], r["text_only_ci_high"]
                            ),
                        ),
                    )
                    for r in report["rows"]
                ],
                series=[Setting.MULTIMODAL.label, Setting.TEXT_ONLY.label],
                title=f"Multimodal against text-only under {judge.name}",
                description="For each model, its Gamut score x100 with the photo (multimodal) "
                "and with the entity named in the text (text-only), each with its 95% "
                "interval; the table below holds the same numbers.",
                ident=f"settings-{self.judge_files[judge.name]}",
                join=True,
            )
            sections.append(
                {
                    "judge": judge.name,
                    "anchor": self.judge_files[judge.name],
                    "report": report,
                    "table": table,
                    "chart": chart,
                }
            )
        self.page("settings.html", "settings.html", {"nav": "settings", "sections": sections})

    def judges_page(self, compared: list[tuple[str, dict]]) -> None:
        sections = []
        for setting, report in compared:
            label = Setting(setting).label
            tables = {}
            for name in reports.JUDGES_TABLES:
                columns, rows = reports.judges_table(report, name)
                tables[name] = self.table(
                    f"judges-{setting}-{name}",
                    f"Judges compared, {label}: {name.replace('_', ' ')}",
                    columns,
                    rows,
                )
            judges = report["judges"]
            chart = charts.dot_chart(
                [
                    charts.ChartRow(r["model"], tuple(charts.Mark(r["scores"][j]) for j in judges))
                    for r in sorted(report["scores"], key=lambda r: r["model"])
                ],
                series=judges,
                title=f"Each judge's Gamut score x100 of each model, {label}",
                description="One mark per judge on each model's row; the table below holds "
                "the same numbers.",
                ident=f"judges-{setting}",
            )
            sections.append(
                {
                    "setting": setting,
                    "label": label,
                    "report": report,
                    "tables": tables,
                    "chart": chart,
                    "scores": [
                        {**r, "cells": [r["scores"][j] for j in judges]} for r in report["scores"]
                    ],
                    "confusion": _confusion_rows(report["confusion"]),
                }
            )
        self.page("judges.html", "judges.html", {"nav": "judges", "sections": sections})

    # questions

    def question_pages(self, rows, outcomes: dict) -> Iterator[None]:
        release = self.release
        """A page and two files per question; fills `outcomes` (model -> (source id, setting)
        -> judge -> {status, gamut}) for the model pages, and counts the photos copied."""
        questions = FinalQuestion.objects.select_related("image").in_bulk(
            [r.question_id for r in rows]
        )
        listing = []
        for n, row in enumerate(rows, start=1):
            if n % 200 == 0:
                self.progress(f"  {n} of {len(rows)} questions")
            name = self.question_files[row.source_id]
            photo = self.photo(row, name)
            self.photos += bool(photo)
            report = reports.question_report(
                questions[row.question_id], image_url=photo, scoring=self.scoring, release=release
            )
            # Nothing of the live state (whether the question was dropped since) nor of this
            # database (row ids).
            del report["dropped"]
            report.update(
                {
                    "release": self.identity,
                    "rubric_version": {"stage": row.stage},
                    "source": {
                        "dataset": row.source,
                        "split": row.source_split,
                        "revision": row.source_revision,
                        "licence": row.licence,
                    },
                }
            )
            for response in report["responses"]:
                outcomes[response["model"]][(row.source_id, response["setting"])] = response[
                    "scores"
                ]
            self.emit(
                f"data/questions/{name}.csv",
                csv_bytes(reports.QUESTION_COLUMNS, reports.question_table(report)),
            )
            self.emit(f"data/questions/{name}.json", json_bytes(report))
            self.page(
                f"questions/{name}.html",
                "question.html",
                {
                    "nav": "questions",
                    "file": name,
                    **_question_context(report, row, photo, self.model_files),
                },
            )
            listing.append(
                {
                    "source_id": row.source_id,
                    "question": row.text,
                    "entity": row.entity,
                    "domain": row.domain,
                    "popularity": row.popularity,
                    "checks": row.n_checks,
                    "rubric_stage": row.stage,
                    "source": row.source,
                    "licence": row.licence,
                    "photo": bool(photo),
                    "file": name,
                }
            )
            yield
        columns = [
            "source_id",
            "question",
            "entity",
            "domain",
            "popularity",
            "checks",
            "rubric_stage",
            "source",
            "licence",
            "photo",
        ]
        table = self.table(
            "questions", "The questions", columns, [{c: q[c] for c in columns} for q in listing]
        )
        self.page(
            "questions.html",
            "questions.html",
            {"nav": "questions", "questions": listing, "table": table},
        )

    def photo(self, row, name: str) -> str:
        """Copy the question's photo when its licence allows; its path in the site, or ""."""
        if not licences.photo_allowed(row.licence) or not row.image.file:
            return ""
        suffix = PurePosixPath(row.image.file.name).suffix.lower()
        if suffix not in (".jpg", ".jpeg", ".png", ".gif", ".webp"):
            return ""
        try:
            with row.image.file.open("rb") as f:
                data = f.read()
        except FileNotFoundError:
            return ""
        path = f"photos/{name}{suffix}"
        self.emit(path, data)
        return path

    # models

    def model_pages(self, models, board_list, rows, outcomes, judges: list[str]) -> Iterator[None]:
        columns = [(s, j) for s in Setting.values for j in judges]
        listing = []
        for model in models:
            name = self.model_files[model]
            entries = []
            for entry in board_list:
                board = entry["board"].board
                position = next((i for i, r in enumerate(board.rows) if r.model == model), None)
                if position is None:
                    continue
                row = board.rows[position]
                entries.append(
                    {
                        **entry,
                        "row": row,
                        "rank": position + 1 if row.gamut is not None else None,
                        "of": sum(r.gamut is not None for r in board.rows),
                        "corrected": row.audited,
                    }
                )
            per_question = []
            data = []
            for q in rows:
                cells = []
                for setting, judge in columns:
                    got = outcomes[model].get((q.source_id, setting), {}).get(judge)
                    status = got["status"] if got else "missing"
                    gamut = got["gamut"] if got else None
                    cells.append({"status": status, "gamut": gamut, "setting": setting})
                    data.append(
                        {
                            "source_id": q.source_id,
                            "setting": setting,
                            "judge": judge,
                            "status": status,
                            "gamut": gamut,
                        }
                    )
                per_question.append(
                    {"row": q, "file": self.question_files[q.source_id], "cells": cells}
                )
            table = self.table(
                f"model-{name}",
                f"{model}: each question's score",
                ["source_id", "setting", "judge", "status", "gamut"],
                data,
            )
            summary = self.table(
                f"model-{name}-scores",
                f"{model}: its score under each judge and setting",
                ["judge", "setting", "rank", "of", *EXPORT_COLUMNS],
                [
                    {
                        "judge": e["judge"],
                        "setting": e["setting"],
                        "rank": e["rank"],
                        "of": e["of"],
                        **e["row"].as_dict(),
                    }
                    for e in entries
                ],
            )
            best = next((e for e in entries if e["rank"] is not None), None)
            listing.append({"model": model, "file": name, "best": best, "entries": entries})
            self.page(
                f"models/{name}.html",
                "model.html",
                {
                    "nav": "models",
                    "model": model,
                    "file": name,
                    "entries": entries,
                    "columns": columns,
                    "questions": per_question,
                    "table": table,
                    "summary": summary,
                    "domains": _by_key(entries, "by_domain"),
                    "popularity": _by_key(entries, "by_popularity"),
                },
            )
            yield
        self.page("models.html", "models.html", {"nav": "models", "models": listing})

    # the front page and the method

    def index_page(self, models, board_list, rows, judges) -> None:
        first = board_list[0] if board_list else None
        by_board = [{r.model: r for r in b["board"].board.rows} for b in board_list]
        order = [r.model for r in first["board"].board.rows] if first else []
        order += [m for m in models if m not in order]
        summary_rows = []
        data = []
        for model in order:
            cells = []
            for entry, found in zip(board_list, by_board, strict=True):
                row = found.get(model)
                cells.append({"row": row, "shade": charts.shade(row.gamut if row else None)})
                data.append(
                    {
                        "model": model,
                        "judge": entry["judge"],
                        "setting": entry["setting"],
                        "gamut": row.gamut if row else None,
                        "ci_low": row.low if row else None,
                        "ci_high": row.high if row else None,
                        "scored": row.scored if row else 0,
                        "questions": len(rows),
                    }
                )
            summary_rows.append({"model": model, "file": self.model_files[model], "cells": cells})
        table = self.table(
            "leaderboard",
            "Every model under every judge and setting",
            ["model", "judge", "setting", "gamut", "ci_low", "ci_high", "scored", "questions"],
            data,
        )
        chart = ""
        if first:
            what = f"{first['judge']}, {Setting(first['setting']).label}"
            chart = charts.dot_chart(
                [
                    _interval_row(r.model, r)
                    for r in first["board"].board.rows
                    if r.gamut is not None
                ],
                series=["Gamut"],
                title=f"Gamut score x100 of each model, {what}",
                description="Each model's Gamut score with its 95% bootstrap interval over "
                "questions; the table above holds the same numbers.",
                ident="index-chart",
            )
        self.page(
            "index.html",
            "index.html",
            {
                "nav": "index",
                "boards": board_list,
                "first": first,
                "summary": summary_rows,
                "table": table,
                "chart": chart,
                "questions": len(rows),
                "models": models,
                "judges": judges,
            },
        )

    def method_page(self, rows) -> None:
        licences_used = Counter(r.licence or "" for r in rows)
        self.page(
            "method.html",
            "method.html",
            {
                "nav": "method",
                "questions": len(rows),
                "photos": self.photos,
                "licences": [
                    {
                        "licence": name,
                        "questions": n,
                        "allowed": licences.photo_allowed(name),
                        "non_commercial": licences.non_commercial(name),
                    }
                    for name, n in sorted(licences_used.items())
                ],
                "resamples": RESAMPLES,
                "seed": SEED,
            },
        )


def _by_key(entries: list[dict], attribute: str) -> dict:
    """A model's cells by domain (or popularity) under each of its boards."""
    keys: list[str] = []
    for e in entries:
        keys += [k for k in getattr(e["row"], attribute) if k not in keys]
    return {
        "keys": keys,
        "rows": [
            {
                "entry": e,
                "cells": [
                    {
                        **vars(c),
                        "shade": charts.shade(c.gamut),
                    }
                    if (c := getattr(e["row"], attribute).get(k))
                    else None
                    for k in keys
                ],
            }
            for e in entries
        ],
    }


def _confusion_rows(matrix: dict | None) -> list[tuple[str, list[int]]]:
    if not matrix:
        return []
    return list(zip(matrix["labels"], matrix["counts"], strict=True))


def _verdict_rows(verdicts: list[dict], checks: Mapping[str, dict], judges: list[str]) -> str:
    """The rows of one response's verdict table: its tier, the check, each judge's verdict and
    rationale, every text escaped (html.escape, as Django's escape does). Written here rather
    than in the template: a question has about a thousand of them at full size (28 responses
    x 35 checks); the template engine took 0.6 s a question for them, format_html 0.2 s, most
    of publishing's time, and plain escaping a tenth of that."""
    lines = []
    for e in verdicts:
        check = checks[e["check_id"]]
        cells = "".join(_verdict_cell(e["judges"].get(j)) for j in judges)
        lines.append(
            f'<tr><td>{escape(words(check["tier"]))}</td><th scope="row"><span class="cid">'
            f"{escape(e['check_id'])}</span> {escape(check['text'])}</th>{cells}</tr>"
        )
    return mark_safe("\n".join(lines))  # every piece above is escaped


def _verdict_cell(given: dict | None) -> str:
    if given is None:
        return '<td class="verdict none">not judged</td>'
    verdict = escape(given["verdict"])
    cell = f'<td class="verdict {verdict}"><strong>{escape(words(given["verdict"]))}</strong>'
    if given["rationale"]:
        cell += f'<br><span class="small">{escape(given["rationale"])}</span>'
    return cell + "</td>"


def _question_context(report: dict, row, photo: str, model_files: Mapping[str, str]) -> dict:
    """The question page's shape: checks by tier, a score table, and each response's
    verdicts in check order, with every judge's verdict and rationale."""
    checks = {c["check_id"]: c for c in report["checks"]}
    by_tier = [
        {"tier": tier, "checks": [c for c in report["checks"] if c["tier"] == tier]}
        for tier in TIERS
    ]
    responses = []
    for r in report["responses"]:
        anchor = f"{model_files.get(r['model'], 'model')}--{r['setting']}"
        responses.append(
            {
                "response": r,
                "anchor": anchor,
                "file": model_files.get(r["model"]),
                "scores": [(j, r["scores"][j]) for j in report["judges"]],
                "rows": _verdict_rows(
                    sorted(
                        r["verdicts"],
                        key=lambda e: (
                            TIERS.index(checks[e["check_id"]]["tier"]),
                            checks[e["check_id"]]["position"],
                        ),
                    ),
                    checks,
                    report["judges"],
                ),
            }
        )
    return {
        "report": report,
        "row": row,
        "photo": photo,
        "withheld": licences.withheld_reason(row.licence) if not photo else "",
        "non_commercial": licences.non_commercial(row.licence),
        "by_tier": by_tier,
        "responses": responses,
    }


# --- entry points ----------------------------------------------------------------------------


def publish(
    release: Release, writer: Writer, *, progress: Callable[[str], None] | None = None
) -> Published:
    """Write the site of `release` through `writer`."""
    site = Site(release, progress)
    for path, data in site.files():
        writer.write(path, data)
    return Published(
        release=release.name,
        files=writer.files,
        bytes=writer.bytes,
        questions=site.questions,
        photos=site.photos,
        photos_withheld=site.questions - site.photos,
        boards=site.boards,
        tables=site.tables,
    )


def publish_folder(
    release: Release, folder: Path, *, progress: Callable[[str], None] | None = None
) -> Published:
    """The site of `release` in `folder` (new or empty)."""
    return publish(release, FolderWriter(folder), progress=progress)


class _Pipe(io.RawIOBase):
    """A write-only stream whose bytes are taken away as they come (zipfile writes a zip to
    a stream it cannot seek with a data descriptor after each entry)."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


def zip_stream(
    release: Release, *, progress: Callable[[str], None] | None = None
) -> Iterator[bytes]:
    """The site as a zip, under the folder gamut-<release>/, in pieces as it is built (the
    download streams it: a full-size site takes minutes to build)."""
    pipe = _Pipe()
    folder = site_folder(release)
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path, data in Site(release, progress).files():
            info = zipfile.ZipInfo(f"{folder}/{path}", date_time=ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, data)
            if len(pipe.buffer) >= 1 << 16:
                yield pipe.take()
    yield pipe.take()
