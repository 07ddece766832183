"""``print`` of symbols and symbolic expressions (the loop variable, ``v = t * 2``, ``N - t``): DaCe's own callback of
``print`` raises ``TypeError: argument of type 'symbol' is not iterable`` on them; our replacement of ``print``
(:func:`dace_cpufree.frontend.channel_calls.print_callback`, in place of ``print`` in the programs compiled here and
the programs they call) passes them as expressions, the kernel evaluates them and the host prints exactly what Python
prints."""

import dace
import numpy as np
import pytest
from dace.frontend.common import op_repository as oprepo
from dace_cpufree.frontend.channel_calls import print_callback

import dace_cpufree

N = dace.symbol("N")


@dace.program
def loop_counter(A: dace.float64[N]):
    for t in range(3):
        print(t)
        A[:] = A + 1


@dace.program
def expressions(A: dace.float64[N]):
    for t in range(3):
        v = t * 2
        print(v)
        print("step", t, A[0], N - t)
        print(t / 2, t // 2, t % 2, -t, sep=";", end="!\n")
        A[:] = A + 1


def expressions_reference(A):
    n = A.shape[0]
    lines = []
    for t in range(3):
        lines.append(f"{t * 2}")
        lines.append(" ".join(map(str, ("step", t, A[0], n - t))))
        lines.append(";".join(map(str, (t / 2, t // 2, t % 2, -t))) + "!")
        A[:] = A + 1
    return lines


@dace.program
def inner_step(A: dace.float64[N], t: dace.int64):
    print("inner", t, A[0])
    A[:] = A + 1


@dace.program
def nested(A: dace.float64[N]):
    for t in range(2):
        inner_step(A, t)
        print("outer", t, A[1])


@dace.program
def keyword_from_an_array(A: dace.float64[N]):
    for t in range(2):
        print(t, end=A[0])


def _printed(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("race_check", [None, "shuffle"])
def test_print_of_the_loop_variable(capsys, race_check):
    run = dace_cpufree.compile(loop_counter, backend="emulate", race_check=race_check)
    capsys.readouterr()
    A = np.zeros(5)
    run(A)
    assert _printed(capsys) == ["0", "1", "2"]
    np.testing.assert_allclose(A, 3.0)


def test_symbolic_expressions_print_as_python_prints_them(capsys):
    run = dace_cpufree.compile(expressions, backend="emulate", race_check="shuffle")
    capsys.readouterr()
    A = np.zeros(4)
    run(A)
    assert _printed(capsys) == expressions_reference(np.zeros(4))


def test_a_symbol_travels_as_an_integer_word():
    source = dace_cpufree.kernel_source(loop_counter)
    (call,) = source.channel.calls
    assert (call.name, call.args, call.results) == ("print", ("i",), ())


def test_prints_of_a_called_program_keep_their_own_text(capsys):
    run = dace_cpufree.compile(nested, backend="emulate")
    capsys.readouterr()
    run(np.zeros(4))
    assert _printed(capsys) == ["inner 0 0.0", "outer 0 1.0", "inner 1 1.0", "outer 1 2.0"]


def test_dace_keeps_its_own_print():
    """The replacement applies to the programs compiled here (their source reads ``print`` as ``print_of``): DaCe's
    ``print`` has no replacement, so programs DaCe compiles itself parse as they did."""
    assert oprepo.Replacements.get("print") is None
    assert oprepo.Replacements.get("dace_cpufree.frontend.channel_calls.print_of") is print_callback


def test_a_keyword_that_is_not_a_constant_is_refused_with_the_line():
    with pytest.raises(dace_cpufree.CpufreeError, match=r"print\(\.\.\.\) at .*test_print_symbols.py:\d+ passes end="):
        dace_cpufree.kernel_source(keyword_from_an_array)


@pytest.mark.gpu
def test_gpu_print_of_symbols(capsys):
    run = dace_cpufree.compile(expressions)
    capsys.readouterr()
    run(np.zeros(1 << 12))
    assert _printed(capsys) == expressions_reference(np.zeros(1 << 12))
