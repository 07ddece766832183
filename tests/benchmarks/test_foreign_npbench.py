"""``python -m npbench_runs foreign``: NPBench's own programs through the compiler, classified as NPBench validates.

The harness is tested on a small tree laid out as NPBench lays out its benchmarks (written here: one program that
validates, one whose result differs from its NumPy version, one the compiler refuses), with ``--jobs`` too, and
with the references that ``--jobs`` saves (another preset or source gets another file; a saved one is used). Where
an NPBench checkout is present (``NPBENCH_DIR``, else ``/work/npbench``), its own programs run too: none may be
wrong, and the ones listed in ``VALIDATE`` must validate.
"""

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from npbench_runs import foreign
from npbench_runs import foreign_programs as programs

INIT = """
import numpy as np

def initialize(N):
    return np.arange(N, dtype=np.float64), np.ones(N)
"""
NUMPY = """
def kernel(TSTEPS, A, B):
    for _ in range(TSTEPS):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = 0.5 * (B[:-2] + B[2:])
"""
DACE = """
import dace
N = dace.symbol("N")

@dace.program
def kernel(TSTEPS: dace.int64, A: dace.float64[N], B: dace.float64[N]):
    for _ in range(TSTEPS):
        B[1:-1] = 0.5 * (A[:-2] + A[2:])
        A[1:-1] = {second}
{extra}"""


def _benchmark(root: Path, name: str, second: str, extra: str = "") -> None:
    folder = root / "npbench" / "benchmarks" / "fake" / name
    folder.mkdir(parents=True)
    (folder / f"{name}.py").write_text(INIT)
    (folder / f"{name}_numpy.py").write_text(NUMPY)
    (folder / f"{name}_dace.py").write_text(DACE.format(second=second, extra=textwrap.indent(extra, "        ")))
    info = {
        "benchmark": {
            "relative_path": f"fake/{name}",
            "module_name": name,
            "func_name": "kernel",
            "parameters": {"S": {"TSTEPS": 3, "N": 40}, "L": {"TSTEPS": 3, "N": 40}},
            "init": {"func_name": "initialize", "input_args": ["N"], "output_args": ["A", "B"]},
            "input_args": ["TSTEPS", "A", "B"],
            "array_args": ["A", "B"],
            "output_args": ["A", "B"],
        }
    }
    (root / "bench_info").mkdir(exist_ok=True)
    (root / "bench_info" / f"{name}.json").write_text(json.dumps(info))


@pytest.fixture(scope="module")
def fake_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("npbench")
    _benchmark(root, "good", "0.5 * (B[:-2] + B[2:])")
    _benchmark(root, "off", "0.5 * (B[:-2] + B[2:]) + 1e-3")
    _benchmark(root, "talks", "0.5 * (B[:-2] + B[2:])", extra="print(A)\n")  # an array to the host: refused
    return root


