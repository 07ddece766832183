"""The ROC_SHMEM output of the communicating programs compiled against rocSHMEM's own headers, so that every call
exists with the signature the generator uses. rocSHMEM is neither a Debian nor a PyPI package: these tests run where
its headers are at hand (``tests/rocshmem_headers.py``: ``ROCSHMEM_HOME``, or a cache fetched from its public
repository) and skip elsewhere."""

import subprocess

import pytest
import shmem_programs as sp
from rocshmem_headers import headers

import dace_cpufree
from dace_cpufree.runtime.build import INCLUDE_DIR
from dace_cpufree.runtime.hip_build import hipcc_environment
from npbench_runs.multigpu import jacobi_2d, jacobi_3d, jacobi_3d_grid

HOME = headers()
pytestmark = [
    pytest.mark.hip,
    pytest.mark.skipif(HOME is None, reason="no rocSHMEM headers: set ROCSHMEM_HOME (CI can reach no copy of them)"),
]

PROGRAMS = {
    "contiguous": sp.contiguous,
    "strided": sp.strided,
    "concurrent": sp.concurrent,
    "signalled_once": sp.signalled_once,
    "jacobi_2d": jacobi_2d.plain,
    "jacobi_2d_overlapped": jacobi_2d.overlapped,
    "jacobi_3d": jacobi_3d.plain,
    "jacobi_3d_overlapped": jacobi_3d.overlapped,
    "jacobi_3d_grid": jacobi_3d_grid.plain,
    "jacobi_3d_grid_overlapped": jacobi_3d_grid.overlapped,
}


def _mpi_includes() -> list[str]:
    try:
        out = subprocess.run(["mpicc", "--showme:incdirs"], capture_output=True, text=True).stdout
    except OSError:
        return []
    return [f"-I{d}" for d in out.split()]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_rocshmem_calls_compile_against_its_headers(name, tmp_path):
    program = PROGRAMS[name]
    source = tmp_path / f"{name}.hip.cpp"
    code = dace_cpufree.kernel_source(program, backend="hip").code
    assert "    CPUFREE_SHMEM_WORK_GROUP();" in code  # rocSHMEM's per-work-group set-up, before any call
    assert "rocshmem_barrier_all()" not in code.split("// ---- host launcher")[0]  # host-only in rocSHMEM
    source.write_text(code)
    includes = [f"-I{INCLUDE_DIR}", f"-I{HOME / 'include'}", *_mpi_includes()]
    cmd = ["hipcc", "-std=c++17", "-c", "-fgpu-rdc", "--offload-arch=gfx90a", "-Werror", *includes, str(source)]
    proc = subprocess.run(cmd + ["-o", str(tmp_path / "x.o")], capture_output=True, text=True, env=hipcc_environment())
    assert proc.returncode == 0, proc.stderr[-3000:]
