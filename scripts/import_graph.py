"""The picture of the package's imports, and the rules it must keep.

    python scripts/import_graph.py            # the package-level graph as Graphviz DOT, then any cycles
    python scripts/import_graph.py --modules  # the same, module by module

Every import counts, function-level ones too (they are dependencies all the same); imports under
``if TYPE_CHECKING:`` do not (they never run). tests/test_architecture.py checks the same graph.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "streaming"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST):
    """Every node except what sits under ``if TYPE_CHECKING:``."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                todo.extend(child.orelse)
                continue
            todo.append(child)


def imports() -> dict[str, set[str]]:
    """Module -> every module (ours or outside) it imports."""
    paths = sorted(PACKAGE.rglob("*.py"))
    ours = {module_name(p) for p in paths}
    out: dict[str, set[str]] = {}
    for path in paths:
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # "from package import submodule" depends on the submodule, not on the package's __init__
                subs = {f"{node.module}.{a.name}" for a in node.names} & ours
                found.update(subs)
                if len(subs) < len(node.names):
                    found.add(node.module)
        out[module_name(path)] = found
    return {m: {i for i in found if i in ours or not i.startswith("streaming")} - {m} for m, found in out.items()}


def unit(module: str) -> str:
    """The package a module belongs to (streaming.brokers.local.jars -> streaming.brokers); a top-level
    module is its own unit."""
    parts = module.split(".")
    return ".".join(parts[:2])


def graph(by_package: bool) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for m, found in imports().items():
        src = unit(m) if by_package else m
        g.setdefault(src, set())
        for i in found:
            if i.startswith("streaming"):
                dst = unit(i) if by_package else i
                if dst != src and dst != "streaming":
                    g[src].add(dst)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def dot(g: dict[str, set[str]]) -> str:
    lines = ["digraph streaming {", "  rankdir=LR;"]
    lines += [f'  "{a}" -> "{b}";' for a in sorted(g) for b in sorted(g[a])]
    return "\n".join(lines + ["}"])


def main() -> int:
    g = graph(by_package="--modules" not in sys.argv)
    print(dot(g))
    found = cycles(g)
    for c in found:
        print("cycle: " + " <-> ".join(c), file=sys.stderr)
    print(f"{len(g)} nodes, {sum(map(len, g.values()))} edges, {len(found)} cycles", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
