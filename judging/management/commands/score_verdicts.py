"""score_verdicts FILE.jsonl: judges' verdicts in, Gamut scores per (model, setting) out."""

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, CommandParser, DjangoHelpFormatter

from judging.verdicts.scoring import (
    MISSING,
    TIERS,
    VERDICTS,
    ModelScore,
    ScoringSettings,
    SettingsInvalid,
    VerdictCounts,
    model_score,
    response_score,
)

FIELDS = ("question", "model", "setting", "check", "tier", "verdict")
TIER_LABELS = {"answer_critical": "AC", "valuable": "V", "context": "C"}


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, but the description keeps its line breaks."""


class Command(BaseCommand):
    help = """Score judges' verdicts: the Gamut score per (model, setting).

Input: JSON Lines, one verdict a line:
  {"question": "...", "model": "...", "setting": "...", "check": "...",
   "tier": "answer_critical"|"valuable"|"context",
   "verdict": "meets"|"partially_meets"|"missing"|"contradicts"}
question and check are strings or integers (1 and "1" are the same); model and
setting are non-empty strings. Blank lines are skipped. Each check of a
(question, model, setting) takes exactly one verdict.

Scores (shared/spec/rubric-method.md, section 4): a verdict scores 1, lambda, 0
or mu; a tier scores (M + lambda*P + mu*C) / (M + P + S + |mu|*C); a response's
Gamut score is the mean of its tier scores weighted AC,V,C and renormalised over
the tiers it has checks in.

Output, per (model, setting), sorted by model then setting: the Gamut score x100
(mean over its questions), each tier's score x100 (mean over the questions with
checks in that tier; "-" for none), the number of questions scored and the
number missing (questions of the file with no verdict for that model and
setting: reported, never scored as 0). With --json:
  {"results": [{"model", "setting", "gamut", "tiers": {"answer_critical",
   "valuable", "context"}, "questions", "missing"}, ...]}
scores x100, full precision, a tier with no question null.

Exit status 2, nothing on stdout, when the file cannot be read or a line is bad
(not JSON, not an object, a missing field, an unknown tier or verdict, a check
given twice): every problem goes to stderr as FILE:LINE: MESSAGE. Also 2 for a
bad --lambda, --mu or --weights."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path, metavar="FILE.jsonl", help="the verdicts")
        parser.add_argument(
            "--json", dest="as_json", action="store_true", help="JSON instead of a table"
        )
        parser.add_argument(
            "--lambda",
            dest="lambda_",
            metavar="X",
            default="0.5",
            help="score of partially_meets, 0 < X < 1 (default 0.5)",
        )
        parser.add_argument(
            "--mu", metavar="Y", default="-2", help="score of contradicts, Y < 0 (default -2)"
        )
        parser.add_argument(
            "--weights",
            metavar="AC,V,C",
            default="0.6,0.3,0.1",
            help="tier weights, >= 0 and not all 0 (default 0.6,0.3,0.1)",
        )

    def handle(
        self,
        *args: Any,
        file: Path,
        as_json: bool,
        lambda_: str,
        mu: str,
        weights: str,
        **options: Any,
    ) -> None:
        settings = self._settings(lambda_, mu, weights)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            self._fail([f"{file}: cannot read: {exc.strerror or exc}"])
        except UnicodeDecodeError as exc:
            self._fail([f"{file}: not UTF-8 text (byte {exc.start})"])
        verdicts, problems = parse_verdicts(text)
        if problems:
            self._fail([f"{file}:{problem}" for problem in problems])
        if not verdicts:
            self._fail([f"{file}: no verdicts"])
        results = score(verdicts, settings)
        if as_json:
            self.stdout.write(
                json.dumps(
                    {
                        "results": [
                            {
                                "model": model,
                                "setting": setting,
                                "gamut": _x100(result.gamut),
                                "tiers": {tier: _x100(result.tiers.get(tier)) for tier in TIERS},
                                "questions": result.scored,
                                "missing": result.missing,
                            }
                            for (model, setting), result in results.items()
                        ]
                    },
                    indent=2,
                    ensure_ascii=False,
                )
            )
        else:
            self.stdout.write(render_table(results, settings))

    def _settings(self, lambda_: str, mu: str, weights: str) -> ScoringSettings:
        problems = []
        numbers: dict[str, Any] = {}
        for name, raw in (("lambda", lambda_), ("mu", mu)):
            try:
                numbers[name] = float(raw)
            except ValueError:
                problems.append(f"--{name}: not a number: {raw!r}")
        try:
            numbers["weights"] = tuple(float(part) for part in weights.split(","))
            if len(numbers["weights"]) != len(TIERS):
                problems.append(f"--weights: expected 3 numbers AC,V,C, got {weights!r}")
        except ValueError:
            problems.append(f"--weights: expected 3 numbers AC,V,C, got {weights!r}")
        if not problems:
            try:
                return ScoringSettings(numbers["lambda"], numbers["mu"], numbers["weights"])
            except SettingsInvalid as exc:
                problems.append(f"invalid scoring settings: {exc}")
        self._fail(problems)

    def _fail(self, problems: list[str]) -> NoReturn:
        for problem in problems:
            self.stderr.write(problem)
        self.stderr.write(f"{len(problems)} problem(s); nothing was scored.")
        sys.exit(2)


