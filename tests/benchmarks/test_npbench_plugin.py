"""The NPBench plugin: install into a minimal NPBench-shaped directory, load the class the way NPBench
does (``framework_info/<name>.json`` -> ``getattr(npbench.infrastructure, info["class"])``), compile
and run a tiny program with the emulate backend. No NPBench checkout needed; with ``NPBENCH_DIR``
pointing to one, an integration test also runs NPBench's own ``run_benchmark.py`` on a copy of it.
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import npbench_plugin
from npbench_runs import install_plugin

# A stand-in for NPBench's infrastructure package, written for this test: only what the plugin's
# class relies on (the Benchmark type, and a Framework base that reads framework_info/<name>.json
# and names the array arguments __npb_<prefix>_<name>).
STUB_INFRASTRUCTURE = """
import json
import pathlib

import numpy as np


class Benchmark:
    def __init__(self, info):
        self.info = info


class Framework:
    def __init__(self, fname):
        self.fname = fname
        path = pathlib.Path(__file__).parent.parent.parent / "framework_info" / f"{fname}.json"
        self.info = json.loads(path.read_text())["framework"]

    def copy_func(self):
        return np.copy

    def args(self, bench, impl=None):
        prefix = self.info["prefix"]
        return [f"__npb_{prefix}_{a}" if a in bench.info["array_args"] else a for a in bench.info["input_args"]]

    def setup_str(self, bench, impl=None):
        prefix = self.info["prefix"]
        names = ", ".join(f"__npb_{prefix}_{a}" for a in bench.info["array_args"])
        copies = ", ".join(f"__npb_copy({a})" for a in bench.info["array_args"])
        return f"{names} = {copies}"
"""

TINY_DACE = """
import dace as dc

N = dc.symbol("N", dtype=dc.int64)


@dc.program
def kernel(alpha: dc.float64, A: dc.float64[N, N], B: dc.float64[N, N]):
    B[:] = alpha * A + B
