"""No import circle between the resolver and the architecture formulas, or between the
profiler (``traincast.features``) and the model zoo (``traincast.zoo``).

The graph is built from the source: every import a module runs when it is loaded (its
top-level statements, ``if TYPE_CHECKING:`` blocks included; imports inside functions are
not edges), with each module counted as its top-level part of ``traincast`` (``traincast.zoo.hf``
-> ``zoo``), so a circle through any modules of two packages shows.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "traincast"
PAIRS = [("resolve", "architectures"), ("features", "zoo")]


def _part(module: str) -> str | None:
    """``traincast.zoo.hf`` -> ``zoo``; None outside the package."""
    bits = module.split(".")
    return bits[1] if bits[0] == "traincast" and len(bits) > 1 else None


def _load_time_imports(tree: ast.Module, package: str) -> set[str]:
    """Modules imported by the statements that run at import time (not function bodies)."""
    out: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the package this module is in
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                out.add(f"{base}.{node.module}" if node.module else base)
            elif node.module == "traincast":  # from traincast import zoo: the part named
                out |= {f"traincast.{a.name}" for a in node.names}
            elif node.module:
                out.add(node.module)
        elif isinstance(node, ast.If | ast.Try | ast.With | ast.ClassDef):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []) or []:
                    todo.extend(child.body if isinstance(child, ast.ExceptHandler) else [child])
    return out


def _graph() -> dict[str, set[str]]:
    """Top-level part of ``traincast`` -> the parts its modules import at load time."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        is_pkg = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_pkg else parts)
        package = module if is_pkg else module.rsplit(".", 1)[0]
        me = _part(module)
        if me is None:
            continue
        for target in _load_time_imports(ast.parse(path.read_text()), package):
            other = _part(target)
            if other and other != me:
                graph.setdefault(me, set()).add(other)
    return graph


def _reaches(graph: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def test_the_graph_sees_known_edges() -> None:
    # the walk must find real imports, or the circle test below would pass on an empty graph
    graph = _graph()
    assert "architectures" in graph["resolve"]  # resolve.py: from traincast.architectures ...
    assert "features" in graph["zoo"]           # zoo/graph.py registers its op in features.ops
    assert "hardware" in graph["resolve"]
    assert "kernels" in graph["compute"]        # compute.py: from traincast import kernels


@pytest.mark.parametrize(("a", "b"), PAIRS)
def test_no_import_circle(a: str, b: str) -> None:
    graph = _graph()
    assert not (_reaches(graph, a, b) and _reaches(graph, b, a)), \
        f"traincast.{a} and traincast.{b} import each other (directly or through others)"


@pytest.mark.parametrize(("a", "b"), [("traincast.resolve", "traincast.architectures"),
                                      ("traincast.architectures", "traincast.resolve"),
                                      ("traincast.zoo.hub", "traincast.features.ops"),
                                      ("traincast.features.ops", "traincast.zoo.hub")])
def test_each_order_imports_in_a_fresh_interpreter(a: str, b: str) -> None:
    r = subprocess.run([sys.executable, "-c", f"import {a}, {b}"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