Key = tuple[str, str, str]  # (model, setting, question)


def parse_verdicts(text: str) -> tuple[dict[Key, dict[str, list[str]]], list[str]]:
    """The verdicts of a JSON Lines text, grouped as (model, setting, question) -> tier ->
    [verdict, ...], and every problem as "LINE: MESSAGE" (line numbers from 1)."""
    grouped: dict[Key, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    seen: dict[tuple[str, str, str, str], int] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{number}: not JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(record, dict):
            problems.append(f"{number}: expected an object, got {_kind(record)}")
            continue
        line_problems = []
        missing = [name for name in FIELDS if name not in record]
        if missing:
            line_problems.append(f"missing field(s) {', '.join(missing)}")
        values: dict[str, str] = {}
        for name in FIELDS:
            if name not in record:
                continue
            value = record[name]
            ids_ok = (
                name in ("question", "check")
                and isinstance(value, int)
                and not isinstance(value, bool)
            )
            if ids_ok:
                values[name] = str(value)
            elif isinstance(value, str) and value:
                values[name] = value
            else:
                line_problems.append(
                    f"{name}: expected a non-empty string"
                    f"{' or an integer' if name in ('question', 'check') else ''}"
                    f", got {json.dumps(value)}"
                )
        if values.get("tier") is not None and values["tier"] not in TIERS:
            line_problems.append(
                f'unknown tier "{values["tier"]}"; expected one of {", ".join(TIERS)}'
            )
        if values.get("verdict") is not None and values["verdict"] not in VERDICTS:
            line_problems.append(
                f'unknown verdict "{values["verdict"]}"; expected one of {", ".join(VERDICTS)}'
            )
        if line_problems:
            problems.extend(f"{number}: {problem}" for problem in line_problems)
            continue
        check = (values["model"], values["setting"], values["question"], values["check"])
        if check in seen:
            problems.append(
                f'{number}: check "{check[3]}" of question "{check[2]}" for model '
                f'"{check[0]}", setting "{check[1]}" already has a verdict at line '
                f"{seen[check]}; one check takes one verdict"
            )
            continue
        seen[check] = number
        grouped[check[:3]][values["tier"]].append(values["verdict"])
    return grouped, problems


def score(
    verdicts: dict[Key, dict[str, list[str]]], settings: ScoringSettings
) -> dict[tuple[str, str], ModelScore]:
    """Per (model, setting), sorted: the ModelScore over every question of the file; a
    question with no verdict for a (model, setting) counts as missing there."""
    questions = sorted({question for _, _, question in verdicts})
    pairs = sorted({(model, setting) for model, setting, _ in verdicts})
    results = {}
    for model, setting in pairs:
        responses = []
        for question in questions:
            by_tier = verdicts.get((model, setting, question))
            if by_tier is None:
                responses.append(MISSING)
            else:
                responses.append(
                    response_score(
                        {
                            tier: VerdictCounts.of(tier_verdicts)  # type: ignore[arg-type]
                            for tier, tier_verdicts in by_tier.items()
                        },
                        settings,
                    )
                )
        results[(model, setting)] = model_score(responses)
    return results


def render_table(results: dict[tuple[str, str], ModelScore], settings: ScoringSettings) -> str:
    headers = ["MODEL", "SETTING", "GAMUT", *TIER_LABELS.values(), "QUESTIONS", "MISSING"]
    rows = [
        [
            model,
            setting,
            _fixed(result.gamut),
            *(_fixed(result.tiers.get(tier)) for tier in TIERS),
            str(result.scored),
            str(result.missing),
        ]
        for (model, setting), result in results.items()
    ]
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [
            cell.ljust(widths[i]) if i < 2 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    weights = ",".join(f"{w:g}" for w in settings.weights)
    lines.append(
        f"Scores x100; lambda {settings.lambda_:g}, mu {settings.mu:g}, weights "
        f"AC,V,C {weights}; a tier: mean over the questions with checks in it."
    )
    return "\n".join(lines)


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _fixed(value: float | None) -> str:
    if value is None:
        return "-"
    text = f"{100 * value:.1f}"
    return "0.0" if text == "-0.0" else text


def _kind(value: object) -> str:
    return {
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)
