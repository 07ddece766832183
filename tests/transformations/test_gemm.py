"""Matrix products inside the persistent kernel: ``@`` on whole matrices becomes one ``cpufree::gemm`` call of all
threads (``cpufree/gemm.cuh``: CUTLASS's block product for FP64, cuBLASDx for FP32); a batch sharing one matrix is one
call; a batch of matrix pairs keeps DaCe's pure expansion."""

import dataclasses
import re
import subprocess
import warnings

import dace
import numpy as np
import pytest
from dace_cpufree.codegen import host
from kernel_copies import go_fast
from kernel_steps import items
from programs import both_batched

import dace_cpufree
from dace_cpufree.errors import NotPersistableError
from dace_cpufree.runtime import build
from dace_cpufree.runtime.build import INCLUDE_DIR, find_nvcc
from dace_cpufree.runtime.mathdx import ENVIRONMENT, nvcc_flags

M, N, K = (dace.symbol(s) for s in "MNK")


@dace.program
def product(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = 1.5 * C + A @ B


@dace.program
def transposed(A: dace.float64[K, M], B: dace.float64[N, K], C: dace.float64[M, N]):
    C[:] = A.T @ B.T


@dace.program
def transposed_left(A: dace.float64[K, M], B: dace.float64[K, N], C: dace.float64[M, N]):
    C[:] = 2.0 * C - A.T @ B


@dace.program
def transposed_right(A: dace.float64[M, K], B: dace.float64[N, K], C: dace.float64[M, N]):
    C[:] = A @ B.T


@dace.program
def chain(A: dace.float32[M, K], B: dace.float32[K, N], D: dace.float32[N, M], E: dace.float32[M, M]):
    E[:] = (A @ B) @ D


@dace.program
def padded(A: dace.float64[M, K + 2], B: dace.float64[K, N + 4], C: dace.float64[M, N]):
    C[:] = A[:, :K] @ B[:, :N]  # rows longer than the operands: leading dimensions K + 2, N + 4


@dace.program
def repeated(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    for _ in range(3):  # one product site taken three times in a launch
        C[:] = 0.5 * C + A @ B


@dace.program
def independent(A: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N], D: dace.float64[M, N]):
    C[:] = A @ B  # two products that share no output
    D[:] = 2.0 * D - A @ B


R, Q = (dace.symbol(s) for s in "RQ")


@dace.program
def batched(A: dace.float64[R, Q, K], B: dace.float64[K, N], C: dace.float64[R, Q, N]):
    C[:] = A @ B  # one matrix shared by the batch: one product of R * Q rows


def _inputs(program, dtype=np.float64, m=37, n=29, k=41, seed=5):
    rng = np.random.default_rng(seed)
    shapes = {
        "product": ((m, k), (k, n), (m, n)),
        "transposed": ((k, m), (n, k), (m, n)),
        "transposed_left": ((k, m), (k, n), (m, n)),
        "transposed_right": ((m, k), (n, k), (m, n)),
        "chain": ((m, k), (k, n), (n, m), (m, m)),
        "padded": ((m, k + 2), (k, n + 4), (m, n)),
        "repeated": ((m, k), (k, n), (m, n)),
        "independent": ((m, k), (k, n), (m, n), (m, n)),
    }[program.f.__name__]
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _expected(program, args):
    if program is padded:  # its Python function slices with the symbols themselves
        A, B, C = args
        return A[:, : B.shape[0]] @ B[:, : C.shape[1]]
    with np.errstate(all="ignore"):
        ref = [a.copy() for a in args]
        program.f(*ref)
    return ref[-1]


def _products(source) -> list:
    """The kernel IR's matrix products: library calls that every thread of the grid makes together."""
    return [i for i in items(source) if i.collective]


def test_whole_matrix_products_are_one_call_of_every_thread():
    source = dace_cpufree.kernel_source(product)
    assert ENVIRONMENT in source.environments
    assert "#include <cpufree/gemm.cuh>" in source.code  # the include the build needs for the call
    assert len(_products(source)) == 1
    assert ("tasklet _MatMult_gemm", "every thread of the grid") in [tuple(s[:2]) for s in source.steps]
    assert len(_products(dace_cpufree.kernel_source(chain))) == 2


def test_the_launch_gives_products_their_block_size_and_shared_memory():
    """The product's tile fixes the block size and its pipeline the dynamic shared memory: facts of the kernel
    source that the launcher uses; a kernel without products asks for neither."""
    source = dace_cpufree.kernel_source(product)
    assert source.need_block == "cpufree::gemm_threads<double>()"
    assert source.dynamic_shared == "cpufree::gemm_shared_bytes<double>()"
    three = dace_cpufree.kernel_source(chain)
    assert (three.need_block, three.dynamic_shared) == (
        "cpufree::gemm_threads<float>()",
        "cpufree::gemm_shared_bytes<float>()",
    )
    plain = dace_cpufree.kernel_source(go_fast.program)
    assert (plain.need_block, plain.dynamic_shared) == ("0", "0")
    # the launcher's library answers them, so that configure() can tell a user's block size the products cannot run
    assert 'extern "C" int cpufree_products_block() { return (int)(cpufree::gemm_threads<double>()); }' in source.code
    assert "return (cpufree::gemm_block_fits<double>(block)) ? 1 : 0;" in source.code
    assert "return (cpufree::gemm_block_fits<float>(block)) ? 1 : 0;" in three.code
    assert "return (true) ? 1 : 0;" in dace_cpufree.kernel_source(go_fast.program).code


@pytest.mark.compile
def test_nvcc_checks_which_block_sizes_run_the_tiles(tmp_path):
    """The rule configure() warns by, checked by nvcc at compile time: CUTLASS's FP64 tile runs in blocks of exactly
    its threads, cuBLASDx's FP32 tile in blocks of at least its threads; element types without a tile (integers) in
    any block."""
    src = tmp_path / "fits.cu"
    src.write_text(
        "#include <cpufree/gemm.cuh>\n"
        "using cpufree::gemm_block_fits;\n"
        "static_assert(cpufree::gemm_threads<double>() == 128 && cpufree::gemm_threads<float>() == 128);\n"
        "static_assert(gemm_block_fits<double>(128) && !gemm_block_fits<double>(64));\n"
        "static_assert(!gemm_block_fits<double>(256));\n"
        "static_assert(gemm_block_fits<float>(128) && gemm_block_fits<float>(256) && !gemm_block_fits<float>(64));\n"
        "static_assert(gemm_block_fits<int>(32) && gemm_block_fits<long long>(1024));\n"
    )
    cmd = [find_nvcc(), "-std=c++17", "-arch=sm_90", "--expt-relaxed-constexpr", f"-I{INCLUDE_DIR}", *nvcc_flags()]
    proc = subprocess.run([*cmd, "-c", str(src), "-o", str(tmp_path / "fits.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_configure_warns_only_where_the_products_need_another_block_size(monkeypatch):
    """configure(block_size=...) warns, naming the size the products are built for and the fix, where the kernel's
    products need another; not where they take the plain loop anyway (the emulation) or have none."""
    args = _inputs(product, np.float64, 40, 30, 20)
    want = _expected(product, args)
    run = dace_cpufree.compile(product, backend="emulate")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.configure(block_size=256)  # the emulation's products are the plain loop at any block size: no warning
    run(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-12)

    class Library:  # an FP64 product's CUDA build: its tile runs in blocks of exactly 128 threads
        def __init__(self, lib):
            self.lib = lib

        def cpufree_block_fits(self, block):
            return int(block == 128)

        def cpufree_products_block(self):
            return 128

        def __getattr__(self, name):
            return getattr(self.lib, name)

    monkeypatch.setattr(run, "_lib", Library(run._lib))
    with pytest.warns(RuntimeWarning, match=r"configure\(block_size=256\).*blocks of 128 threads.*Fix: configure"):
        run.configure(block_size=256)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.configure(block_size=128)
        run.configure(block_size=0)


def test_kernels_with_products_are_built_twice_and_the_launcher_counts_their_tiles():
    """The body is one device function, a template over the build; a kernel runs it with the registers ptxas chooses
    and another bounded to three blocks of the products' size per multiprocessor, and the launcher counts the
    products' output tiles from its parameters to choose between them. A kernel without products is built once."""
    source = dace_cpufree.kernel_source(product)
    kernel = source.kernel
    assert f"template <int cpufree_build>\n__device__ __forceinline__ void {kernel}_body(" in source.code
    assert f"__global__ void {kernel}(" in source.code
    bound = "__launch_bounds__(cpufree::bound_threads(cpufree::gemm_threads<double>()), 3)"
    assert f"{bound}\n{kernel}_bounded(" in source.code
    # both kernels run the one body, each its own build of it, whose products name the build (each its tile)
    assert source.code.count(f"{kernel}_body(") == 1
    assert f"{kernel}_body<0>(" in source.code and f"{kernel}_body<1>(" in source.code
    # (C = 1.5 * C + A @ B: the sum runs in the product's call, NumPy's meaning of beta)
    assert "cpufree::gemm_numpy<double, cpufree_build>(" in source.code
    assert "CPUFREE_BLOCKS_PER_SM" not in source.code
    (call,) = _products(source)
    assert call.tiles == "cpufree::gemm_tiles<double>((long long)(M), (long long)(N))"
    assert call.tile_symbols == {"M", "N"}
    # the launcher hands the facts it queried and the largest product's tiles to the rule of cpufree/launch.h
    # (tests/codegen/test_launch_rule.py runs it), which picks the kernel and its blocks per multiprocessor
    assert "#include <cpufree/launch.h>" in source.code
    assert f"(long long)({call.tiles}),  // the largest product's output tiles" in source.code
    assert "cpufree_state.bounded_spill_bytes = (long long)cpufree_bounded.localSizeBytes;" in source.code
    assert (
        f"if (cpufree::take_bounded_build(cpufree_facts)) {{\n        cpufree_kfn = {kernel}_bounded;\n"
        "        cpufree_per_sm = cpufree_state.per_sm_bounded;" in source.code
    )
    plain = dace_cpufree.kernel_source(go_fast.program)
    assert f"{plain.kernel}_bounded" not in plain.code and f"{plain.kernel}_body" not in plain.code


def test_products_counted_from_values_the_launcher_lacks_keep_one_build():
    source = dace_cpufree.kernel_source(product)
    calls = [
        dataclasses.replace(i, tile_symbols=i.tile_symbols | {"inner"}) if i.collective else i for i in items(source)
    ]
    head, wrappers, launch = host.kernel_builds(source.kernel, calls, source.args, False, "cuda", False, False)
    assert head == f"__global__ void {source.kernel}"
    assert (wrappers, launch) == ("", dict(bounded="", choose=""))
    head, wrappers, launch = host.kernel_builds(
        source.kernel, list(items(source)), source.args, False, "cuda", False, False
    )
    assert head.endswith("_body") and launch["choose"]
    # a kernel linked with relocatable device code (SHMEM) is built once
    head, wrappers, launch = host.kernel_builds(
        source.kernel, list(items(source)), source.args, False, "cuda", False, True
    )
    assert head == f"__global__ void {source.kernel}" and not wrappers


def test_a_batch_sharing_its_right_matrix_is_one_product():
    source = dace_cpufree.kernel_source(batched)
    (call,) = _products(source)
    assert "(long long)((Q * R))" in "\n".join(call.code)  # the call's row count is an argument of its text
    assert _products(dace_cpufree.kernel_source(both_batched)) == []


@pytest.mark.parametrize("program", [batched, both_batched], ids=lambda p: p.name)
def test_batched_products_match_numpy_under_the_race_checker(program):
    rng = np.random.default_rng(9)
    r, q, m, n, k = 3, 5, 7, 6, 9
    if program is batched:
        args = [rng.standard_normal((r, q, k)), rng.standard_normal((k, n)), np.zeros((r, q, n))]
    else:
        args = [rng.standard_normal((r, m, k)), rng.standard_normal((r, k, n)), np.zeros((r, m, n))]
    want = args[0] @ args[1]
    dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-12, atol=1e-12)


@dace.program
def per_row(A: dace.float64[M, K, N], B: dace.float64[N, N], C: dace.float64[M, K, N]):
    for i in dace.map[0:M]:
        C[i] = A[i] @ B


def test_products_on_slices_inside_a_map_are_refused_with_the_fix():
    """A product per map iteration would be a single thread's work on a moving window: refused before any code
    is generated, with the batched form as the fix."""
    with pytest.raises(NotPersistableError, match=r"inside a map.*C\[:\] = A @ B"):
        dace_cpufree.kernel_source(per_row)


@dace.program
def named_like_launcher_locals(grid: dace.float64[M, K], B: dace.float64[K, N], C: dace.float64[M, N]):
    tiles = grid @ B
    for block in range(2):
        tiles[:] = tiles * (0.5 + block)
    C[:] = tiles + C


def test_program_names_do_not_clash_with_the_launchers_own():
    """The host launcher declares its locals in the scope of the program's arguments and workspace arrays, which
    keep the program's names (``grid``, ``tiles``): each of its own is cpufree_-prefixed, so the program builds."""
    rng = np.random.default_rng(3)
    grid, B, C = rng.standard_normal((7, 5)), rng.standard_normal((5, 6)), rng.standard_normal((7, 6))
    want = 0.75 * (grid @ B) + C
    dace_cpufree.compile(named_like_launcher_locals, backend="emulate")(grid, B, C)
    np.testing.assert_allclose(C, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "program",
    [product, transposed, transposed_left, transposed_right, chain, repeated, independent],
    ids=lambda p: p.name,
)
@pytest.mark.parametrize("order", ["forward", "shuffle"])
def test_products_match_numpy_under_the_race_checker(program, order):
    dtype = np.float32 if program is chain else np.float64
    args = _inputs(program, dtype)
    want = [a.copy() for a in args]
    program.f(*want)
    dace_cpufree.compile(program, backend="emulate", race_check=order)(*args)
    for got, expected in zip(args, want):  # every output (independent has two)
        np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_operands_with_longer_rows_keep_their_leading_dimensions():
    """Slices of wider arrays are products of their own: the call takes the arrays' row lengths as leading dimensions
    (the DMMA tile copies 16 bytes from such rows where they are even), and the emulation matches NumPy."""
    source = dace_cpufree.kernel_source(padded)
    (call,) = _products(source)
    code = "\n".join(call.code)
    assert "_a, (long long)((K + 2)), false, _b, (long long)((N + 4)), false," in code
    args = _inputs(padded, np.float64, 70, 66, 50)
    want = _expected(padded, args)
    dace_cpufree.compile(padded, backend="emulate", race_check=True)(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-12, atol=1e-12)


@pytest.mark.compile
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvcc_builds_the_tensor_core_product(arch, tmp_path):
    nvcc = find_nvcc()
    assert nvcc, "nvcc not found (the compile marker skips this test only outside CI)"
    source = dace_cpufree.kernel_source(product)
    src = tmp_path / "product.cu"
    src.write_text(source.code)
    cmd = [nvcc, "-std=c++17", f"-arch={arch}", f"-I{INCLUDE_DIR}", *nvcc_flags(), "-ptx", str(src), "-o", "p.ptx"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ptx = (tmp_path / "p.ptx").read_text()
    assert re.search(r"mma\.sync\.aligned\.m\d+n\d+k\d+\.row\.col\.f64", ptx)  # FP64 tensor cores (DMMA)
    # the kernel bounded to three blocks of the tile's 128 threads per multiprocessor
    assert re.search(rf"\.entry \w*{source.kernel}_bounded\w*\([^)]*\)\s*\.maxntid 128, 1, 1\s*\.minnctapersm 3", ptx)
    # on sm_90 the unbounded build compiles the DMMA tile (16x8x8) and CUTLASS's for the products it does not take
    # (16x8x4), the bounded build CUTLASS's only; on sm_80 both CUTLASS's 8x8x4
    chunks = re.split(r"(?=\.(?:visible\s+)?(?:entry|func)\s)", ptx)
    named = {re.match(r"\.(?:visible\s+)?(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", c).group(1): c for c in chunks[1:]}
    (bounded,) = [body for name, body in named.items() if f"{source.kernel}_bounded" in name]
    (unbounded,) = [body for name, body in named.items() if source.kernel in name and "_bounded" not in name]
    atoms = {
        label: set(re.findall(r"mma\.sync\.aligned\.(m\d+n\d+k\d+)\.row\.col\.f64", body))
        for label, body in (("bounded", bounded), ("unbounded", unbounded))
    }
    if arch == "sm_90":
        assert atoms == {"bounded": {"m16n8k4"}, "unbounded": {"m16n8k8", "m16n8k4"}}
    else:
        assert atoms == {"bounded": {"m8n8k4"}, "unbounded": {"m8n8k4"}}


@pytest.mark.compile
def test_the_builder_adds_the_library_for_the_kernels_that_name_it():
    source = dace_cpufree.kernel_source(transposed)
    library = build(source.code, "gemm_transposed", "cuda", environments=source.environments)
    assert library.stat().st_size > 0


@pytest.mark.gpu
@pytest.mark.parametrize(
    "program", [product, transposed, transposed_left, transposed_right, chain], ids=lambda p: p.name
)
@pytest.mark.parametrize("size", [(37, 29, 41), (300, 260, 513), (1000, 1100, 1200)])
def test_products_match_numpy_on_gpu(program, size):
    dtype = np.float32 if program is chain else np.float64
    args = _inputs(program, dtype, *size)
    if program in (transposed, transposed_right, chain):
        args[-1][:] = np.nan  # beta == 0: the output is not read
    want = _expected(program, args)
    dace_cpufree.compile(program)(*args)
    # float32: NumPy's own result is rounded too; sums of a thousand terms cancel to values far below the
    # matrix's scale, so the error is measured against that scale
    scale = float(np.abs(want).max())
    if dtype == np.float32:
        np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=2e-6 * scale)
    else:
        np.testing.assert_allclose(args[-1], want, rtol=1e-11, atol=1e-13 * scale)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "program, size",
    [
        (product, (1000, 1100, 1200)),  # many tiles, inside and at the edges
        (product, (130, 70, 3000)),  # fewer tiles than blocks: K split over blocks
        (product, (334, 270, 518)),  # edges in M and N, a last K tile of 6
        (padded, (334, 270, 518)),  # leading dimensions past the operands' widths
    ],
    ids=lambda v: getattr(v, "name", None) or "x".join(map(str, v)),
)
def test_untransposed_even_products_match_numpy_in_the_unbounded_build_on_gpu(program, size):
    """The grid capped below two blocks per multiprocessor keeps the unbounded build, whose FP64 products with even
    dimensions take the DMMA tile on sm_90 (CUTLASS's on other devices)."""
    args = _inputs(program, np.float64, *size)
    want = _expected(program, args)
    _run_on_100_blocks(program, args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-11, atol=1e-13 * float(np.abs(want).max()))


def _run_on_100_blocks(program, args) -> int:
    """Runs a product program on the GPU with its grid capped at 100 blocks (below two per multiprocessor of the GPUs
    at hand); returns the grid the launch used. The cap is reset afterwards (the library is shared in the process)."""
    run = dace_cpufree.compile(program)
    try:
        run.configure(max_blocks=100)
        run(*args)
        return run.launch_config[0]
    finally:
        run.configure(max_blocks=0)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "program, size",
    [(product, (634, 1342, 1602)), (transposed, (635, 1341, 1601))],
    ids=lambda v: getattr(v, "name", None) or "x".join(map(str, v)),
)
def test_the_last_waves_tiles_split_match_numpy_on_gpu(program, size):
    """210 output tiles on a grid of 100 blocks: two whole waves, then the last ten tiles each split ten ways over K
    (cpufree/gemm_schedule.cuh; test_gemm_schedule.py checks the choice), those tiles of C scaled by beta first (1.5
    in `product`, 0 in `transposed`). The DMMA tile (even sizes) and CUTLASS's (transposed, odd)."""
    args = _inputs(program, np.float64, *size)
    want = _expected(program, args)
    assert _run_on_100_blocks(program, args) == 100
    np.testing.assert_allclose(args[-1], want, rtol=1e-11, atol=1e-13 * float(np.abs(want).max()))


@pytest.mark.gpu
@pytest.mark.parametrize(
    "program, dtype, size",
    [
        (product, np.float64, (200, 802, 900)),
        (transposed, np.float64, (201, 803, 901)),
        (chain, np.float32, (200, 802, 900)),
    ],
    ids=lambda v: getattr(v, "name", None) or getattr(v, "__name__", None) or "x".join(map(str, v)),
)
def test_stream_schedules_match_numpy_on_gpu(program, dtype, size):
    """On 100 blocks these products share all tiles' K steps out evenly (a stream schedule, test_gemm_schedule.py:
    52 FP64 tiles of 57 steps, 30 steps a block in two pieces; 28 FP32 tiles of 64 by 128, 16 steps), every piece
    added atomically into C scaled by beta first. The DMMA tile (even sizes), CUTLASS's (transposed, odd) and
    cuBLASDx's FP32 tile."""
    args = _inputs(program, dtype, *size)
    want = _expected(program, args)
    assert _run_on_100_blocks(program, args) == 100
    if dtype == np.float32:
        np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=2e-6 * float(np.abs(want).max()))
    else:
        np.testing.assert_allclose(args[-1], want, rtol=1e-11, atol=1e-13 * float(np.abs(want).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("program", [repeated, independent], ids=lambda p: p.name)
@pytest.mark.parametrize(
    "size, blocks",
    [((130, 70, 3000), 0), ((200, 802, 900), 100), ((634, 1342, 1602), 100)],
    ids=["every_tile_split", "stream", "last_wave_split"],
)
def test_split_products_taken_again_and_side_by_side_match_numpy_on_gpu(program, size, blocks):
    """Split-K products in a loop (one call site taken three times in a launch, each time scaling its split tiles and
    adding to them) and two products of one program, each launch twice: every output matches NumPy. Every tile split
    (the default grid), a stream schedule and a split last wave (100 blocks)."""
    run = dace_cpufree.compile(program)
    try:
        run.configure(max_blocks=blocks)
        for seed in (5, 6):  # two launches
            args = _inputs(program, np.float64, *size, seed=seed)
            want = [a.copy() for a in args]
            program.f(*want)
            run(*args)
            for got, expected in zip(args, want):
                np.testing.assert_allclose(got, expected, rtol=1e-11, atol=1e-13 * float(np.abs(expected).max()))
    finally:
        run.configure(max_blocks=0)


def _run_in_blocks(program, args, block_size: int, warns: bool) -> None:
    """Runs a product program on the GPU with a configured block size: configure() warns that the products need
    blocks of 128 threads exactly when `warns`; the launch uses the size rounded to whole warps (NVIDIA's 32 threads),
    the size the rule was judged on. The size is reset afterwards: the library is shared by every program object of
    this build in the process."""
    run = dace_cpufree.compile(program)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            run.configure(block_size=block_size)
        said = [str(w.message) for w in seen if f"configure(block_size={block_size})" in str(w.message)]
        assert any("in blocks of 128 threads" in m for m in said) == warns, said
        run(*args)
        assert run.launch_config[1] == block_size - block_size % 32
    finally:
        run.configure(block_size=0)


@pytest.mark.gpu
@pytest.mark.parametrize("block_size, warns", [(64, True), (256, True), (144, False)])
def test_a_block_size_the_tile_cannot_run_takes_the_plain_loop_on_gpu(block_size, warns):
    """CUTLASS's FP64 tile needs blocks of exactly its 128 threads (its main loop synchronises the block); a block size
    the user configured otherwise takes the plain loop, with the same result, and configure() warns. 144 threads are
    rounded to 128 (whole warps) by the launcher: the tile runs, no warning."""
    args = _inputs(product, np.float64, 300, 260, 513)
    want = _expected(product, args)
    _run_in_blocks(product, args, block_size, warns)
    np.testing.assert_allclose(args[-1], want, rtol=1e-11, atol=1e-13 * float(np.abs(want).max()))


@pytest.mark.gpu
@pytest.mark.parametrize("block_size, warns", [(256, False), (160, False), (64, True)])
def test_fp32_products_keep_their_tile_in_larger_blocks_on_gpu(block_size, warns):
    """cuBLASDx's FP32 tile runs in blocks of at least its 128 threads: configure() warns only below that; the result
    is the same either way."""
    args = _inputs(chain, np.float32, 200, 150, 170)
    want = _expected(chain, args)
    _run_in_blocks(chain, args, block_size, warns)
    np.testing.assert_allclose(args[-1], want, rtol=1e-4, atol=2e-6 * float(np.abs(want).max()))
