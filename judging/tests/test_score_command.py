"""score_verdicts FILE.jsonl: figures checked against an independent computation, the --json
shape, options, and exit status 2 with every bad line named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

VALUE = {"meets": 1.0, "partially_meets": 0.5, "missing": 0.0, "contradicts": -2.0}
WEIGHT = {"answer_critical": 0.6, "valuable": 0.3, "context": 0.1}


def line(question, model, setting, check, tier, verdict) -> dict:
    return {
        "question": question,
        "model": model,
        "setting": setting,
        "check": check,
        "tier": tier,
        "verdict": verdict,
    }


# (question, model, setting) -> tier -> verdicts
DATA = {
    ("q1", "alpha", "multimodal"): {
        "answer_critical": ["meets", "meets", "meets", "missing"],
        "valuable": ["meets", "contradicts"],
    },
    ("q2", "alpha", "multimodal"): {
        "answer_critical": ["partially_meets"],
        "context": ["meets", "missing"],
    },
    ("q1", "alpha", "text_only"): {
        "answer_critical": ["meets"],
        "valuable": ["meets"],
        "context": ["contradicts"],
    },
    ("q2", "alpha", "text_only"): {"valuable": ["contradicts", "contradicts"]},
    ("q1", "beta", "multimodal"): {"answer_critical": ["missing", "contradicts"]},
}


def records() -> list[dict]:
    return [
        line(q, m, s, f"{tier}-{k}", tier, verdict)
        for (q, m, s), tiers in DATA.items()
        for tier, verdicts in tiers.items()
        for k, verdict in enumerate(verdicts)
    ]


def independent(lam=0.5, mu=-2.0, weights=WEIGHT) -> dict[tuple[str, str], dict]:
    """The spec's formulas written out again, sharing no code with judging.verdicts.scoring."""
    value = {**VALUE, "partially_meets": lam, "contradicts": mu}
    per_pair: dict[tuple[str, str], list[tuple[float, dict]]] = {}
    for (_, model, setting), tiers in DATA.items():
        scores = {}
        for tier, verdicts in tiers.items():
            numerator = sum(value[v] for v in verdicts)
            denominator = sum(abs(mu) if v == "contradicts" else 1 for v in verdicts)
            scores[tier] = numerator / denominator
        gamut = sum(weights[t] * s for t, s in scores.items()) / sum(weights[t] for t in scores)
        per_pair.setdefault((model, setting), []).append((gamut, scores))
    result = {}
    for pair, items in per_pair.items():
        tiers = {}
        for tier in WEIGHT:
            values = [scores[tier] for _, scores in items if tier in scores]
            tiers[tier] = 100 * sum(values) / len(values) if values else None
        result[pair] = {
            "gamut": 100 * sum(g for g, _ in items) / len(items),
            "tiers": tiers,
            "questions": len(items),
        }
    return result


