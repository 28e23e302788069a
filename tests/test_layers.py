"""The layers: roles and domain errors have one home, core/, and no module reaches them through
annotation (annotation.access is gone; annotation's review services raise core's errors but do
not hand them out); our modules import each other without a cycle."""

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


# The modules of annotation's services (and what they share): they raise core's errors.
SERVICE_MODULES = {
    "annotation.candidates",
    "annotation.home.preferences",
    "annotation.images.services",
    "annotation.questions.services",
    "annotation.review.services",
}


def _imported_from(node: ast.ImportFrom, where: Path) -> str:
    """The absolute module an ImportFrom names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = list(where.with_suffix("").parts[:-1])
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _services_aliases(tree: ast.Module, where: Path) -> set[str]:
    """The names a module binds one of the service modules to."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _imported_from(node, where)
            aliases |= {
                a.asname or a.name for a in node.names if f"{module}.{a.name}" in SERVICE_MODULES
            }
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name in SERVICE_MODULES and a.asname}
    return aliases


def test_roles_and_errors_are_imported_from_core_only():
    assert not (ROOT / "annotation" / "access.py").exists()
    found = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(ROOT)
        aliases = _services_aliases(tree, where)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = _imported_from(node, where)
                names = {a.name for a in node.names}
                if module == "annotation.access" or (module == "annotation" and "access" in names):
                    found.append(f"{where}:{node.lineno} imports annotation.access")
                if module in SERVICE_MODULES and names & CORE_NAMES:
                    found.append(f"{where}:{node.lineno} imports {names & CORE_NAMES} from it")
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr in CORE_NAMES
            ):
                found.append(f"{where}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert found == []


def test_the_service_modules_named_here_exist():
    for module in SERVICE_MODULES:
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module


# --- no import cycle between our modules -----------------------------------------------------

OUR_PACKAGES = ("annotation", "judging", "rubrics", "llm", "core", "gamut_site")

# Edges left in a cycle, each with its reason (none today: llm.jobs sends llm.tasks' chunk task
# by its registered name, llm/sending.py).
ALLOWED_EDGES: set[tuple[str, str]] = set()


def _our_modules() -> dict[str, Path]:
    """Our modules by dotted name; tests and migrations are left out (nothing imports them)."""
    modules = {}
    for package in OUR_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "tests" in parts or "migrations" in parts:
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports, at module level or inside a function (a lazy
    import is an import all the same). `from a import b` is an edge to a.b when that is a module,
    else to a."""
    modules = _our_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    base = node.module or ""
                for alias in node.names:
                    targets.append(
                        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    )
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    dotted = alias.name
                    while dotted and dotted not in modules:
                        dotted = dotted.rpartition(".")[0]
                    targets.append(dotted)
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan), as a path that comes back."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    cycles = []
    for group in groups:
        start = min(group)
        # the shortest way back to the start, within the group
        paths = {start: [start]}
        frontier = [start]
        found = None
        while frontier and found is None:
            following = []
            for node in frontier:
                for nxt in sorted(graph[node] & group):
                    if nxt == start:
                        found = [*paths[node], start]
                        break
                    if nxt not in paths:
                        paths[nxt] = [*paths[node], nxt]
                        following.append(nxt)
                if found:
                    break
            frontier = following
        cycles.append(found)
    return sorted(cycles)


def test_the_cycle_finder_names_a_cycle():
    graph = {"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}, "a.w": {"a.x"}}
    assert _cycles(graph) == [["a.x", "a.y", "a.z", "a.x"]]
    assert _cycles({"a.x": {"a.y"}, "a.y": set()}) == []


def test_the_graph_sees_lazy_and_relative_imports():
    graph = import_graph()
    # `from . import services`, at module level
    assert "annotation.review.services" in graph["annotation.review.views"]
    # `from .llm_jobs import auto_generation_launch`, inside a function
    assert "annotation.questions.llm_jobs" in graph["annotation.questions.auto_generation"]
    # `from annotation.models import ...` (a name, not a module: the edge goes to the module)
    assert "annotation.models" in graph["judging.leaderboard.reports"]


def test_our_modules_import_each_other_without_a_cycle():
    graph = import_graph()
    for source, target in ALLOWED_EDGES:
        graph[source].discard(target)
    cycles = [" -> ".join(cycle) for cycle in _cycles(graph)]
    assert cycles == [], "import cycles:\n" + "\n".join(cycles)


def test_core_imports_none_of_our_other_packages():
    """core is the bottom layer: the apps import it, it imports none of them (not even lazily)."""
    found = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == "core"
        for target in sorted(targets)
        if target.split(".")[0] != "core"
    ]
    assert found == []
