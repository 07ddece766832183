"""Arguments named like the connectors of library expansions' tasklets (``gemv_init`` writes ``out``, dot products
read ``__x``/``__y``, reductions write ``__out``): the expansions are inlined into the program beside those arrays,
so their connectors are renamed (:mod:`dace_cpufree.transformations.connector_names`). Each program compiles and
computes what NumPy computes in the emulation, under the race checker."""

import dace
import numpy as np
import pytest
from dace.sdfg import nodes
from dace_cpufree.transformations.connector_names import rename_connectors_named_like_outer_data

import dace_cpufree

M, N = (dace.symbol(s) for s in "MN")


@dace.program
def transposed_matvec(A: dace.float64[N, M], x: dace.float64[N], out: dace.float64[M]):
    out[:] = A.T @ x


@dace.program
def dot_transposed(x1: dace.float64[1, N], x2: dace.float64[M, N], out: dace.float64[1, M]):
    out[:] = np.dot(x1, x2.T)


@dace.program
def dot_product(__x: dace.float64[N], __y: dace.float64[N], _out: dace.float64[1]):
    _out[0] = np.dot(__x, __y)


@dace.program
def column_max(__inp: dace.float64[N, M], __out: dace.float64[M]):
    __out[:] = np.max(__inp, axis=0)


@dace.program
def transposes(__A: dace.float64[N, M], inp: dace.float64[N], b: dace.float64[M, N], _inp: dace.float64[M]):
    b[:] = np.transpose(__A)
    _inp[:] = __A.T @ inp


def _inputs(rng):
    A, x = rng.random((7, 5)), rng.random(7)
    x1, x2 = rng.random((1, 6)), rng.random((4, 6))
    y = rng.random(7)
    return {
        "transposed_matvec": (transposed_matvec, [A, x, np.zeros(5)], lambda a: a[0].T @ a[1]),
        "dot_transposed": (dot_transposed, [x1, x2, np.zeros((1, 4))], lambda a: np.dot(a[0], a[1].T)),
        "dot_product": (dot_product, [x, y, np.zeros(1)], lambda a: np.array([np.dot(a[0], a[1])])),
        "column_max": (column_max, [A, np.zeros(5)], lambda a: np.max(a[0], axis=0)),
    }


@pytest.mark.parametrize("name", ["transposed_matvec", "dot_transposed", "dot_product", "column_max"])
def test_clashing_argument_names_compute_numpys_result(name):
    program, args, reference = _inputs(np.random.default_rng(7))[name]
    want = reference(args)
    dace_cpufree.compile(program, backend="emulate", race_check="shuffle")(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-12)


def test_several_clashing_names_in_one_program():
    rng = np.random.default_rng(3)
    A, inp = rng.random((6, 4)), rng.random(6)
    b, out = np.zeros((4, 6)), np.zeros(4)
    dace_cpufree.compile(transposes, backend="emulate", race_check="shuffle")(A, inp, b, out)
    np.testing.assert_allclose(b, A.T)
    np.testing.assert_allclose(out, A.T @ inp, rtol=1e-12)


def test_only_clashing_connectors_of_nested_tasklets_are_renamed():
    """A nested tasklet's ``out`` (named like the program's array) becomes ``out_0``, in its code and on its edge;
    its other connectors, and tasklets of the top level, keep their names."""
    sdfg = dace.SDFG("outer")
    sdfg.add_array("out", [4], dace.float64)
    inner = dace.SDFG("inner")
    inner.add_array("y", [4], dace.float64)
    state = inner.add_state()
    state.add_mapped_tasklet("init", {"i": "0:4"}, {}, "out = 0", {"out": dace.Memlet("y[i]")}, external_edges=True)
    top = sdfg.add_state()
    nsdfg = top.add_nested_sdfg(inner, {}, {"y"})
    top.add_edge(nsdfg, "y", top.add_write("out"), None, dace.Memlet("out[0:4]"))
    assert rename_connectors_named_like_outer_data(sdfg) == 1
    (tasklet,) = [n for n in state.nodes() if isinstance(n, nodes.Tasklet)]
    assert list(tasklet.out_connectors) == ["out_0"]
    assert tasklet.code.as_string.strip() == "out_0 = 0"
    assert [e.src_conn for e in state.out_edges(tasklet)] == ["out_0"]
    sdfg.validate()
    assert rename_connectors_named_like_outer_data(sdfg) == 0  # nothing left to rename


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["transposed_matvec", "dot_transposed", "dot_product", "column_max"])
def test_clashing_argument_names_on_the_gpu(name):
    program, args, reference = _inputs(np.random.default_rng(8))[name]
    want = reference(args)
    dace_cpufree.compile(program)(*args)
    np.testing.assert_allclose(args[-1], want, rtol=1e-12)
