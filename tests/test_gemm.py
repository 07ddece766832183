"""Matrix products inside the persistent kernel: ``@`` on whole matrices becomes one ``cpufree::gemm`` call of all
threads (cuBLASDx tiles, ``cpufree/gemm.cuh``); products inside maps keep DaCe's pure expansion."""

import re
import subprocess

import dace
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree.runtime import build
from dace_cpufree.runtime.build import INCLUDE_DIR, find_nvcc
from dace_cpufree.runtime.mathdx import ENVIRONMENT, nvcc_flags
from npbench_runs.kernels import KERNELS

M, N, K = (dace.symbol(s) for s in "MNK")


@dace.program
def product(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = 1.5 * C + A @ B


@dace.program
def transposed(A: dace.float64[K, M], B: dace.float64[N, K], C: dace.float64[M, N]):
    C[:] = A.T @ B.T


@dace.program
def chain(A: dace.float32[M, K], B: dace.float32[K, N], D: dace.float32[N, M], E: dace.float32[M, M]):
    E[:] = (A @ B) @ D


def _inputs(program, dtype=np.float64, m=37, n=29, k=41, seed=5):
    rng = np.random.default_rng(seed)
    shapes = {
        "product": ((m, k), (k, n), (m, n)),
        "transposed": ((k, m), (n, k), (m, n)),
        "chain": ((m, k), (k, n), (n, m), (m, m)),
    }[program.f.__name__]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _expected(program, args):
    with np.errstate(all="ignore"):
        ref = [a.copy() for a in args]
        program.f(*ref)
    return ref[-1]


def test_whole_matrix_products_are_one_call_of_every_thread():
    source = dace_cpufree.kernel_source(product)
    assert ENVIRONMENT in source.environments
    assert "#include <cpufree/gemm.cuh>" in source.code
    kernel = source.code.split("// ---- host launcher")[0]
    assert kernel.count("cpufree::gemm<double>(") == 1
    assert ("tasklet _MatMult_gemm", "every thread of the grid") in [tuple(s[:2]) for s in source.steps]
    three = dace_cpufree.kernel_source(chain)
    assert three.code.count("cpufree::gemm<float>(") == 2


def test_products_inside_a_map_keep_the_plain_expansion():
    """doitgen multiplies a slice per map iteration: a single thread's work, not a call of the whole grid."""
    source = dace_cpufree.kernel_source(KERNELS["doitgen"].program)
    assert "cpufree::gemm" not in source.code and source.environments == ()


@pytest.mark.parametrize("program", [product, transposed, chain], ids=lambda p: p.name)
@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_products_match_numpy_under_the_race_checker(program, order):
    dtype = np.float32 if program is chain else np.float64
    args = _inputs(program, dtype)
    want = _expected(program, args)
    dace_cpufree.compile(program, backend="emulate", race_check=order)(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvcc_builds_the_tensor_core_product(arch, tmp_path):
    nvcc = find_nvcc() or pytest.skip("no nvcc")
    source = dace_cpufree.kernel_source(product)
    src = tmp_path / "product.cu"
    src.write_text(source.code)
    cmd = [nvcc, "-std=c++17", f"-arch={arch}", f"-I{INCLUDE_DIR}", *nvcc_flags(), "-ptx", str(src), "-o", "p.ptx"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = (tmp_path / "p.ptx").read_text()
    assert re.search(r"mma\.sync\.aligned\.m\d+n\d+k\d+\.row\.col\.f64", ptx)  # FP64 tensor cores (DMMA)


@pytest.mark.compile
def test_the_builder_adds_the_library_for_the_kernels_that_name_it():
    source = dace_cpufree.kernel_source(transposed)
    library = build(source.code, "gemm_transposed", "cuda", environments=source.environments)
    assert library.stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.parametrize("program", [product, transposed, chain], ids=lambda p: p.name)
@pytest.mark.parametrize("size", [(37, 29, 41), (300, 260, 513)])
def test_products_match_numpy_on_gpu(program, size):
    dtype = np.float32 if program is chain else np.float64
    args = _inputs(program, dtype, *size)
    want = _expected(program, args)
    dace_cpufree.compile(program)(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4 if dtype == np.float32 else 1e-11, atol=1e-3)
