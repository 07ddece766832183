"""CPU: NPBench's own stencil programs, unmodified from a checkout (``NPBENCH_DIR``, else ``/work/npbench``), split
over 2, 3 and 4 emulated PEs by ``compile(..., distribute={...})`` under the race checker and compared with NPBench's
NumPy version on the global arrays (skipped where no checkout is present)."""

import copy
import os
from pathlib import Path

import numpy as np
import pytest

import dace_cpufree
from npbench_runs import foreign_programs as programs

NPBENCH = Path(os.environ.get("NPBENCH_DIR", "/work/npbench"))

#: program -> (arrays split and their axis, small parameters; the sizes do not divide by every PE count)
CASES = {
    "jacobi_1d": ({"A": 0, "B": 0}, {"N": 29, "TSTEPS": 4}),
    "jacobi_2d": ({"A": 0, "B": 0}, {"N": 14, "TSTEPS": 3}),
    "heat_3d": ({"A": 0, "B": 0}, {"N": 10, "TSTEPS": 3}),
    "fdtd_2d": ({"ex": 0, "ey": 0, "hz": 0}, {"NX": 13, "NY": 7, "TMAX": 3}),
}


@pytest.mark.skipif(not (NPBENCH / "bench_info").is_dir(), reason=f"no NPBench checkout at {NPBENCH} (NPBENCH_DIR)")
@pytest.mark.parametrize("name", sorted(CASES))
def test_npbench_stencil_split_over_emulated_pes_matches_numpy(name):
    split, params = CASES[name]
    info = programs.benchmarks(NPBENCH)[name]
    init = programs._module(NPBENCH, info, "")
    numpy_version = getattr(programs._module(NPBENCH, info, "_numpy"), info["func_name"])
    program = getattr(programs._module(NPBENCH, info, "_dace"), info["func_name"])
    made = getattr(init, info["init"]["func_name"])(*[params[a] for a in info["init"]["input_args"]])
    values = {**params, **dict(zip(info["init"]["output_args"], made if isinstance(made, tuple) else (made,)))}
    args = {a: values[a] for a in info["input_args"]}
    want = copy.deepcopy(args)
    numpy_version(**want)
    for pes in (2, 3, 4):
        run = dace_cpufree.compile(program, backend="emulate", pes=pes, distribute=split, race_check="shuffle")
        got = copy.deepcopy(args)
        run(**got)
        for out in info["output_args"]:
            np.testing.assert_allclose(got[out], want[out], rtol=1e-12, atol=1e-12, err_msg=f"{out} on {pes} PEs")


#: the project's own stencil kernels: (arrays split and their axis, small sizes)
SUITE = {
    "jacobi_1d": ({"A": 0, "B": 0}, {"N": 23, "TSTEPS": 3}),
    "jacobi_2d": ({"A": 1, "B": 1}, {"N": 11, "TSTEPS": 3}),  # along the strided axis
    "heat_3d": ({"A": 0, "B": 0}, {"N": 9, "TSTEPS": 2}),
    "fdtd_2d": ({"ex": 0, "ey": 0, "hz": 0}, {"NX": 10, "NY": 6, "TMAX": 3}),
}


@pytest.mark.parametrize("name", sorted(SUITE))
def test_suite_stencil_split_over_emulated_pes_matches_its_reference(name):
    from npbench_runs.kernels import KERNELS

    kernel = KERNELS[name]
    split, sizes = SUITE[name]
    args = kernel.initialize(**sizes)
    want = copy.deepcopy(args)
    kernel.reference(**want)
    for pes in (2, 3):
        run = dace_cpufree.compile(kernel.program, backend="emulate", pes=pes, distribute=split, race_check="reverse")
        got = copy.deepcopy(args)
        run(**got)
        for out in kernel.OUTPUTS:
            np.testing.assert_allclose(got[out], want[out], rtol=1e-12, atol=1e-12, err_msg=f"{out} on {pes} PEs")
