"""render_tree: the runtime's supervision tree as a rich `Tree`, for the CLI and the demo."""

from __future__ import annotations

from rich.tree import Tree

from agent_runtime.runtime import Runtime
from supervisors import ChildInfo, DynamicSupervisor, Supervisor, supervisor_of


def render_tree(runtime: Runtime) -> Tree:
    """A rich Tree of the runtime's supervision tree, children in start order.

    Nested supervisors that are alive are expanded; each child shows its id, type, restart
    policy, actor class and whether it is alive.
    """
    root = Tree(f"[bold]{runtime.name}[/] (Supervisor, one_for_one)")
    _add_children(root, runtime.supervisor)
    return root


def _label(info: ChildInfo) -> str:
    kind = info.ref.actor_class.__name__ if info.ref is not None else "-"
    state = "[green]alive[/]" if info.alive else "[red]down[/]"
    return f"{info.id} [dim]({info.type}, {info.restart}, {kind})[/] {state}"


def _add_children(node: Tree, sup: Supervisor | DynamicSupervisor) -> None:
    for info in sup.which_children():
        branch = node.add(_label(info))
        nested = supervisor_of(info.ref) if info.ref is not None else None
        if nested is not None and nested.alive:
            _add_children(branch, nested)
