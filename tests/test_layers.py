"""The layers point down: the code generator imports nothing from the passes or the frontend, the frontend nothing
from the generator or the runtime, the runtime nothing from the compiler layers, and the shared modules (vocabulary,
options, launcher, errors, memlets, sizes, cpp, channel_marks) nothing of ours but each other; inside a layer the
modules import each other without a cycle. Read from the sources' import statements (those inside functions too), so
a new arrow fails here before it spreads."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: package of each source folder, as installed (pyproject's package-dir)
FOLDERS = {
    "codegen": "dace_cpufree.codegen",
    "transformations": "dace_cpufree.transformations",
    "frontend": "dace_cpufree.frontend",
    "dace_cpufree/runtime": "dace_cpufree.runtime",
}
SHARED = {
    "dace_cpufree.vocabulary",
    "dace_cpufree.options",
    "dace_cpufree.launcher",
    "dace_cpufree.errors",
    "dace_cpufree.memlets",
    "dace_cpufree.sizes",
    "dace_cpufree.cpp",
    "dace_cpufree.channel_marks",
}

#: what each layer may not import
FORBIDDEN = {
    "dace_cpufree.codegen": ("dace_cpufree.transformations", "dace_cpufree.frontend", "dace_cpufree.runtime"),
    "dace_cpufree.runtime": ("dace_cpufree.transformations", "dace_cpufree.frontend", "dace_cpufree.codegen"),
    "dace_cpufree.transformations": ("dace_cpufree.runtime", "dace_cpufree.codegen"),
    "dace_cpufree.frontend": ("dace_cpufree.codegen", "dace_cpufree.runtime"),
}


def _imports_from(node: ast.ImportFrom, package: str) -> str:
    """Absolute name of the module of ``from ... import`` (a relative one resolved against ``package``)."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved against ``package``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            module = _imports_from(node, package)
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}
    return found


def _sources(folder: str):
    return sorted((ROOT / folder).glob("*.py"))


def _module_graph(folder, package: str) -> dict[str, set[str]]:
    """The modules of ``folder`` (``package`` for its ``__init__.py``) and those of the folder each one imports.
    ``from . import x`` is an arrow to the module ``x`` where there is one, not to the package (whose ``__init__``
    Python runs before any of its modules anyway); ``from .x import y`` to ``x.y`` where that is a module, else to
    ``x``."""
    modules = {package if p.stem == "__init__" else f"{package}.{p.stem}": p for p in _sources(folder)}
    graph = {}
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _imports_from(node, package)
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
        graph[module] = (targets & set(modules)) - {module}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state = {}  # module -> "open" while its imports are followed, "done" after

    def visit(module, stack):
        state[module] = "open"
        stack = stack + [module]
        for target in sorted(graph[module]):
            if state.get(target) == "open":  # on the stack: the way back to it closes a cycle
                return stack[stack.index(target) :] + [target]
            if target not in state and (found := visit(target, stack)):
                return found
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module, [])):
            return found
    return None


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_down(layer):
    folder = next(f for f, p in FOLDERS.items() if p == layer)
    bad = []
    for path in _sources(folder):
        for name in _imports(path, layer):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("folder", sorted(FOLDERS))
def test_no_import_cycle_inside_a_layer(folder):
    """A cycle is held together by imports inside functions, which hide the order the modules are built in: the
    piece both ends need belongs in a module below them."""
    cycle = _cycle(_module_graph(folder, FOLDERS[folder]))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_sees_a_cycle(tmp_path):
    """Imports inside functions count, and ``from . import x`` is an arrow to ``x``, not to the package."""
    (tmp_path / "__init__.py").write_text("from .a import f\n")
    (tmp_path / "a.py").write_text("from . import b\n\ndef f():\n    return b.g()\n")
    (tmp_path / "b.py").write_text("def g():\n    from .c import h\n    return h()\n")
    (tmp_path / "c.py").write_text("def h():\n    from .a import f\n    return f\n")
    graph = _module_graph(tmp_path, "pkg")
    assert _cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    (tmp_path / "c.py").write_text("def h():\n    return 1\n")
    assert _cycle(_module_graph(tmp_path, "pkg")) is None


def test_shared_modules_import_only_each_other():
    bad = []
    for module in sorted(SHARED):
        path = ROOT / (module.replace(".", "/") + ".py")
        for name in _imports(path, "dace_cpufree"):
            if (
                name.startswith("dace_cpufree")
                and name not in SHARED
                and not any(name.startswith(s + ".") for s in SHARED)
            ):
                bad.append(f"{module} imports {name}")
    assert not bad, "\n".join(bad)


def test_the_checker_sees_a_forbidden_import(tmp_path):
    """The test above is only worth something if it can fail: a module with a forbidden import is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from dace_cpufree.transformations.schedule_threads import contiguous_param\nfrom ..frontend import x\n"
    )
    names = _imports(bad, "dace_cpufree.codegen")
    assert "dace_cpufree.transformations.schedule_threads" in names and "dace_cpufree.frontend" in names


def test_every_package_folder_is_installed():
    """A folder with an ``__init__.py`` that pyproject does not list is missing from a wheel (and from the GPU
    host's install) while the source-tree tests still pass."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed, mapped = set(config["packages"]), config["package-dir"]
    folders = {folder: package for package, folder in mapped.items()}
    for top in ("dace_cpufree", "transformations", "codegen", "frontend", "npbench_runs", "npbench_plugin"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).parts
            package = ".".join((folders.get(rel[0], rel[0]),) + rel[1:])
            assert package in listed, f"{init.parent.relative_to(ROOT)} ({package}) is not in pyproject's packages"


def test_tests_and_benchmarks_import_the_installed_package_names():
    """``frontend.x`` and ``dace_cpufree.frontend.x`` are the same file but two modules: importing the first
    registers the SHMEM library nodes and frontend calls a second time, with classes the passes do not know."""
    bare = tuple(FOLDERS) + tuple(f"{f}." for f in FOLDERS)
    offenders = []
    tests = ["tests"] + sorted(
        str(d.relative_to(ROOT)) for d in (ROOT / "tests").iterdir() if d.is_dir() and d.name[0] != "_"
    )
    for folder in tests + ["npbench_runs", "npbench_runs/multigpu", "npbench_runs/solvers", "dace_cpufree"]:
        for path in _sources(folder):
            for name in _imports(path, folder.replace("/", ".")):
                if name in FOLDERS or name.startswith(bare):
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert not offenders, offenders
