"""compile_rubric FILE.json: JSON or a table on stdout; exit status 2 and every problem on
stderr for a file it cannot use."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from rubrics.tests.test_compiler import document, fact, flexible, process, strict

VALID = document(
    fact(snippets=["s1"]),
    strict(),
    flexible(),
    process(steps=[("Marinate", True), ("Flambé", False), ("Brown", True)]),
)


def run(capsys, path: Path, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        call_command("compile_rubric", str(path), *args)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture
def rubric_file(tmp_path):
    def write(content: object, name: str = "rubric.json") -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
        return path

    return write


def test_prints_the_checks_as_json(capsys, rubric_file):
    code, out, err = run(capsys, rubric_file(VALID))
    assert (code, err) == (0, "")
    checks = json.loads(out)["checks"]
    assert [check["id"] for check in checks] == [
        "I1",
        "I2.item1",
        "I2.item2",
        "I2.item3",
        "I3.base1",
        *(f"I3.opt{k}" for k in range(1, 8)),
        "I4.step1",
        "I4.step2",
        "I4.step3",
        "I4.seq_required",
        "I4.seq_all",
    ]
    assert checks[0] == {
        "id": "I1",
        "kind": "fact",
        "tier": "answer_critical",
        "secondary": False,
        "source": "I1",
        "rule": "fact",
        "text": "The response conveys this fact: Beef bourguignon is a stew from Burgundy.",
        "snippets": ["s1"],
    }
    assert checks[4]["threshold"] == 2 and len(checks[4]["options"]) == 7
    assert checks[-1]["steps"] == ["Marinate", "Flambé", "Brown"]
    assert "jambon persillé" in out  # readable text, not \u escapes


def test_prints_a_table_for_people(capsys, rubric_file, monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    code, out, _ = run(capsys, rubric_file(VALID), "--format", "table")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "TIER", "KIND", "2nd", "TEXT"]
    assert max(map(len, lines)) <= 90
    opt1 = next(line for line in lines if line.startswith("I3.opt1 "))
    assert opt1.split()[:4] == ["I3.opt1", "valuable", "option", "*"]
    base1 = next(line for line in lines if line.startswith("I3.base1 "))
    assert base1.split()[:4] == ["I3.base1", "answer_critical", "coverage", "The"]
    # a wrapped text continues under the text column
    continued = lines[lines.index(base1) + 1]
    assert continued.startswith(" " * 40) and continued.strip()
    assert lines[-1] == ("17 checks: 5 answer_critical, 10 valuable, 2 context; 9 secondary (*)")


def test_invalid_document_exits_2_with_every_problem_and_its_path(capsys, rubric_file):
    path = rubric_file(document(fact(tier="urgent"), flexible("I1", baseline=[9])))
    code, out, err = run(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f'{path}: items[0].tier: unknown tier "urgent"; expected one of answer_critical, '
        "valuable, context",
        f'{path}: items[1].id: duplicate id "I1" (also at items[0].id)',
        f"{path}: items[1].baseline[0]: 9 exceeds the 7 options",
        "3 problem(s); nothing was compiled.",
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (
            "{not json",
            "not JSON: Expecting property name enclosed in double quotes at line 1, column 2",
        ),
        (b"\xff\xfe{}", "not UTF-8 text (byte 0)"),
        ("[1, 2]", "document: expected an object, got a list"),
    ],
)
def test_unusable_file_exits_2(capsys, rubric_file, content, problem):
    path = rubric_file(content)
    code, out, err = run(capsys, path)
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == f"{path}: {problem}"


def test_missing_file_exits_2(capsys, tmp_path):
    code, out, err = run(capsys, tmp_path / "nowhere.json")
    assert (code, out) == (2, "")
    assert (
        err.splitlines()[0] == f"{tmp_path / 'nowhere.json'}: cannot read: No such file or "
        "directory"
    )


def test_help_explains_the_input_format(capsys):
    with pytest.raises(SystemExit):
        call_command("compile_rubric", "--help")
    out = capsys.readouterr().out
    for fragment in (
        '"schema_version": 1',
        "flexible_list  topic, options",
        "baseline",
        'steps: [{"text", "required": true|false}]',
        "answer_critical",
        "--format {json,table}",
        "Exit status 2",
    ):
        assert fragment in out


def test_from_the_command_line(tmp_path):
    """The real exit status, through manage.py."""
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document(fact(statement=""))))
    result = subprocess.run(
        [sys.executable, "manage.py", "compile_rubric", str(path)],
        cwd=settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert f"{path}: items[0].statement: must not be empty" in result.stderr.splitlines()
