"""Memory layout of the two ends of a put: contiguous, or rows of strided elements.

Both ends have the same shape once unit dimensions are dropped (checked by the frontend). A put is
*contiguous* when both ends are one dense run of elements; otherwise it is a set of rows along the
last dimension, each row a strided sequence on both sides.
"""

from __future__ import annotations

from dataclasses import dataclass

import dace
from dace import subsets

from dace_cpufree.cpp import INDEX_T, cexpr


def _dims(desc, subset: subsets.Range) -> list[tuple]:
    """``(size, element stride)`` of each non-unit dimension of ``subset`` in ``desc``."""
    out = []
    for size, (_, _, step), stride in zip(subset.size(), subset.ndrange(), desc.strides):
        if size != 1:
            out.append((size, stride * step))
    return out


def _equal(a, b) -> bool:
    return dace.symbolic.simplify(dace.symbolic.pystr_to_symbolic(str(a)) - b) == 0


def is_dense(dims: list[tuple]) -> bool:
    """Whether dimensions ``(size, stride)`` cover one dense run of memory (row-major)."""
    expected = 1
    for size, stride in reversed(dims):
        if not _equal(stride, expected):
            return False
        expected = expected * size
    return True


@dataclass
class PutLayout:
    """How a put's elements are laid out: ``dims`` is ``[(size, src stride, dest stride)]``."""

    dims: list
    contiguous: bool
    count: object  # element count (symbolic)

    @classmethod
    def of(cls, src_desc, src_subset, dest_desc, dest_subset) -> PutLayout:
        sdims, ddims = _dims(src_desc, src_subset), _dims(dest_desc, dest_subset)
        dims = [(size, ss, ds) for (size, ss), (_, ds) in zip(sdims, ddims)]
        count = src_subset.num_elements()
        return cls(dims, is_dense(sdims) and is_dense(ddims), count)

    def rows(self) -> tuple[str, str, str, str]:
        """``(row count, row length, src stride, dest stride)`` of the rows along the last dimension."""
        if not self.dims:
            return "1", "1", "1", "1"
        outer = [size for size, _, _ in self.dims[:-1]]
        length, ss, ds = self.dims[-1]
        rows = " * ".join(f"({cexpr(s)})" for s in outer) if outer else "1"
        return rows, cexpr(length), cexpr(ss), cexpr(ds)

    @property
    def dense_rows(self) -> bool:
        """Whether each row along the last dimension is one dense run on both ends (a plane's interior)."""
        return bool(self.dims) and _equal(self.dims[-1][1], 1) and _equal(self.dims[-1][2], 1)

    @property
    def shared_rows(self) -> bool:
        """Whether the put is rows dense on both ends, more than one, and not one dense run: the form that
        the blocks of a lane share (see :mod:`dace_cpufree.frontend.putmem`)."""
        return not self.contiguous and self.dense_rows and len(self.dims) > 1

    def decode(self, index: str, upto: int) -> list[str]:
        """C++ lines that turn ``index`` over dims ``[0, upto)`` into ``__so``/``__do`` element offsets."""
        lines = [f"{INDEX_T} __q = {index}, __so = 0, __do = 0;"]
        for k in reversed(range(upto)):
            size, ss, ds = self.dims[k]
            digit = "__q" if k == 0 else f"__q % ({cexpr(size)})"
            lines.append(
                f"{{ const {INDEX_T} __i = {digit}; __so += __i * ({cexpr(ss)}); __do += __i * ({cexpr(ds)}); }}"
            )
            if k > 0:
                lines.append(f"__q /= ({cexpr(size)});")
        return lines
