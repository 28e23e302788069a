"""Roles and domain errors have one home, core/: no module reaches them through annotation
(annotation.access is gone; annotation.services raises core's errors but does not hand them
out)."""

from __future__ import annotations

import ast
from pathlib import Path

import core.access
import core.errors

ROOT = Path(__file__).resolve().parent.parent
CORE_NAMES = {
    name
    for module in (core.access, core.errors)
    for name, value in vars(module).items()
    if not name.startswith("_")
    and (getattr(value, "__module__", None) == module.__name__ or name.isupper())
}


def _sources():
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] in (".venv", "var", "node_modules") or "vendor" in parts:
            continue
        yield path


def _services_aliases(tree: ast.Module, package: str) -> set[str]:
    """The names a module binds annotation.services to."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            absolute = node.module == "annotation" and node.level == 0
            relative = node.level == 1 and node.module is None and package == "annotation"
            if absolute or relative:
                aliases |= {a.asname or a.name for a in node.names if a.name == "services"}
        elif isinstance(node, ast.Import):
            aliases |= {
                a.asname for a in node.names if a.name == "annotation.services" and a.asname
            }
    return aliases


def test_roles_and_errors_are_imported_from_core_only():
    assert not (ROOT / "annotation" / "access.py").exists()
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)
        package = where.parts[0]
        aliases = _services_aliases(tree, package)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = {a.name for a in node.names}
                if module == "annotation.access" or (module == "annotation" and "access" in names):
                    found.append(f"{where}:{node.lineno} imports annotation.access")
                if module == "annotation.services" and names & CORE_NAMES:
                    found.append(f"{where}:{node.lineno} imports {names & CORE_NAMES} from it")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr in CORE_NAMES
            ):
                found.append(f"{where}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert found == []