def run(capsys, path: Path, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        call_command("score_verdicts", str(path), *args)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture
def jsonl(tmp_path):
    def write(lines: list, name: str = "verdicts.jsonl") -> Path:
        path = tmp_path / name
        path.write_text(
            "\n".join(item if isinstance(item, str) else json.dumps(item) for item in lines) + "\n"
        )
        return path

    return write


def test_json_figures_match_an_independent_computation(capsys, jsonl):
    code, out, err = run(capsys, jsonl(records()), "--json")
    assert (code, err) == (0, "")
    results = json.loads(out)["results"]
    assert [(r["model"], r["setting"]) for r in results] == [
        ("alpha", "multimodal"),
        ("alpha", "text_only"),
        ("beta", "multimodal"),
    ]
    expected = independent()
    for r in results:
        assert set(r) == {"model", "setting", "gamut", "tiers", "questions", "missing"}
        want = expected[(r["model"], r["setting"])]
        assert r["gamut"] == pytest.approx(want["gamut"])
        assert r["tiers"] == {
            t: pytest.approx(v) if v is not None else None for t, v in want["tiers"].items()
        }
        assert r["questions"] == want["questions"]
    # beta answered only q1 of the file's two questions: reported, not scored as 0
    assert [r["missing"] for r in results] == [0, 0, 1]
    assert results[2]["gamut"] == pytest.approx(100 * (0 - 2) / (1 + 2))
    # q1 of alpha multimodal: s_AC = 0.75 and s_V = -1/3 by the spec's formula
    assert results[0]["tiers"]["valuable"] == pytest.approx(100 * -1 / 3)


def test_table_for_people(capsys, jsonl):
    code, out, err = run(capsys, jsonl(records()))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == ["MODEL", "SETTING", "GAMUT", "AC", "V", "C", "QUESTIONS", "MISSING"]
    expected = independent()
    for row, pair in zip(lines[1:4], sorted(expected), strict=True):
        want = expected[pair]
        assert row.split() == [
            *pair,
            f"{want['gamut']:.1f}",
            *(f"{v:.1f}" if v is not None else "-" for v in want["tiers"].values()),
            str(want["questions"]),
            "1" if pair[0] == "beta" else "0",
        ]
    assert "lambda 0.5, mu -2, weights AC,V,C 0.6,0.3,0.1" in out


def test_options_change_the_figures(capsys, jsonl):
    path = jsonl(records())
    code, out, err = run(
        capsys, path, "--json", "--lambda", "0.25", "--mu", "-1", "--weights", "1,1,2"
    )
    assert (code, err) == (0, "")
    expected = independent(0.25, -1.0, {"answer_critical": 1, "valuable": 1, "context": 2})
    for r in json.loads(out)["results"]:
        assert r["gamut"] == pytest.approx(expected[(r["model"], r["setting"])]["gamut"])
    _, default_out, _ = run(capsys, path, "--json")
    assert default_out != out


def test_integer_ids_and_blank_lines_are_accepted(capsys, jsonl):
    path = jsonl(
        [line(7, "m", "s", 1, "context", "meets"), "", line("7", "m", "s", 2, "context", "missing")]
    )
    code, out, err = run(capsys, path, "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["results"] == [
        {
            "model": "m",
            "setting": "s",
            "gamut": 50.0,
            "questions": 1,
            "missing": 0,
            "tiers": {"answer_critical": None, "valuable": None, "context": 50.0},
        }
    ]


def test_every_bad_line_is_named_and_nothing_is_printed(capsys, jsonl):
    good = line("q1", "m", "s", "c1", "valuable", "meets")
    path = jsonl(
        [
            good,  # 1
            "{not json",  # 2
            "[1, 2]",  # 3
            {"question": "q1", "model": "m"},  # 4
            line("q1", "m", "s", "c2", "urgent", "meets"),  # 5
            line("q1", "m", "s", "c3", "valuable", "great"),  # 6
            line("q1", "m", "s", "c1", "valuable", "contradicts"),  # 7: c1 again
            line("q1", "m", "s", "c4", "valuable", "meets"),  # 8
            line("", "m", "s", "c5", "valuable", True),  # 9
            line("q1", "m", "s", "c4", "valuable", "meets"),  # 10: c4 again, same verdict
        ]
    )
    code, out, err = run(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{path}:2: not JSON: Expecting property name enclosed in double quotes at column 2",
        f"{path}:3: expected an object, got a list",
        f"{path}:4: missing field(s) setting, check, tier, verdict",
        f'{path}:5: unknown tier "urgent"; expected one of answer_critical, valuable, context',
        f'{path}:6: unknown verdict "great"; expected one of meets, partially_meets, missing, '
        "contradicts",
        f'{path}:7: check "c1" of question "q1" for model "m", setting "s" already has a '
        "verdict at line 1; one check takes one verdict",
        f'{path}:9: question: expected a non-empty string or an integer, got ""',
        f"{path}:9: verdict: expected a non-empty string, got true",
        f'{path}:10: check "c4" of question "q1" for model "m", setting "s" already has a '
        "verdict at line 8; one check takes one verdict",
        "9 problem(s); nothing was scored.",
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"", "no verdicts"),
        (b"\n  \n", "no verdicts"),
        (b"\xff\xfe", "not UTF-8 text (byte 0)"),
    ],
)
def test_unusable_file_exits_2(capsys, tmp_path, content, problem):
    path = tmp_path / "v.jsonl"
    path.write_bytes(content)
    code, out, err = run(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == f"{path}: {problem}"


def test_missing_file_exits_2(capsys, tmp_path):
    code, out, err = run(capsys, tmp_path / "nowhere.jsonl")
    assert (code, out) == (2, "")
    assert (
        err.splitlines()[0] == f"{tmp_path / 'nowhere.jsonl'}: cannot read: No such file "
        "or directory"
    )


@pytest.mark.parametrize(
    ("args", "problems"),
    [
        (["--lambda", "x"], ["--lambda: not a number: 'x'"]),
        (
            ["--mu", "-1", "--lambda", "1"],
            ["invalid scoring settings: lambda must lie strictly between 0 and 1, got 1.0"],
        ),
        (["--mu", "0"], ["invalid scoring settings: mu must be negative, got 0.0"]),
        (["--mu", "nan"], ["invalid scoring settings: mu must be negative, got nan"]),
        (["--weights", "1,2"], ["--weights: expected 3 numbers AC,V,C, got '1,2'"]),
        (
            ["--weights", "a,b,c", "--mu", "y"],
            ["--mu: not a number: 'y'", "--weights: expected 3 numbers AC,V,C, got 'a,b,c'"],
        ),
        (["--weights", "0,0,0"], ["invalid scoring settings: weights must not all be 0"]),
        (
            ["--weights", "1,-1,1"],
            ["invalid scoring settings: weights must be finite and >= 0, got (1.0, -1.0, 1.0)"],
        ),
    ],
)
def test_bad_options_exit_2(capsys, jsonl, args, problems):
    code, out, err = run(capsys, jsonl(records()), *args)
    assert (code, out) == (2, "")
    assert err.splitlines() == [*problems, f"{len(problems)} problem(s); nothing was scored."]


def test_help_explains_the_format(capsys):
    with pytest.raises(SystemExit):
        call_command("score_verdicts", "--help")
    out = capsys.readouterr().out
    for fragment in (
        '"question"',
        '"verdict": "meets"|"partially_meets"|"missing"|"contradicts"',
        "answer_critical",
        "--lambda X",
        "--mu Y",
        "--weights AC,V,C",
        "--json",
        "Exit status 2",
        "x100",
        "missing",
    ):
        assert fragment in out
