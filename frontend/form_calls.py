"""The calls that :mod:`.source_forms` writes into a program's source, registered with DaCe's operator repository:
each builds its part of the SDFG, and each has a NumPy counterpart, which is what the name is bound to in the
program's globals (DaCe finds the registered replacement by that function's qualified name)."""

from __future__ import annotations

import dace
import numpy as np
from dace.frontend.common import op_repository as oprepo
from dace.memlet import Memlet

from dace_cpufree.errors import NotPersistableError

from .arguments import call_site


def flip_of(array, axis):
    """``np.flip(array, axis)`` (the rewritten programs call it on the host too)."""
    return np.flip(array, axis)


def array_of(*values, dtype=None):
    """``np.array([a, b, c])`` of scalars, as NumPy computes it (the rewritten programs call it on the host too)."""
    return np.array(values, dtype=dtype)


def mask_of(mask, array):
    """``mask``, checked to have ``array``'s shape (the rewritten programs call it on the host too)."""
    if np.shape(mask) != np.shape(array):
        raise IndexError(f"boolean index of shape {np.shape(mask)} does not match the array's {np.shape(array)}")
    return mask


def _scalar_type(sdfg: dace.SDFG, value) -> np.dtype:
    if isinstance(value, str) and value in sdfg.arrays:
        return np.dtype(sdfg.arrays[value].dtype.type)
    if dace.symbolic.issymbolic(value):
        return np.dtype(np.int64)
    return np.asarray(value).dtype


@oprepo.replaces(f"{__name__}.array_of")
def _array_of(pv, sdfg: dace.SDFG, state, *values, dtype=None):
    """A new 1-D array of the values (scalars in memory, symbols, constants), one tasklet writing every element."""
    for v in values:
        if isinstance(v, str) and v in sdfg.arrays and sdfg.arrays[v].total_size != 1:
            raise NotPersistableError(
                f"{call_site(pv, 'np.array([...])')}: element {v} is an array, not a scalar. Fix: build the array "
                "with np.empty and assign its rows, or use np.stack."
            )
    kind = np.result_type(*[_scalar_type(sdfg, v) for v in values]) if dtype is None else np.dtype(dtype)
    name, _ = sdfg.add_temp_transient([len(values)], dace.dtypes.typeclass(kind.type))
    inputs, code = {}, []
    for i, v in enumerate(values):
        if isinstance(v, str) and v in sdfg.arrays:
            inputs[f"__v{i}"] = v
            code.append(f"__o{i} = __v{i}")
        else:
            code.append(f"__o{i} = {dace.symbolic.symstr(v) if dace.symbolic.issymbolic(v) else repr(v)}")
    tasklet = state.add_tasklet(
        "array_of", dict.fromkeys(inputs), {f"__o{i}": None for i in range(len(values))}, "\n".join(code)
    )
    out = state.add_write(name)
    for conn, data in inputs.items():
        state.add_edge(state.add_read(data), None, tasklet, conn, Memlet.from_array(data, sdfg.arrays[data]))
    for i in range(len(values)):
        state.add_edge(tasklet, f"__o{i}", out, None, Memlet(f"{name}[{i}]"))
    return name


@oprepo.replaces(f"{__name__}.mask_of")
def _mask_of(pv, sdfg: dace.SDFG, state, mask, array):
    """The mask of a rewritten masked reduction, refused where its shape is not the array's (NumPy would select
    rows, or raise)."""
    shapes = [list(sdfg.arrays[x].shape) if isinstance(x, str) and x in sdfg.arrays else [] for x in (mask, array)]
    if shapes[0] != shapes[1]:
        raise NotPersistableError(
            f"{call_site(pv, 'boolean selection')}: the mask's shape {tuple(shapes[0])} is not the array's "
            f"{tuple(shapes[1])}, so the selection is not element by element. Fix: reduce "
            "np.where(mask, array, 0) with a mask broadcast to the array's shape."
        )
    return mask


@oprepo.replaces(f"{__name__}.flip_of")
def _flip_of(pv, sdfg: dace.SDFG, state, array: str, axis):
    """A new array holding ``array`` (an array or a view of a slice) reversed along ``axis`` (an int or a list), one
    map; DaCe's own ``np.flip`` gives a view of a slice a view as its result, which DaCe's validation refuses."""
    desc = sdfg.arrays[array]
    shape = list(desc.shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, (list, tuple)) else [axis])}
    name, _ = sdfg.add_temp_transient(shape, desc.dtype)
    index = [f"__f{i}" for i in range(len(shape))]
    source = [f"{s} - 1 - {i}" if k in axes else i for k, (s, i) in enumerate(zip(shape, index))]
    state.add_mapped_tasklet(
        name="flip",
        map_ranges={i: f"0:{s}" for i, s in zip(index, shape)},
        inputs={"__in": Memlet(f"{array}[{', '.join(map(str, source))}]")},
        code="__out = __in",
        outputs={"__out": Memlet(f"{name}[{', '.join(index)}]")},
        external_edges=True,
    )
    return name
