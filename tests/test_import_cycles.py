"""No import cycles among the project's own modules, counting every import statement.

The graph is read from the source with `ast`, as /work/shared/tools/import_cycles.py reads it,
so an import inside a function or under `if TYPE_CHECKING:` is an edge too: a cycle hidden that
way still knots two modules together for a reader (and for the next refactoring).

What counts as an edge from module M:
- `import a.b.c` (also `as x`): an edge to `a.b.c`, or to its longest prefix that is a module
  of the project; imports of other libraries are not edges.
- `from X import n` (relative `X` resolved against M): an edge to `X.n` when that is a module,
  otherwise to `X` (the module that defines `n`).
- A package's `__init__` is a module like any other (named after the package): a submodule
  that imports its own package's face while the face imports it is a cycle.
- Not counted: the parent packages that Python imports implicitly for a submodule (importing
  `a.b.c` first imports `a` and `a.b`). They are in `sys.modules` before the submodule's body
  runs, so the only knot they can tie is the submodule reading a name from a parent's face,
  and that is an explicit `from a import name`, which is counted. Counting them would make
  every package whose `__init__` re-exports its submodules (STYLE: "a package has a face")
  look cyclic. The shared tool also adds an edge from `from X import n` to `X` when `X.n` is
  a module; that is such an implied parent import, not counted here. (On this code base both
  give the same edges.) `importlib.import_module` calls are not read.

A cycle is a strongly connected component of more than one module, or a module with an edge
to itself (a module, often a package `__init__`, importing a name from itself).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agent_runtime", "supervisors")

Graph = dict[str, dict[str, int]]
"""module -> {imported module: line of the first import of it}"""


# -- building the graph ----------------------------------------------------------------------


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_from(module: str, is_package: bool, node: ast.ImportFrom) -> str | None:
    """The absolute name of `from ... import` in `module`; None if it climbs above the root."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    keep = len(base) - (node.level - 1)
    if keep < 1:
        return None
    return ".".join(base[:keep] + ([node.module] if node.module else []))


