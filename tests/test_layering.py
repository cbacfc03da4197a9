"""The house rules, checked on the source: each room imports only the rooms below it, and
no two modules import each other (directly or through others) at import time."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from support.data import ROOT

FOLDERS = {"drscore": "drscore", "drscore.engine": "engine", "drscore.judge": "judge",
           "drscore.fetch": "fetch", "drscore.prompts": "prompts"}

# room -> the drscore rooms it may import (a room may always import itself)
ALLOWED = {
    "drscore.prompts": set(),
    "drscore.engine.runtime": {"drscore.prompts"},
    "drscore.engine.text": {"drscore.engine.runtime"},
    "drscore.engine.stats": {"drscore.engine.runtime"},
    "drscore.engine.methods": {"drscore.engine.runtime", "drscore.engine.text", "drscore.engine.stats",
                               "drscore.prompts"},
    "drscore.engine.reporting": {"drscore.engine.runtime", "drscore.engine.text", "drscore.engine.stats",
                                 "drscore.engine.methods", "drscore.prompts"},  # the viewer marks template variables
    "drscore.fetch": {"drscore.engine.runtime"},
    "drscore.judge": {"drscore.engine.runtime", "drscore.engine.text", "drscore.engine.methods",
                      "drscore.engine.stats", "drscore.prompts"},
}


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([package, *parts])
            if package == "drscore" and any(name.startswith(f"{p}.") or name == p for p in FOLDERS if p != "drscore"):
                continue
            found[name] = path
    return found


def _imports(path: Path, module: str, *, top_level_only: bool) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    is_pkg = path.name == "__init__.py"
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            out.update(f"{target}.{a.name}" for a in node.names)
    return {m for m in out if m == "drscore" or m.startswith("drscore.")}


def _room(module: str) -> str | None:
    for room in sorted(ALLOWED, key=len, reverse=True):
        if module == room or module.startswith(room + "."):
            return room
    return None


MODULES = _modules()


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m)))
def test_each_room_imports_only_the_rooms_below_it(module):
    room = _room(module)
    for target in _imports(MODULES[module], module, top_level_only=False):
        other = _room(target)
        if target in ("drscore", "drscore.engine") or other == room:
            continue
        assert other in ALLOWED[room], f"{module} imports {target} ({other or 'outside the rooms'})"


def test_no_import_cycles_at_import_time():
    graph = {m: {t for t in _imports(p, m, top_level_only=True) if t in MODULES and t != m}
             for m, p in MODULES.items()}
    # Tarjan's strongly connected components; any component of size > 1 is a cycle
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            # a package importing its own submodules is how packages work, not a cycle
            if len(comp) > 1 and not all(c == min(comp, key=len) or c.startswith(min(comp, key=len) + ".")
                                         for c in comp):
                cycles.append(sorted(comp))

    for m in graph:
        if m not in index:
            visit(m)
    assert not cycles, f"import cycles: {cycles}"


def test_the_checker_sees_a_forbidden_import(tmp_path):
    # the rule above must be able to fail: a runtime module importing a method is caught
    bad = tmp_path / "bad.py"
    bad.write_text("from drscore.engine.methods.fact import Fact\n")
    targets = _imports(bad, "drscore.engine.runtime.bad", top_level_only=False)
    assert "drscore.engine.methods.fact" in targets
    assert _room("drscore.engine.methods.fact") not in ALLOWED["drscore.engine.runtime"]


# The judge-call path is a sub-room of the runtime: of the rest of the runtime it may use
# only these, so "what happens to one judge call" stays readable in one folder.
CALLS_MAY_USE = {"drscore.engine.runtime.method", "drscore.engine.runtime.extras",
                 "drscore.engine.runtime.sqlitefile"}


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("drscore.engine.runtime.calls")))
def test_the_call_path_uses_only_its_own_modules_and_the_contract(module):
    for target in _imports(MODULES[module], module, top_level_only=False):
        if not target.startswith("drscore.engine.runtime.") or target.startswith("drscore.engine.runtime.calls"):
            continue
        base = ".".join(target.split(".")[:4])  # drscore.engine.runtime.X (a name imported from X included)
        assert base in CALLS_MAY_USE, f"{module} imports {target}"
