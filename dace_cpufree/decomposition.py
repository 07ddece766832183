"""The automatic domain decomposition of a single-GPU program (``compile(prog, distribute={"A": 0, ...})``), as
typed facts: what the distribution pass (:mod:`dace_cpufree.transformations.distribute`) decided and what the host
side (:mod:`dace_cpufree.runtime.distributed`) and ``dace-cpufree inspect --distribute`` read.

The split arrays are cut into blocks along one axis each; all of them index one global axis, the *template*, of
``extent`` elements. PE ``p`` of ``P`` owns template indices ``[p * local, min((p + 1) * local, extent))`` with
``local = ceil(extent / P)`` and computes exactly the elements it owns (owner computes: every map that writes a
split array runs over the owned part of its range). A split array stores its owned block with ``lower`` halo
elements below it and ``upper`` above it (the widths the program's reads need): element ``j`` of the global array
lives at local index ``j + offset - p * local + lower``. Arrays that the named ones pass their values through
(the frontend's temporaries) are split the same way, aligned by the program's index offsets.
"""

from __future__ import annotations

from dataclasses import dataclass

import dace

#: the symbol of the owned block's length along the template (``ceil(extent / P)``), an argument of the kernel
LOCAL_SYMBOL = "__cpufree_local"
#: the flags of the halo exchanges: two per exchange (from below, from above), an argument the host zeroes per call
FLAGS_ARRAY = "__cpufree_halo_flags"


@dataclass(frozen=True)
class Split:
    """One split array. ``offset``: template index minus element index (0 for the arrays the caller named);
    ``lower``/``upper``: halo widths below and above the owned block; ``named``: given in ``distribute``."""

    array: str
    axis: int
    offset: int
    lower: int
    upper: int
    named: bool
    local_shape: str = ""

    @property
    def halo(self) -> bool:
        return self.lower + self.upper > 0


@dataclass(frozen=True)
class Exchange:
    """A halo exchange: after the step that writes ``array`` (program line ``line``), its edge elements go to the
    neighbours' halos, ``flags`` (from below, from above) signal their arrival, and the PE waits for both before
    the next step."""

    array: str
    after: str
    line: str
    flags: tuple[int, int]


@dataclass(frozen=True)
class Reduction:
    """A reduction over a split array: each PE reduces its owned part, then ``Allreduce`` (``op``) combines them."""

    array: str
    op: str
    line: str


@dataclass(frozen=True)
class Decomposition:
    """The decomposition of one program: the template's ``extent`` (an expression of the program's symbols), its
    split arrays, halo exchanges and reductions."""

    extent: str
    splits: tuple[Split, ...]
    exchanges: tuple[Exchange, ...]
    reductions: tuple[Reduction, ...]

    def split(self, name: str) -> Split | None:
        return next((s for s in self.splits if s.array == name), None)

    def describe(self, pes: int, symbols: dict[str, int] | None = None) -> str:
        """The decomposition as text: each array's local shape and halos, every exchange and reduction."""
        lines = [f"template: {self.extent} elements over {pes} PEs"]
        extent = None
        if symbols is not None:
            extent = int(dace.symbolic.evaluate(dace.symbolic.pystr_to_symbolic(self.extent), symbols))
            lines[0] += f" = {extent}, {-(-extent // pes)} per PE (the last PE owns the rest)"
        for s in self.splits:
            what = "named" if s.named else f"aligned temporary (offset {s.offset})"
            lines.append(
                f"  {s.array}: axis {s.axis} split, local shape {s.local_shape}, halo {s.lower} below / {s.upper} "
                f"above ({what})"
            )
        for e in self.exchanges:
            split = self.split(e.array)
            ways = [w for w, n in (("up to the lower halo above", split.lower), ("down to the upper halo below",
                                                                            split.upper)) if n]
            lines.append(
                f"  exchange of {e.array} after step '{e.after}' ({e.line}): edges {' and '.join(ways)} (flags "
                f"{e.flags[0]}, {e.flags[1]}), waited for before the next step"
            )
        for r in self.reductions:
            lines.append(f"  reduction over {r.array} ({r.line}): owned part on each PE, then Allreduce({r.op})")
        return "\n".join(lines)


def decomposition_of(sdfg: dace.SDFG) -> Decomposition | None:
    """The decomposition the distribution pass left on ``sdfg``, if it ran."""
    return getattr(sdfg, "_cpufree_decomposition", None)


def set_decomposition(sdfg: dace.SDFG, decomposition: Decomposition) -> None:
    sdfg._cpufree_decomposition = decomposition