@pytest.fixture(scope="module")
def fake_results(fake_tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "results.json"
    assert foreign.main(["--npbench", str(fake_tree), "--json", str(out), "--timeout", "300"]) == 0
    return {r["name"]: r for r in json.loads(out.read_text())}


def test_a_program_that_agrees_with_numpy_validates(fake_results):
    assert fake_results["good"]["class"] == "validated", fake_results["good"]


def test_a_program_that_differs_from_numpy_is_wrong_with_its_errors(fake_results):
    off = fake_results["off"]
    assert off["class"] == "wrong" and "A:" in off["reason"], off
    assert all(e > 1e-5 for e in off["errors"])


def test_a_refused_program_names_the_construct(fake_results):
    talks = fake_results["talks"]
    assert talks["class"] == "refused", talks
    assert "NotPersistableError" in talks["reason"]


def _npbench_modules() -> dict:
    return {k: m for k, m in sys.modules.items() if k == "npbench" or k.startswith("npbench.")}


@pytest.fixture
def npbench_imports(monkeypatch):
    """A test's own ``npbench`` package: none imported or on the path before it, the one it imports forgotten
    afterwards (a process imports one tree's, see ``foreign_programs._module``)."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not Path(p or ".", "npbench", "__init__.py").exists()])
    before = _npbench_modules()
    for name in before:
        del sys.modules[name]
    yield
    for name in _npbench_modules():
        del sys.modules[name]
    sys.modules.update(before)


@pytest.fixture
def reference_cache(tmp_path, monkeypatch, npbench_imports):
    """A reference cache of its own, with the test's own ``npbench`` import."""
    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "foreign_references"


def test_a_second_npbench_tree_in_one_process_is_refused_with_both_named(fake_tree, npbench_imports, tmp_path):
    info = programs.benchmarks(fake_tree)["good"]
    assert programs._module(fake_tree, info, "_numpy").__file__.startswith(str(fake_tree))
    other = tmp_path / "other"
    _benchmark(other, "good", "B[1:-1]")
    with pytest.raises(RuntimeError, match=r"npbench is imported from .* not from .*other"):
        programs._module(other, programs.benchmarks(other)["good"], "_numpy")


def test_the_reference_key_follows_the_preset_its_sizes_and_the_numpy_source(fake_tree, reference_cache):
    info = programs.benchmarks(fake_tree)["good"]
    path = programs.reference_path(fake_tree, "good", info, "S")
    assert path.parent == reference_cache and path == programs.reference_path(fake_tree, "good", info, "S")
    assert programs.reference_path(fake_tree, "good", info, "L") != path  # the same sizes under another preset
    bigger = {**info, "parameters": {**info["parameters"], "S": {"TSTEPS": 3, "N": 41}}}
    assert programs.reference_path(fake_tree, "good", bigger, "S") != path
    numpy_file = fake_tree / "npbench" / "benchmarks" / "fake" / "good" / "good_numpy.py"
    source = numpy_file.read_text()
    try:
        numpy_file.write_text(source + "\n# changed\n")
        assert programs.reference_path(fake_tree, "good", info, "S") != path
    finally:
        numpy_file.write_text(source)


def test_a_saved_reference_is_used_and_an_unreadable_one_computed_again(fake_tree, reference_cache):
    info = programs.benchmarks(fake_tree)["good"]
    assert programs.save_reference_once(fake_tree, "good", info, "S") == "computed"
    assert programs.save_reference_once(fake_tree, "good", info, "S") == "cached"
    path = programs.reference_path(fake_tree, "good", info, "S")
    data, ref = programs.load_reference(path)
    assert programs.run_one(fake_tree, "good", "S", "emulate")["reference"] == "cache"
    programs.save_reference(path, data, [r + 1.0 for r in ref])  # a saved answer that differs: the run compares to it
    shifted = programs.run_one(fake_tree, "good", "S", "emulate")
    assert shifted["reference"] == "cache" and shifted["class"] == "wrong", shifted
    path.write_bytes(b"not a pickle")
    again = programs.run_one(fake_tree, "good", "S", "emulate")
    assert again["reference"] == "computed" and again["class"] == "validated", again


def test_jobs_prepare_first_then_classify_as_one_at_a_time(fake_tree, reference_cache, tmp_path, capsys):
    out = tmp_path / "results.json"
    argv = ["--npbench", str(fake_tree), "--json", str(out), "--timeout", "300", "--benchmarks", "good", "off"]
    assert foreign.main(argv + ["--jobs", "2"]) == 0
    printed = capsys.readouterr().out
    assert "prepared good" in printed and "reference" in printed and "prepared 2 benchmarks" in printed
    rows = {r["name"]: r for r in json.loads(out.read_text())}
    assert rows["good"]["class"] == "validated" and rows["off"]["class"] == "wrong", rows
    assert all(r["reference"] == "cache" for r in rows.values()) and len(list(reference_cache.iterdir())) == 2
    assert "references: 2 from the cache" in printed


def test_speed_times_only_the_baselines_asked_for(fake_tree, capsys):
    """``--baselines`` chooses what ``--speed`` times beside ours (none: ours alone); the benchmark processes are
    told so, a baseline not asked for says so in the row, and the option is refused without ``--speed``."""
    root = Path(fake_tree)
    base = foreign._command(root, "good", "S", "cuda", False, 5)
    assert "--baselines" not in base  # both, the default
    assert foreign._command(root, "good", "S", "cuda", False, 5, ("cupy",))[len(base) :] == ["--baselines", "cupy"]
    assert foreign._command(root, "good", "S", "cuda", False, 5, ())[len(base) :] == ["--baselines"]
    assert "--baselines" not in foreign._command(root, "good", "S", "emulate", False, 0, ("cupy",))
    line = foreign.speed_line({"ours_ms": 1.0, "cupy_ms": 2.0, "dace_gpu_ms": None,
                               "dace_gpu_error": "not asked for (--baselines)"})  # fmt: skip
    assert line == "ours 1 ms | cupy 2 ms (2.00x) | dace_gpu: not asked for (--baselines)"
    with pytest.raises(SystemExit):
        foreign.main(["--npbench", str(root), "--baselines", "cupy"])
    assert "use it with --speed" in capsys.readouterr().err
    assert programs._not_asked(("cupy",)) == {"dace_gpu_ms": None, "dace_gpu_error": "not asked for (--baselines)"}
    assert programs._not_asked(programs.BASELINES) == {}


def test_preparing_without_upstream_dace_among_the_baselines_skips_its_build(fake_tree, npbench_imports, monkeypatch):
    built = []
    monkeypatch.setattr(programs, "save_reference_once", lambda *a: "cached")
    monkeypatch.setattr(programs, "_build_ours", lambda *a: built.append("ours") or "")
    monkeypatch.setattr(programs, "_build_upstream", lambda *a: built.append("upstream") or "")
    root = Path(fake_tree)
    steps = programs.prepare_one(root, "good", "S", "cuda", speed=5, baselines=("cupy",))["steps"]
    assert [s[0] for s in steps] == ["reference", "ours"] and built == ["ours"]
    steps = programs.prepare_one(root, "good", "S", "cuda", speed=5)["steps"]
    assert [s[0] for s in steps] == ["reference", "ours", "upstream DaCe"] and built == ["ours", "ours", "upstream"]


def test_a_process_stopped_after_it_validated_keeps_its_class_and_the_times_it_took(tmp_path):
    """With ``--speed`` a benchmark's process prints its row once the program validates and again after each
    framework is timed. Stopped at the time limit while a slow baseline runs, it answers with the last row: the
    program stays validated with ours timed, and the frameworks not timed have the limit as their reason."""
    row = {
        "name": "slow",
        "class": "validated",
        "reason": "",
        "speed": {"repeats": 3, "ours_ms": 1.5, "ours_error": ""},
    }
    script = tmp_path / "slow.py"
    script.write_text(f"import time\nprint({json.dumps(row)!r}, flush=True)\ntime.sleep(60)\n")
    got, failure, reason = foreign._answer([sys.executable, str(script)], 3, dict(os.environ))
    assert (failure, reason) == ("", "") and got["class"] == "validated"
    assert got["speed"]["ours_ms"] == 1.5 and got["speed"]["ours_error"] == ""
    for key in ("cupy", "dace_gpu"):
        assert got["speed"][f"{key}_ms"] is None and got["speed"][f"{key}_error"] == "timeout: past 3 s"
    script.write_text("import time\ntime.sleep(60)\n")  # stopped before it printed a row
    assert foreign._answer([sys.executable, str(script)], 3, dict(os.environ)) == (
        None,
        "timeout",
        "no answer within 3 s",
    )


def test_npbench_validation_broadcasts_a_scalar_return_like_npbench():
    import numpy as np

    info = {}
    assert programs.compare(info, [np.int64(982)], [np.array([982])]) is None
    assert programs.compare(info, [np.ones(3)], [np.ones(3) * 1.01]) == [pytest.approx(0.01)]


# ------------------------------------------------------------------------------------------------------------
# NPBench's own programs, where a checkout is present

NPBENCH = Path(os.environ.get("NPBENCH_DIR", "/work/npbench"))

#: NPBench programs that validate with the emulation at preset S (fast ones; the full list is in
#: docs/results, from ``python -m npbench_runs foreign --npbench DIR``)
VALIDATE = [
    "adi",
    "arc_distance",
    "atax",
    "azimint_hist",
    "bicg",
    "cavity_flow",
    "cholesky",
    "compute",
    "contour_integral",
    "conv2d_bias",
    "covariance",
    "crc16",
    "jacobi_2d",
    "lenet",
    "nbody",
    "spmv",
]


@pytest.mark.skipif(not (NPBENCH / "bench_info").is_dir(), reason=f"no NPBench checkout at {NPBENCH} (NPBENCH_DIR)")
@pytest.mark.parametrize("name", VALIDATE)
def test_npbench_program_validates_under_the_race_checker(name, npbench_imports):
    result = programs.run_one(NPBENCH.resolve(), name, "S", "emulate", race_check=True)
    assert result["class"] == "validated", result


def test_speed_table_ratios_and_geometric_means(tmp_path, capsys):
    rows = [
        {"name": "b", "class": "validated", "speed": {"ours_ms": 2.0, "cupy_ms": 1.0, "dace_gpu_ms": 8.0}},
        {"name": "a", "class": "validated", "speed": {"ours_ms": 1.0, "cupy_ms": 4.0, "dace_gpu_error": "wrong: 0.5"}},
        {"name": "c", "class": "refused", "reason": "NotPersistableError: x"},
    ]
    table = foreign.speed_table(rows)
    lines = table.splitlines()
    assert lines[2].startswith("| a | 1 | 4 | 4.00x |  |  | upstream DaCe: wrong: 0.5 |")
    assert lines[3].startswith("| b | 2 | 1 | 0.50x | 8 | 4.00x |")
    assert "| c |" in lines[4] and "refused: NotPersistableError: x" in lines[4]
    assert "CuPy / ours: geometric mean **1.41x** over 2 programs; ours faster on 1, slower on 1." in table
    assert "upstream DaCe / ours: geometric mean **4.00x** over 1 programs" in table
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    assert foreign.main(["--table", str(path)]) == 0
    assert capsys.readouterr().out == table
