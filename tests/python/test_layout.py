"""The Python package's layout: its modules import one another without a
cycle (module-level and function-level imports alike), and Ray is imported
only when the Ray runner runs.

The import graph is read from the source with ``ast`` (nothing is imported):
an edge ``a -> b`` for every ``import``/``from ... import`` anywhere in module
``a`` (inside functions and ``if TYPE_CHECKING:`` blocks too) that names a
module ``b`` of the package. ``from groupfit import x`` is an edge to the
submodule ``groupfit.x`` when there is one, else to the package itself
(``__init__``). The implicit import of a parent package (importing
``groupfit.x`` runs ``groupfit/__init__.py`` first) is not an edge: the
package's ``__init__`` is its facade and imports the modules below it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "groupfit"


def module_names(pkg: Path) -> dict[str, Path]:
    """Every module of the package (``.py`` and the native module's ``.pyi``), by dotted name."""
    mods: dict[str, Path] = {}
    for f in sorted(pkg.rglob("*.py*")):
        if f.suffix not in (".py", ".pyi"):
            continue
        parts = list(f.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods.setdefault(".".join(parts), f)
    return mods


def import_graph(pkg: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: {package modules it imports}}``, from the source."""
    mods = module_names(pkg)
    root = pkg.name
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        if path.suffix != ".py":
            continue  # a stub imports nothing at run time
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    base_parts = here[: len(here) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in mods else base)
            for t in targets:
                # `import groupfit.a.b` names groupfit.a.b (or the nearest module above it).
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and (t == root or t.startswith(root + ".")) and t != name:
                    graph[name].add(t)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                found = visit(n)
                if found:
                    return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            found = visit(m)
            if found:
                return found
    return None


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    # The graph is really read: the edges this layout is about are there.
    assert "groupfit.runners" in graph["groupfit._model"]
    assert "groupfit.runners" in graph["groupfit"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
    # The runners return the engine's bundle; only `_model` knows GroupedModel.
    for m in ("groupfit.runners", "groupfit.ray_runner"):
        assert "groupfit._model" not in graph[m], f"{m} imports groupfit._model"


def test_the_cycle_check_finds_a_cycle(tmp_path):
    """The checker itself: a package whose modules import each other inside
    functions (the circle this test guards against) is reported."""
    pkg = tmp_path / "groupfit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from groupfit.a import f\n")
    (pkg / "a.py").write_text("def f():\n    from groupfit.b import g\n    return g()\n")
    (pkg / "b.py").write_text("from groupfit import c\n")
    (pkg / "c.py").write_text("def h():\n    from . import a\n")
    cycle = find_cycle(import_graph(pkg))
    assert cycle == ["groupfit.a", "groupfit.b", "groupfit.c", "groupfit.a"]


def test_ray_is_imported_only_when_the_ray_runner_runs():
    code = (
        "import sys\n"
        "import pyarrow as pa\n"
        "import groupfit as gf\n"
        "t = pa.table({'g': ['a'] * 20 + ['b'] * 20, 'f0': [float(i % 7) for i in range(40)],"
        " 'y': [float(i % 5) for i in range(40)]})\n"
        "m = gf.fit(t, by='g', target='y', runner='native')\n"
        "assert m.runner_info == {}, m.runner_info\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
        "assert 'groupfit.ray_runner' not in sys.modules, 'groupfit.ray_runner imported'\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GROUPFIT_RUNNER"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
