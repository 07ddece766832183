"""``python -m npbench_runs foreign``: NPBench's own programs through the compiler, classified as NPBench validates.

The harness is tested on a small tree laid out as NPBench lays out its benchmarks (written here: one program that
validates, one whose result differs from its NumPy version, one the compiler refuses). Where an NPBench checkout
is present (``NPBENCH_DIR``, else ``/work/npbench``), its own programs run too: none may be wrong, and the ones
listed in ``VALIDATE`` must validate.
"""

import json
import os
import textwrap
from pathlib import Path

import pytest

from npbench_runs import foreign

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
def fake_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("npbench")
    _benchmark(root, "good", "0.5 * (B[:-2] + B[2:])")
    _benchmark(root, "off", "0.5 * (B[:-2] + B[2:]) + 1e-3")
    _benchmark(root, "talks", "0.5 * (B[:-2] + B[2:])", extra="print(A)\n")  # an array to the host: refused
    out = tmp_path_factory.mktemp("out") / "results.json"
    assert foreign.main(["--npbench", str(root), "--json", str(out), "--timeout", "300"]) == 0
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


def test_npbench_validation_broadcasts_a_scalar_return_like_npbench():
    import numpy as np

    info = {}
    assert foreign.compare(info, [np.int64(982)], [np.array([982])]) is None
    assert foreign.compare(info, [np.ones(3)], [np.ones(3) * 1.01]) == [pytest.approx(0.01)]


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
def test_npbench_program_validates_under_the_race_checker(name):
    result = foreign.run_one(NPBENCH.resolve(), name, "S", "emulate", race_check=True)
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
