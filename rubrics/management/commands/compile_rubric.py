"""compile_rubric FILE.json: a meta-rubric in, its binary checklist out (JSON or a table)."""

import argparse
import json
import shutil
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any, NoReturn

from django.core.management.base import BaseCommand, DjangoHelpFormatter

from rubrics.compiler import TIERS, Check, MetaRubricInvalid, compile_document, to_json


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's option order, but the description keeps its line breaks: the input format
    below is a layout, not prose."""


class Command(BaseCommand):
    help = """Compile a meta-rubric into its flat binary checklist.

Input: one JSON object (schema_version 1):
  {"schema_version": 1, "question": "...", "entity": "...",
   "snippets": [{"id", "url", "title"?, "text"}, ...],
   "items": [ITEM, ...]}
ITEM: {"id", "type", "tier", "snippets"?: [snippet ids], "note"?} and, by type:
  fact           statement
  strict_list    topic, items: [strings], meta_insights?
  flexible_list  topic, options: [>= 2 strings], baseline: [1 or 2 counts],
                 extra_thresholds?: [counts], meta_insights?
  process        topic, steps: [{"text", "required": true|false}], meta_insights?
  relationship   entity, relation, aspects: [strings]
A meta-insight: {"id", "statement", "tier", "snippets"?}. tier: answer_critical,
valuable or context. Ids: letters, digits, '-' and '_', unique across items and
meta-insights. The exact rules: shared/spec/rubric-method.md; the JSON Schema:
rubrics.compiler.MetaRubric.model_json_schema().

Output: {"checks": [...]} on stdout, or a table with --format table.
Exit status 2 when the file cannot be read, is not JSON, or is not a valid
meta-rubric; every problem goes to stderr, one a line, as FILE: PATH: MESSAGE."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path, metavar="FILE.json", help="the meta-rubric")
        parser.add_argument(
            "--format",
            choices=["json", "table"],
            default="json",
            help='json (default): {"checks": [...]}; table: for people',
        )

    def handle(self, *args, file: Path, format: str, **options):
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            self._fail(file, [f"cannot read: {exc.strerror or exc}"])
        except UnicodeDecodeError as exc:
            self._fail(file, [f"not UTF-8 text (byte {exc.start})"])
        except json.JSONDecodeError as exc:
            self._fail(file, [f"not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"])
        try:
            checks = compile_document(document)
        except MetaRubricInvalid as exc:
            self._fail(file, [str(problem) for problem in exc.problems])
        if format == "table":
            self.stdout.write(render_table(checks, shutil.get_terminal_size((100, 24)).columns))
        else:
            self.stdout.write(json.dumps(to_json(checks), indent=2, ensure_ascii=False))

    def _fail(self, file: Path, problems: list[str]) -> NoReturn:
        for problem in problems:
            self.stderr.write(f"{file}: {problem}")
        self.stderr.write(f"{len(problems)} problem(s); nothing was compiled.")
        sys.exit(2)


def render_table(checks: list[Check], width: int) -> str:
    """Id, tier, kind, a star for secondary checks, and the text wrapped in what is left of
    the terminal, then a count per tier."""
    id_width = max([len("ID"), *(len(check.id) for check in checks)])
    tier_width = max(len(tier) for tier in TIERS)
    kind_width = len("relation_aspect")
    indent = id_width + tier_width + kind_width + 4 + 3  # three gaps and the star column
    text_width = max(width - indent - 1, 30)  # never squeeze the text below a readable width
    lines = [f"{'ID':<{id_width}} {'TIER':<{tier_width}} {'KIND':<{kind_width}} 2nd TEXT"]
    for check in checks:
        wrapped = textwrap.wrap(check.text, text_width) or [""]
        star = "*" if check.secondary else " "
        lines.append(
            f"{check.id:<{id_width}} {check.tier:<{tier_width}} "
            f"{check.kind:<{kind_width}}  {star}  {wrapped[0]}"
        )
        lines.extend(" " * indent + line for line in wrapped[1:])
    tiers = Counter(check.tier for check in checks)
    secondary = sum(check.secondary for check in checks)
    lines.append("")
    lines.append(
        f"{len(checks)} checks: "
        + ", ".join(f"{tiers[tier]} {tier}" for tier in TIERS)
        + f"; {secondary} secondary (*)"
    )
    return "\n".join(lines)
