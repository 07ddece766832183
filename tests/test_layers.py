"""The layers point down: the code generator imports nothing from the passes or the frontend, the runtime nothing
from the compiler layers, and the shared modules (vocabulary, options, launcher, errors, memlets, sizes) nothing of ours
but each other. Read from the sources' import statements, so a new arrow fails here before it spreads."""

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
}

#: what each layer may not import
FORBIDDEN = {
    "dace_cpufree.codegen": ("dace_cpufree.transformations", "dace_cpufree.frontend", "dace_cpufree.runtime"),
    "dace_cpufree.runtime": ("dace_cpufree.transformations", "dace_cpufree.frontend", "dace_cpufree.codegen"),
    "dace_cpufree.transformations": ("dace_cpufree.runtime", "dace_cpufree.codegen"),
}


def _imports(path: Path, package: str) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved against ``package``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}
    return found


def _sources(folder: str):
    return sorted((ROOT / folder).glob("*.py"))


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports_point_down(layer):
    folder = next(f for f, p in FOLDERS.items() if p == layer)
    bad = []
    for path in _sources(folder):
        for name in _imports(path, layer):
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


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
