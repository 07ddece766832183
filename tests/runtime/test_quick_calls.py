"""Calls of the common kind (every parameter named or all in order, C-contiguous arrays of the declared dtype) bind
by plain comparisons and what was worked out for the same shapes before (``Signature.quick``); everything else takes
the general path. These tests check that what is kept across calls changes no result and lets no bad argument
through, and the binding of device arrays (a stand-in for CuPy: no GPU needed)."""

import sys
import types

import dace
import gridscope_programs as g
import numpy as np
import pytest

import dace_cpufree
from dace_cpufree import ArgumentError
from dace_cpufree.runtime.arguments import Signature

N, M = dace.symbol("N"), dace.symbol("M")


@dace.program
def axpy_rows(alpha: dace.float64, X: dace.float64[N, M], Y: dace.float64[N, M], reps: dace.int64):
    for _ in range(reps):
        Y[:] = alpha * X + Y


@dace.program
def plus_one(A: dace.float64[N]):
    return A + 1.0


@pytest.fixture(scope="module")
def run():
    return dace_cpufree.compile(axpy_rows, backend="emulate")


@pytest.fixture(scope="module")
def ret():
    return dace_cpufree.compile(plus_one, backend="emulate")


def _args(n, m, seed=0):
    rng = np.random.default_rng(seed)
    return dict(alpha=np.float64(1.5), X=rng.random((n, m)), Y=rng.random((n, m)), reps=2)


def _expected(args):
    return args["Y"] + args["reps"] * args["alpha"] * args["X"]


@pytest.mark.parametrize("positional", [False, True])
def test_calls_with_other_sizes_and_new_arrays_are_correct(run, positional):
    for n, m in [(4, 5), (7, 3), (4, 5), (1, 9), (7, 3)]:
        args = _args(n, m, seed=n * m)
        want = _expected(args)
        assert run._signature.quick((), dict(args)) is not None  # the common path takes this call
        if positional:
            run(*args.values())
        else:
            run(**args)
        np.testing.assert_allclose(args["Y"], want)


def test_sizes_named_beside_the_parameters_take_the_common_path_when_the_shapes_agree(run):
    """NPBench calls a DaCe program with every size as a keyword too: equal to the shapes', such a call is of the
    common kind; a size that differs, or a keyword that is no size the shapes give, goes to the general path."""
    for n, m in [(4, 5), (7, 3)]:
        args = _args(n, m, seed=n + m)
        want = _expected(args)
        assert run._signature.quick((), dict(args, N=n, M=np.int64(m))) is not None
        run(**args, N=n, M=m)
        np.testing.assert_allclose(args["Y"], want)
    args = _args(4, 5)
    assert run._signature.quick((), dict(args, N=4, M=6)) is None
    assert run._signature.quick((), dict(args, N=4, K=5)) is None
    assert run._signature.quick((), dict(args, N=4.0)) is None
    with pytest.raises(ArgumentError, match=r"has shape \(4, 5\), expected \(4, 6\)"):
        run(**args, N=4, M=6)
    with pytest.raises(ArgumentError, match=r"size 'N' is 4\.0 \(float\); sizes are integers\. Fix: pass N as an int"):
        run(**args, N=4.0)
    # what the common path keeps per order of keywords: the same names in another order, a parameter left out
    assert run._signature.quick((), dict(reversed(list(dict(args, N=4, M=5).items())))) is not None
    missing = {k: v for k, v in dict(args, N=4, M=5).items() if k != "Y"}
    for _ in range(2):
        assert run._signature.quick((), dict(missing)) is None
    assert run._signature._given[tuple(missing)] is False  # kept for that order of keywords


def test_returned_arrays_follow_the_sizes_of_each_call(ret):
    for n in (3, 8, 3):
        a = np.arange(float(n))
        out = ret(A=a)
        assert out.shape == (n,)
        np.testing.assert_allclose(out, a + 1)
        out2 = ret(a)
        assert out2 is not out  # a fresh array each call
        np.testing.assert_allclose(out2, a + 1)


def test_launch_facts_are_those_of_the_last_call():
    @dace.program
    def plus_two(A: dace.float64[N]):  # a library of its own: no other test has launched it
        return A + 2.0

    prog = dace_cpufree.compile(plus_two, backend="emulate")
    assert prog.launch_config == (0, 0) and np.isnan(prog.last_kernel_ms)  # no call yet
    prog(A=np.arange(5.0))
    grid, block = prog.launch_config
    assert grid >= 1 and block >= 1 and prog.last_kernel_ms >= 0
    assert prog.launch_config == (grid, block)  # read again: the same launch
    with pytest.raises(ArgumentError):
        prog(A=np.ones(5, dtype=np.float32))  # refused before a launch: the facts stay the last launch's
    assert prog.launch_config == (grid, block) and prog.last_kernel_ms >= 0


def test_a_transposed_view_of_the_same_shape_is_not_taken_for_the_array(run):
    x = np.arange(16.0).reshape(4, 4)
    args = dict(alpha=np.float64(2.0), X=x, Y=np.ones((4, 4)), reps=1)
    run(**args)  # the common path now keeps these shapes
    args = dict(alpha=np.float64(2.0), X=x.T, Y=np.ones((4, 4)), reps=1)
    assert run._signature.quick((), dict(args)) is None  # same shape, other strides: the general path
    with pytest.raises(ArgumentError, match=r"'X' must be a C-contiguous"):
        run(**args)