def imported_modules(
    module: str, is_package: bool, tree: ast.AST, modules: Iterable[str]
) -> dict[str, int]:
    """The project modules that `module` imports anywhere in `tree`, with the first line."""
    known = set(modules)

    def owner(name: str) -> str | None:
        while name:
            if name in known:
                return name
            name = name.rpartition(".")[0]
        return None

    edges: dict[str, int] = {}
    for node in ast.walk(tree):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [owner(alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = resolve_from(module, is_package, node)
            if base is None:
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.append(full if full in known else owner(base))
        else:
            continue
        for target in targets:
            if target is not None:
                edges.setdefault(target, node.lineno)
    return edges


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """The import graph of every module in `packages` (directories under `root`)."""
    paths = {
        module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    return {
        module: imported_modules(
            module,
            path.name == "__init__.py",
            ast.parse(path.read_text(encoding="utf-8"), str(path)),
            paths,
        )
        for module, path in paths.items()
    }


# -- finding the cycles ----------------------------------------------------------------------


def find_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every cycle of `graph`: each strongly connected component of more than one node, and
    each node with an edge to itself, as sorted lists, in sorted order. Pure; iterative
    Tarjan, so a deep graph needs no recursion limit. Targets missing from the keys are nodes
    without edges."""
    edges = {v: sorted(set(ws)) for v, ws in graph.items()}
    for ws in list(edges.values()):
        for w in ws:
            edges.setdefault(w, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges[nxt])))
                elif nxt in on_stack:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
            if low[v] == index[v]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == v:
                        break
                if len(component) > 1 or v in edges[v]:
                    found.append(sorted(component))
    return sorted(found)


def describe(cycles: list[list[str]], graph: Graph) -> str:
    """Each cycle with the imports inside it (module -> module, line), to see what to cut."""
    lines = [f"{len(cycles)} import cycle(s) among {', '.join(PACKAGES)}:"]
    for n, component in enumerate(cycles, 1):
        members = set(component)
        lines.append(f"  cycle {n}: " + " <-> ".join(component))
        for module in component:
            for target, line in sorted(graph[module].items()):
                if target in members:
                    lines.append(f"    {module} -> {target}  (line {line})")
    return "\n".join(lines)


# -- the project -----------------------------------------------------------------------------


def test_the_packages_have_no_import_cycles() -> None:
    graph = import_graph(ROOT, PACKAGES)
    assert len(graph) > 20  # the packages were found

    cycles = find_cycles(graph)

    assert not cycles, describe(cycles, graph)


@pytest.mark.parametrize(
    "prefix", ["supervisors", "agent_runtime.event_stream", "agent_runtime.cli"]
)
def test_no_cycle_among_the_modules_of(prefix: str) -> None:
    # Guards the cycles already removed while others elsewhere are still being untied.
    graph = import_graph(ROOT, PACKAGES)
    inside = {
        m: {t: line for t, line in edges.items() if t == prefix or t.startswith(prefix + ".")}
        for m, edges in graph.items()
        if m == prefix or m.startswith(prefix + ".")
    }
    assert inside

    cycles = find_cycles(inside)

    assert not cycles, describe(cycles, inside)


# -- the cycle finder ------------------------------------------------------------------------


def test_an_acyclic_graph_has_no_cycles() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a"}}

    assert find_cycles(graph) == []


def test_a_cycle_is_found_with_all_its_members_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}

    assert find_cycles(graph) == [["a", "b", "c"]]


def test_separate_cycles_are_reported_separately() -> None:
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}}

    assert find_cycles(graph) == [["a", "b"], ["c", "d"]]


def test_a_self_edge_is_a_cycle() -> None:
    assert find_cycles({"pkg": {"pkg", "pkg.sub"}, "pkg.sub": set()}) == [["pkg"]]


def test_edges_to_unlisted_nodes_are_allowed() -> None:
    assert find_cycles({"a": {"outside"}}) == []


def brute_force_cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The definition itself: u and v share a cycle iff each reaches the other."""
    nodes = set(graph) | {w for ws in graph.values() for w in ws}
    reach = {v: set(graph.get(v, ())) for v in nodes}
    changed = True
    while changed:
        changed = False
        for v in nodes:
            more = set().union(*(reach[w] for w in reach[v])) - reach[v]
            if more:
                reach[v] |= more
                changed = True
    components = {frozenset({v} | {w for w in reach[v] if v in reach[w]}) for v in nodes}
    return sorted(
        sorted(c) for c in components if len(c) > 1 or next(iter(c)) in reach[next(iter(c))]
    )


@given(
    st.dictionaries(
        st.sampled_from("abcdefg"), st.sets(st.sampled_from("abcdefgh"), max_size=3), max_size=7
    )
)
def test_the_finder_agrees_with_the_definition(graph: dict[str, set[str]]) -> None:
    assert find_cycles(graph) == brute_force_cycles(graph)


def test_a_long_chain_needs_no_recursion() -> None:
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)}

    assert find_cycles(chain) == []
    assert find_cycles({**chain, "m5000": {"m0"}}) == [sorted([*chain, "m5000"])]


# -- reading imports -------------------------------------------------------------------------


def write_package(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg._a import A\nfrom . import sub\n",
            "pkg/_a.py": (
                "from typing import TYPE_CHECKING\n"
                "import json\n"
                "if TYPE_CHECKING:\n"
                "    from pkg._b import B\n"
                "def f():\n"
                "    import pkg.sub.leaf\n"
                "A = 1\n"
            ),
            "pkg/_b.py": "from .sub import leaf\nfrom ._a import A\nB = 2\n",
            "pkg/sub/__init__.py": "from .. import _b\n",
            "pkg/sub/leaf.py": "",
        },
    )

    graph = import_graph(tmp_path, ["pkg"])

    assert {m: set(edges) for m, edges in graph.items()} == {
        "pkg": {"pkg._a", "pkg.sub"},
        "pkg._a": {"pkg._b", "pkg.sub.leaf"},  # TYPE_CHECKING, inside a function
        "pkg._b": {"pkg.sub.leaf", "pkg._a"},  # relative: `from .sub import leaf` is the module
        "pkg.sub": {"pkg._b"},  # `from .. import _b` is the module, not pkg's __init__
        "pkg.sub.leaf": set(),
    }
    assert graph["pkg._a"]["pkg._b"] == 4
    assert find_cycles(graph) == [["pkg._a", "pkg._b"]]


def test_implied_parent_packages_are_not_edges(tmp_path: Path) -> None:
    write_package(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.sub.leaf import X\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/leaf.py": "import pkg.sub.other\nX = 1\n",
            "pkg/sub/other.py": "",
        },
    )

    graph = import_graph(tmp_path, ["pkg"])

    assert set(graph["pkg.sub.leaf"]) == {"pkg.sub.other"}
    assert find_cycles(graph) == []


def test_a_name_from_the_own_package_face_is_a_self_edge(tmp_path: Path) -> None:
    write_package(tmp_path, {"pkg/__init__.py": "X = 1\nfrom . import X as Y\n"})

    assert find_cycles(import_graph(tmp_path, ["pkg"])) == [["pkg"]]
