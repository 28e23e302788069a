"""manage.py question_diversity [--scope final|candidates|both] [--top N] [--json]"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser

from annotation.analysis.diversity_report import SCOPES, diversity_report


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _num(value) -> str:
    return "-" if value is None else f"{value:.2f}"


class Command(BaseCommand):
    help = (
        "How far the questions cluster into templates: the number of templates, the share of "
        "the top 5 and top 20, distinct opening trigrams and the entropy of the template "
        "sizes, overall, per domain and (final questions) per guard prompt version, with the "
        "largest templates and examples. The same "
        "figures as the /diversity/ page and GET /api/diversity/."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--scope",
            choices=[*SCOPES, "both"],
            default="both",
            help="final questions, all candidates, or both (default)",
        )
        parser.add_argument(
            "--top",
            type=int,
            default=10,
            help="how many of the largest templates to print (default 10)",
        )
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print the report as JSON"
        )

    def handle(self, *args, scope: str, top: int, as_json: bool, **options) -> None:
        scopes = list(SCOPES) if scope == "both" else [scope]
        reports = {name: diversity_report(name) for name in scopes}
        if as_json:
            self.stdout.write(json.dumps(reports if scope == "both" else reports[scope], indent=1))
            return
        for name, report in reports.items():
            self._print(SCOPES[name], report, max(top, 0))

    def _print(self, label: str, report: dict, top: int) -> None:
        write = self.stdout.write
        write(f"== {label}")
        rows = [{"domain": "all", **report["overall"]}, *report["domains"]]
        write(
            f"{'domain':<24}{'questions':>10}{'templates':>10}{'top5':>7}{'top20':>7}"
            f"{'trigrams':>10}{'entropy':>9}{'norm.':>7}"
        )
        for row in rows:
            write(
                f"{row['domain'][:23]:<24}{row['questions']:>10}{row['templates']:>10}"
                f"{_pct(row['top5_share']):>7}{_pct(row['top20_share']):>7}"
                f"{row['opening_trigrams']:>10}{_num(row['entropy_bits']):>9}"
                f"{_num(row['normalized_entropy']):>7}"
            )
        if report.get("guard_prompts"):
            write("per guard prompt (which prompt chose the question), on the same templates:")
        for row in report.get("guard_prompts") or []:
            write(
                f"{row['guard_prompt']}: {row['questions']} question(s), "
                f"{row['templates']} template(s), top 5 {_pct(row['top5_share'])}, "
                f"top 20 {_pct(row['top20_share'])}, {row['opening_trigrams']} opening "
                f"trigrams, entropy {_num(row['entropy_bits'])} "
                f"(normalized {_num(row['normalized_entropy'])})"
            )
        sizes = ", ".join(f"{s['size']}: {s['templates']}" for s in report["size_distribution"])
        write(f"templates by size (questions per template: templates): {sizes}")
        for template in report["templates"][:top]:
            write(
                f"#{template['rank']} {template['size']} ({_pct(template['share'])}) "
                f"{template['skeleton']}"
            )
            for example in template["examples"]:
                write(f"    {example['key']}: {example['text']}")
        write("")