@pytest.mark.parametrize(
    "change, match",
    [
        (dict(X=np.ones((4, 5), dtype=np.float32)), r"'X' has dtype float32, expected float64"),
        (dict(X=np.ones((4, 6))), r"'Y' has shape \(4, 5\), expected \(4, 6\)|'X' has shape"),
        (dict(X=np.ones(4)), r"'X' has 1 dimensions, the program expects 2"),
        (dict(X=np.ones((4, 10))[:, ::2]), r"'X' must be a C-contiguous"),
        (dict(X=[[1.0] * 5] * 4), r"'X' is a list.*Fix: pass np\.asarray"),
        (dict(alpha="two"), r"'alpha' is 'two'"),
        (dict(reps=2.5), r"'reps' is 2\.5 .*Fix: pass an integer"),
        (dict(reps=1 << 70), r"'reps' is .*Fix: pass an integer"),
    ],
)
def test_bad_arguments_are_refused_after_good_calls_of_the_same_sizes(run, change, match):
    run(**_args(4, 5))
    run(**_args(4, 5))
    with pytest.raises(ArgumentError, match=match):
        run(**{**_args(4, 5), **change})
    run(**_args(4, 5))  # and the next good call still runs


def test_a_read_only_output_is_refused_after_good_calls(run):
    run(**_args(4, 5))
    args = _args(4, 5)
    args["Y"].setflags(write=False)
    with pytest.raises(ArgumentError, match=r"'Y' is read-only"):
        run(**args)


def test_scalars_of_other_types_are_passed_as_the_general_path_passes_them(run):
    cases = [(2, 1), (np.float32(0.5), np.int32(3)), (True, np.int64(2)), (np.array(1.25), np.array(1))]
    for k, (alpha, reps) in enumerate(cases):
        args = {**_args(3, 4), "alpha": alpha, "reps": reps}
        assert (run._signature.quick((), dict(args)) is None) == (k == 3)  # 0-d arrays: the general path
        want = args["Y"] + int(reps) * float(alpha) * args["X"]
        run(**args)
        np.testing.assert_allclose(args["Y"], want)


def test_sizes_a_program_refuses_are_refused_on_every_call():
    run = dace_cpufree.compile(g.jacobi_1d_periodic, backend="emulate")
    for n in (3, 16, 3):
        A = np.random.default_rng(n).random(n)
        if n == 3:
            with pytest.raises(ArgumentError, match="block functions of 'relax' would touch the same"):
                run(A, A.copy(), 1)
            continue
        ref = g.jacobi_1d_reference(A, 2)
        run(A, A.copy(), 2)
        np.testing.assert_allclose(A, ref)


# ---- device arrays: the binding alone, with a stand-in for CuPy --------------------------------------------------


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class _DeviceArray:
    """What the common path reads of a CuPy array: shape, dtype, strides, ``nbytes`` and ``data.ptr``."""

    def __init__(self, shape, dtype=np.float64, strides=None, ptr=0x7000):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.strides = strides or tuple(int(s) for s in np.empty(shape, dtype).strides)
        self.data = _Pointer(ptr)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.data.ptr, False), "version": 3}


@pytest.fixture
def device_signature(run, monkeypatch):
    fake = types.ModuleType("cupy")
    fake.ndarray = _DeviceArray
    fake.empty = lambda shape, dtype: _DeviceArray(shape, dtype, ptr=0x9000)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    return Signature(run.sdfg, run._host_args, device=True, quick=True)


def test_device_arrays_bind_by_their_pointers(device_signature):
    sig = device_signature
    x, y = _DeviceArray((4, 5), ptr=0x1000), _DeviceArray((4, 5), ptr=0x2000)
    call, returned = sig.quick((), dict(alpha=1.5, X=x, Y=y, reps=np.int64(2)))
    launch = dict(zip([a.name for a in sig.host_args], call))
    assert launch["X"] == 0x1000 and launch["Y"] == 0x2000 and launch["alpha"] == 1.5 and launch["reps"] == 2
    assert {launch[s] for s in ("N", "M") if s in launch} <= {4, 5} and returned == []
    x2 = _DeviceArray((6, 2), ptr=0x3000)
    call, _ = sig.quick((1.5, x2, _DeviceArray((6, 2), ptr=0x4000), 1), {})
    launch = dict(zip([a.name for a in sig.host_args], call))
    assert launch["X"] == 0x3000 and launch["Y"] == 0x4000
    # Y (written) overlapping X by one element: the general path, which refuses it
    values = dict(alpha=1.5, X=_DeviceArray((4, 5), ptr=0x1000), Y=_DeviceArray((4, 5), ptr=0x1000 + 19 * 8), reps=1)
    assert sig.quick((), dict(values)) is None
    with pytest.raises(ArgumentError, match=r"'Y' and 'X' share memory, and the program writes 'Y'"):
        sig.check_values(dict(values))


@pytest.mark.parametrize(
    "x",
    [
        np.ones((4, 5)),  # a host array: copied to the device by the general path
        _DeviceArray((4, 5), dtype=np.float32),
        _DeviceArray((4, 5), strides=(8, 32)),  # not C-contiguous
        _DeviceArray((4, 6)),  # sizes that disagree with Y's
        _DeviceArray((20,)),
    ],
)
def test_device_arguments_off_the_common_path_go_to_the_general_path(device_signature, x):
    assert device_signature.quick((), dict(alpha=1.5, X=x, Y=_DeviceArray((4, 5), ptr=0x8000), reps=1)) is None


def test_device_returns_are_new_device_arrays(ret, monkeypatch):
    fake = types.ModuleType("cupy")
    fake.ndarray = _DeviceArray
    fake.empty = lambda shape, dtype: _DeviceArray(shape, dtype, ptr=0x9000)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    sig = Signature(ret.sdfg, ret._host_args, device=True, quick=True)
    call, returned = sig.quick((_DeviceArray((7,), ptr=0x1000),), {})
    assert len(returned) == 1 and returned[0].shape == (7,) and 0x9000 in call and 0x1000 in call