"""

TINY_BENCH = {
    "relative_path": "tiny",
    "module_name": "tiny",
    "func_name": "kernel",
    "parameters": {"S": {"N": 8}, "M": {"N": 16}},
    "input_args": ["alpha", "A", "B"],
    "array_args": ["A", "B"],
    "output_args": ["B"],
}


@pytest.fixture
def fake_npbench(tmp_path):
    root = tmp_path / "npbench_checkout"
    (root / "framework_info").mkdir(parents=True)
    infra = root / "npbench" / "infrastructure"
    infra.mkdir(parents=True)
    (root / "npbench" / "__init__.py").write_text("")
    (infra / "__init__.py").write_text(STUB_INFRASTRUCTURE)
    bench = root / "npbench" / "benchmarks" / "tiny"
    bench.mkdir(parents=True)
    (root / "npbench" / "benchmarks" / "__init__.py").write_text("")
    (bench / "__init__.py").write_text("")
    (bench / "tiny_dace.py").write_text(TINY_DACE)
    yield root
    for name in [m for m in sys.modules if m == "npbench" or m.startswith("npbench.")]:
        del sys.modules[name]
    if str(root) in sys.path:
        sys.path.remove(str(root))


def test_install_files_and_registration(fake_npbench):
    init = fake_npbench / "npbench" / "infrastructure" / "__init__.py"
    before = init.read_text()
    touched = install_plugin.install(fake_npbench)
    assert len(touched) == 4
    for name in ("dace_cpufree_gpu", "dace_cpufree_emulate"):
        info = json.loads((fake_npbench / "framework_info" / f"{name}.json").read_text())["framework"]
        assert info["class"] == "DaceCpufreeFramework" and info["postfix"] == "dace"
        assert info["simple_name"] == name
    module = fake_npbench / "npbench" / "infrastructure" / "dace_cpufree_framework.py"
    assert module.read_text() == npbench_plugin.FRAMEWORK_MODULE.read_text()
    # NPBench's own file only gains one marked import line, once
    install_plugin.install(fake_npbench)
    after = init.read_text()
    assert after.startswith(before) and after[len(before) :] == install_plugin.IMPORT_LINE + "\n"
    # uninstall restores it
    install_plugin.uninstall(fake_npbench)
    assert init.read_text() == before
    assert not module.exists() and not (fake_npbench / "framework_info" / "dace_cpufree_gpu.json").exists()


def test_link_mode(fake_npbench):
    install_plugin.main([str(fake_npbench), "--link"])
    link = fake_npbench / "framework_info" / "dace_cpufree_emulate.json"
    assert link.is_symlink() and link.resolve() == (npbench_plugin.PLUGIN_DIR / "framework_info" / link.name)


def test_not_an_npbench_checkout(tmp_path):
    with pytest.raises(SystemExit, match="does not look like an NPBench checkout"):
        install_plugin.install(tmp_path)


def test_framework_class_compiles_and_runs_with_emulate(fake_npbench):
    install_plugin.install(fake_npbench)
    sys.path.insert(0, str(fake_npbench))
    # NPBench's lookup: the JSON names the class, an attribute of npbench.infrastructure
    info = json.loads((fake_npbench / "framework_info" / "dace_cpufree_emulate.json").read_text())["framework"]
    infrastructure = importlib.import_module("npbench.infrastructure")
    cls = getattr(infrastructure, info["class"])
    frmwrk = cls("dace_cpufree_emulate", False, False)  # NPBench passes the strict flags to "dace*" names
    assert frmwrk.backend == "emulate" and frmwrk.version()
    assert cls("dace_cpufree_gpu").backend == "cuda"

    bench = infrastructure.Benchmark(TINY_BENCH)
    [(impl, detail)] = frmwrk.implementations(bench)
    assert detail == "persistent"
    assert frmwrk.arg_str(bench) == "alpha=alpha, A=__npb_cf_A, B=__npb_cf_B, N=N"

    rng = np.random.default_rng(0)
    data = {"N": 8, "alpha": 1.5, "A": rng.random((8, 8)), "B": rng.random((8, 8))}
    ldict = {"__npb_impl": impl, "__npb_copy": frmwrk.copy_func(), **frmwrk.imports(), **data}
    exec(frmwrk.setup_str(bench), ldict)
    exec(frmwrk.exec_str(bench), ldict)
    out = frmwrk.copy_back_func()(ldict["__npb_cf_B"])
    np.testing.assert_allclose(out, 1.5 * data["A"] + data["B"])
    np.testing.assert_array_equal(data["B"], ldict["B"])  # the benchmark's inputs are not touched


def test_a_failing_compile_gives_no_implementation(fake_npbench, capsys):
    install_plugin.install(fake_npbench)
    sys.path.insert(0, str(fake_npbench))
    infrastructure = importlib.import_module("npbench.infrastructure")
    frmwrk = infrastructure.DaceCpufreeFramework("dace_cpufree_emulate")
    missing = dict(TINY_BENCH, func_name="no_such_kernel")
    assert frmwrk.implementations(infrastructure.Benchmark(missing)) == []
    assert "could not compile" in capsys.readouterr().out


@pytest.mark.skipif(
    not (Path(os.environ.get("NPBENCH_DIR") or "/nonexistent") / "bench_info").is_dir(),
    reason="set NPBENCH_DIR to an NPBench checkout",
)
def test_real_npbench_checkout(tmp_path):
    """NPBench's own runner on its own jacobi_2d_dace.py, on a copy of the checkout."""
    root = tmp_path / "npbench"
    shutil.copytree(Path(os.environ["NPBENCH_DIR"]), root, ignore=shutil.ignore_patterns(".git", "*.db"))
    install_plugin.install(root)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run(
        [sys.executable, "run_benchmark.py", "-b", "jacobi_2d", "-f", "dace_cpufree_emulate", "-p", "S", "-r", "2"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "validation: SUCCESS" in proc.stdout, textwrap.shorten(proc.stdout + proc.stderr, 3000)
