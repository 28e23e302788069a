"""The published site's charts: SVG drawn here, at build time, from the scores (pure Python, no
Django, no script in the page).

One drawing serves the three charts of the site: a row per model and, on it, one mark per
series with its 95% interval when known.

  the leaderboard          one series (the Gamut score), with its bootstrap interval
  multimodal / text-only   two series, joined by a line: the cost of the image
  judges compared          a series per judge

Deterministic: the same rows give the same bytes (every coordinate written with a fixed number
of decimals, no random id, no date). The axis spans the data, padded to tens, inside
[-100, 100], and always holds 0. Each series has its own colour *and* shape, so the chart reads
without colour; the table beside it holds every number (the chart is its picture, `role="img"`
with a title and a description for screen readers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# Colour and shape per series, in order; the colours keep 3:1 contrast on white.
COLOURS = ("#1f4e9c", "#b3401f", "#2e7d32", "#6a1b9a", "#8a5a00", "#00695c")
SHAPES = ("circle", "diamond", "square", "triangle", "circle", "diamond")

WIDTH = 720
LABEL = 200  # the model names' column
RIGHT = 24
ROW = 24
TOP = 28  # room for the legend
BOTTOM = 30  # room for the axis labels


@dataclass(frozen=True)
class Mark:
    value: float | None  # x100; None: not scored, nothing drawn
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class ChartRow:
    label: str
    marks: tuple[Mark, ...]  # one per series


def _f(x: float) -> str:
    """A coordinate, always with one decimal ("-0.0" written "0.0")."""
    text = f"{x:.1f}"
    return "0.0" if text == "-0.0" else text


def axis_range(rows: Sequence[ChartRow]) -> tuple[int, int]:
    """The axis: the data (marks and intervals) padded out to tens, within [-100, 100], with 0
    inside; [-100, 100] with no data."""
    values = [
        v
        for row in rows
        for mark in row.marks
        for v in (mark.value, mark.low, mark.high)
        if v is not None and math.isfinite(v)
    ]
    if not values:
        return -100, 100
    low = max(-100, min(0, math.floor(min(values) / 10) * 10))
    high = min(100, max(0, math.ceil(max(values) / 10) * 10))
    if low == high:
        high = low + 10
    return int(low), int(high)


def _step(span: int) -> int:
    for step in (10, 20, 25, 50):
        if span / step <= 8:
            return step
    return 50


def _marker(shape: str, x: float, y: float, colour: str) -> str:
    if shape == "diamond":
        points = f"{_f(x)},{_f(y - 6)} {_f(x + 6)},{_f(y)} {_f(x)},{_f(y + 6)} {_f(x - 6)},{_f(y)}"
        return f'<polygon points="{points}" fill="{colour}"/>'
    if shape == "square":
        return f'<rect x="{_f(x - 5)}" y="{_f(y - 5)}" width="10.0" height="10.0" fill="{colour}"/>'
    if shape == "triangle":
        points = f"{_f(x)},{_f(y - 6)} {_f(x + 6)},{_f(y + 5)} {_f(x - 6)},{_f(y + 5)}"
        return f'<polygon points="{points}" fill="{colour}"/>'
    return f'<circle cx="{_f(x)}" cy="{_f(y)}" r="5.0" fill="{colour}"/>'


def _clip(label: str, limit: int = 28) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"


def dot_chart(
    rows: Sequence[ChartRow],
    *,
    series: Sequence[str],
    title: str,
    description: str,
    ident: str,
    join: bool = False,
) -> str:
    """An SVG: a row per entry of `rows` (in their order), a mark per series at its value with
    a whisker over its interval; `join` draws a line between a row's marks (two settings).
    `ident` makes the title's and description's ids unique in the page."""
    low, high = axis_range(rows)
    plot = WIDTH - LABEL - RIGHT
    height = TOP + ROW * max(len(rows), 1) + BOTTOM

    def x(value: float) -> float:
        return LABEL + plot * (value - low) / (high - low)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {height}"'
        f' width="{WIDTH}" height="{height}" role="img"'
        f' aria-labelledby="{ident}-title {ident}-desc">',
        f'<title id="{ident}-title">{escape(title)}</title>',
        f'<desc id="{ident}-desc">{escape(description)}</desc>',
    ]
    # Legend: the series, each with its mark.
    if len(series) > 1:
        left = float(LABEL)
        for s, name in enumerate(series):
            colour, shape = COLOURS[s % len(COLOURS)], SHAPES[s % len(SHAPES)]
            out.append(_marker(shape, left + 6, 12, colour))
            out.append(f'<text x="{_f(left + 16)}" y="16.0" class="legend">{escape(name)}</text>')
            left += 30 + 7 * len(name)
    # Grid and axis labels.
    bottom = TOP + ROW * max(len(rows), 1)
    step = _step(high - low)
    tick = math.ceil(low / step) * step
    while tick <= high:
        css = "zero" if tick == 0 else "grid"
        out.append(
            f'<line x1="{_f(x(tick))}" y1="{TOP - 4}.0" x2="{_f(x(tick))}" y2="{bottom}.0"'
            f' class="{css}"/>'
        )
        text = "0" if tick == 0 else f"{tick:+d}"
        out.append(
            f'<text x="{_f(x(tick))}" y="{bottom + 18}.0" class="tick"'
            f' text-anchor="middle">{text}</text>'
        )
        tick += step
    for r, row in enumerate(rows):
        y = TOP + ROW * r + ROW / 2
        out.append(
            f'<text x="{LABEL - 10}.0" y="{_f(y + 4)}" class="label"'
            f' text-anchor="end">{escape(_clip(row.label))}</text>'
        )
        known = [m.value for m in row.marks if m.value is not None]
        if join and len(known) > 1:
            out.append(
                f'<line x1="{_f(x(min(known)))}" y1="{_f(y)}" x2="{_f(x(max(known)))}"'
                f' y2="{_f(y)}" class="join"/>'
            )
        for s, mark in enumerate(row.marks):
            if mark.value is None:
                continue
            colour, shape = COLOURS[s % len(COLOURS)], SHAPES[s % len(SHAPES)]
            if mark.low is not None and mark.high is not None:
                x1, x2 = _f(x(mark.low)), _f(x(mark.high))
                out.append(
                    f'<g stroke="{colour}" class="whisker">'
                    f'<line x1="{x1}" y1="{_f(y)}" x2="{x2}" y2="{_f(y)}"/>'
                    f'<line x1="{x1}" y1="{_f(y - 5)}" x2="{x1}" y2="{_f(y + 5)}"/>'
                    f'<line x1="{x2}" y1="{_f(y - 5)}" x2="{x2}" y2="{_f(y + 5)}"/></g>'
                )
            out.append(_marker(shape, x(mark.value), y, colour))
    if not rows:
        out.append(
            f'<text x="{LABEL}.0" y="{TOP + ROW // 2 + 4}.0" class="label">'
            "No model is scored.</text>"
        )
    out.append("</svg>")
    return "\n".join(out)


def shade(value: float | None) -> str:
    """A table cell's shading class for a Gamut x100: five bands from -100 to 100, "none"
    without a value. The number is always written in the cell; the shade only repeats it."""
    if value is None:
        return "none"
    for limit, name in ((-20, "s0"), (20, "s1"), (50, "s2"), (75, "s3")):
        if value < limit:
            return name
    return "s4"
