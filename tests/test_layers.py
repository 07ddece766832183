"""The layers point down: the code generator imports nothing from the passes or the frontend, the frontend nothing
from the generator or the runtime, the runtime nothing from the compiler layers, and the shared modules (vocabulary,
options, launcher, errors, memlets, sizes, cpp, channel_marks, facts) nothing of ours but each other; inside a layer
the modules import each other without a cycle. Read from the sources' import statements (those inside functions too),
so a new arrow fails here before it spreads. The compiler's tests import nothing of the benchmark suite."""

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
    "dace_cpufree.facts",
    "dace_cpufree.decomposition",
    "dace_cpufree.bounds",
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


def test_facts_import_only_the_vocabulary():
    """Every layer reads the facts: their module imports nothing of ours but the vocabulary and the C++ helpers."""
    names = _imports(ROOT / "dace_cpufree" / "facts.py", "dace_cpufree")
    ours = {n for n in names if n.startswith("dace_cpufree")}
    allowed = ("dace_cpufree.vocabulary", "dace_cpufree.cpp")
    assert all(any(n == a or n.startswith(a + ".") for a in allowed) for n in ours), ours


def test_no_stage_hands_on_facts_in_location_strings():
    """A fact travels as a typed property declared in ``dace_cpufree/facts.py``, not as a ``"cpufree_..."`` key of
    DaCe's free-form ``location`` dictionary written in one module and parsed in another: outside facts.py no module
    of the compiler names ``location`` together with such a key."""
    offenders = []
    for folder in ("codegen", "transformations", "frontend", "dace_cpufree"):
        for path in _sources(folder):
            if path.name == "facts.py":
                continue
            for k, line in enumerate(path.read_text().splitlines(), 1):
                if "location" in line and '"cpufree_' in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{k}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def _test_modules(tests: Path) -> dict[str, list[Path]]:
    """The modules under ``tests`` by the name they are imported with: pytest puts ``tests`` and each folder of a test
    module (none has an ``__init__.py``) on the path, so a module's name is its file's stem, below its package's
    name inside a package."""
    names: dict[str, list[Path]] = {}
    for path in sorted(tests.rglob("*.py")):
        if any(part.startswith(("_", ".")) for part in path.relative_to(tests).parts[:-1]):
            continue  # __pycache__, _dacegraphs
        parts = [] if path.stem == "__init__" else [path.stem]
        folder = path.parent
        while folder != tests and (folder / "__init__.py").exists():
            parts.insert(0, folder.name)
            folder = folder.parent
        names.setdefault(".".join(parts), []).append(path)
    return names


def _benchmark_imports(tests: Path) -> list[str]:
    """Where a module under ``tests`` outside ``tests/benchmarks``, or a module under ``tests`` that one of them
    imports (at any depth), imports the benchmark suite (``npbench_runs``)."""
    modules = _test_modules(tests)
    benchmarks = tests / "benchmarks"
    todo = [(p, None) for paths in modules.values() for p in paths if benchmarks not in p.parents]
    seen, offenders = set(), []
    while todo:
        path, importer = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        name = next(n for n, paths in modules.items() if path in paths)
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        for imported in sorted(_imports(path, package)):
            if imported == "npbench_runs" or imported.startswith("npbench_runs."):
                via = f" (imported by {importer.relative_to(tests)})" if importer else ""
                offenders.append(f"{path.relative_to(tests)}{via} imports {imported}")
            parts = imported.split(".")
            for k in range(1, len(parts) + 1):  # the module and the packages it is in
                todo += [(p, path) for p in modules.get(".".join(parts[:k]), [])]
    return offenders


def test_the_compilers_tests_import_no_benchmark_code():
    """The compiler's tests (everything under tests/ but tests/benchmarks) and the modules of tests/ they import
    import nothing of the benchmark suite: their programs are their own, so a change to a benchmark changes no test
    of the compiler. Tests of the suite's kernels, stencils and solvers live in tests/benchmarks."""
    offenders = _benchmark_imports(ROOT / "tests")
    assert not offenders, "\n".join(offenders)


def test_the_benchmark_import_check_follows_imported_modules(tmp_path):
    """A benchmark import is found in a test module, in a package's module, and in a module of tests/benchmarks that
    a module outside it imports by the name pytest's path gives it (inside a function too); tests/benchmarks itself
    may import the suite."""
    for folder in ("codegen", "benchmarks", "programs"):
        (tmp_path / folder).mkdir()
    (tmp_path / "programs" / "__init__.py").write_text("")
    (tmp_path / "programs" / "stencil.py").write_text("from npbench_runs.multigpu import jacobi_2d\n")
    (tmp_path / "benchmarks" / "suite.py").write_text("from npbench_runs.kernels import KERNELS\n")
    (tmp_path / "benchmarks" / "test_suite.py").write_text("import suite\nimport npbench_runs\n")
    (tmp_path / "shared.py").write_text("def f():\n    from suite import KERNELS\n")
    (tmp_path / "codegen" / "test_a.py").write_text("import shared\nfrom programs.stencil import plain\n")
    (tmp_path / "codegen" / "test_b.py").write_text("from npbench_runs.kernels import gemm\n")
    assert sorted(_benchmark_imports(tmp_path)) == [
        "benchmarks/suite.py (imported by shared.py) imports npbench_runs.kernels",
        "benchmarks/suite.py (imported by shared.py) imports npbench_runs.kernels.KERNELS",
        "codegen/test_b.py imports npbench_runs.kernels",
        "codegen/test_b.py imports npbench_runs.kernels.gemm",
        "programs/stencil.py imports npbench_runs.multigpu",
        "programs/stencil.py imports npbench_runs.multigpu.jacobi_2d",
    ]
    (tmp_path / "codegen" / "test_b.py").write_text("import programs\n")
    (tmp_path / "shared.py").write_text("import numpy\n")
    (tmp_path / "programs" / "stencil.py").write_text("import dace\n")
    assert _benchmark_imports(tmp_path) == []
