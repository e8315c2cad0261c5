"""No import cycle inside grader/: every module can be understood after the ones it imports.

Imports inside functions count too (a cycle hidden in a function is still a cycle a reader
must untangle); a package's own __init__ importing its children lazily by name does not.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import grader

PACKAGE = Path(grader.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, known: set[str]) -> set[str]:
    """The grader modules `path` imports, relative imports resolved."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # a submodule by name depends on that module; any other name, on the package
            submodule = [f"{base}.{alias.name}" for alias in node.names]
            targets = [name if name in known else base for name in submodule]
        else:
            continue
        found |= {target for target in targets if target in known}
    return found - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_module_of_the_grader_imports_itself_through_others():
    paths = sorted(PACKAGE.rglob("*.py"))
    known = {module_name(path) for path in paths}
    graph = {module_name(path): imported(path, known) for path in paths}
    assert graph["grader.sandbox.worker.zygote"] >= {"grader.sandbox.worker.serve"}  # sanity
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("face", ["grader.sandbox", "grader.judge", "grader.report"])
def test_the_light_faces_load_neither_torch_nor_pytest(face):
    """The service's API nodes import these faces; torch and pytest are the judge's alone."""
    code = f"import sys, {face}; print(sorted({{'torch', 'pytest'}} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"import {face} loads {done.stdout.strip()}"


def test_no_face_hides_its_names_behind_a_module_getattr():
    for path in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        assert "__getattr__" not in names, f"{path} has a module __getattr__"


def test_a_judge_process_starts_its_sandbox_before_it_imports_the_judge():
    """grader/judge_process.py starts its sandbox's zygote first: its module imports none of
    grader.judge (whose face loads the report model), torch or pytest."""
    heavy = "{'torch', 'pytest', 'pydantic', 'grader.judge'}"
    code = f"import sys, grader.judge_process; print(sorted({heavy} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", f"grader.judge_process loads {done.stdout.strip()}"
