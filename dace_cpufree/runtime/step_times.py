"""Where a launch's time went, block by block: the table of a kernel built with ``DACE_CPUFREE_STEP_TIMES=1``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class StepTimes:
    """Where the last launch's time went, block by block (a kernel built with ``DACE_CPUFREE_STEP_TIMES=1``).

    :ivar labels: the segments, in the order of their marks in the kernel: 0 is the control flow between
                  steps (loop tests, skipped branches, per-thread scalars); then each grid sync or block
                  barrier, and each step (map, copy, tasklet, communication) that follows it.
    :ivar us: ``blocks x segments``: µs that thread 0 of each block spent in each segment, summed over the
              whole launch (over all time steps). Thread 0's view: a step's time ends when thread 0 is done
              with it, while its block's other warps may still be at work (the next block barrier or grid sync
              then waits for them); a step that another thread runs (a wait made by warp 1, say) shows up in
              the block barrier after it.
    :ivar elapsed_us: per block, µs from its start to its end (its clock's own ns per cycle converts).
    :ivar launch: ``(grid, block)`` of that launch; only the first ``CPUFREE_TIMES_BLOCKS`` (4096) blocks are
                  recorded. The times are those of the last launch of any program loaded from the same built
                  library.
    """

    labels: list
    us: np.ndarray
    elapsed_us: np.ndarray
    launch: tuple = (0, 0)

    def table(self, per: int = 1) -> str:
        """A line per segment that took time: its number, name, and the minimum, mean and maximum over the
        blocks, in µs divided by ``per`` (e.g. the number of time steps)."""
        grid, block = self.launch
        head = f"(us / {per}; {len(self.us)} of {grid} blocks of {block} threads)"
        lines = [f"{'seg':>3}  {'segment':<48} {'min':>9} {'mean':>9} {'max':>9}  {head}"]
        for k, label in enumerate(self.labels):
            col = self.us[:, k] / per
            if col.max() > 0:
                lines.append(f"{k:3d}  {label[:48]:<48} {col.min():9.2f} {col.mean():9.2f} {col.max():9.2f}")
        total = self.elapsed_us / per
        lines.append(f"{'':3}  {'elapsed':<48} {total.min():9.2f} {total.mean():9.2f} {total.max():9.2f}")
        return "\n".join(lines)
