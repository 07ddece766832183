"""The host's view of a running kernel's progress: a live bar (tqdm, rich) or text lines."""

from __future__ import annotations

import sys
import time


class ProgressView:
    """A live bar of ``(done, total)``: tqdm, rich, or text lines; closed at the end of the call."""

    def __init__(self, kind, label: str):
        self.kind = _renderer(kind)
        self.label = label
        self._bar = None
        self._last_line = 0.0
        self._shown = None  # text lines: the last (done, total) printed
        self._seen = None  # the last (done, total) given

    def update(self, done: int, total: int) -> None:
        total = total if total > 0 else None
        if self.kind == "tqdm":
            if self._bar is None:
                from tqdm.auto import tqdm

                self._bar = tqdm(total=total, desc=self.label, leave=True)
            if total != self._bar.total:
                self._bar.total = total
            self._bar.update(done - self._bar.n)
        elif self.kind == "rich":
            if self._bar is None:
                from rich.progress import Progress

                self._bar = Progress(transient=False)
                self._bar.start()
                self._task = self._bar.add_task(self.label, total=total)
            self._bar.update(self._task, completed=done, total=total)
        else:
            self._seen = (done, total)
            now = time.monotonic()
            if now - self._last_line >= 1.0:
                self._last_line = now
                self._line(done, total)

    def _line(self, done: int, total: int | None) -> None:
        self._shown = (done, total)
        print(f"{self.label}: {done}" + (f"/{total}" if total else ""), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.kind == "text" and self._seen is not None and self._seen != self._shown:
            self._line(*self._seen)  # where the call ended
        if self._bar is None:
            return
        if self.kind == "tqdm":
            self._bar.close()
        else:
            self._bar.stop()
        self._bar = None


def _renderer(kind) -> str:
    if kind in ("tqdm", "rich", "text"):
        return kind
    for name in ("tqdm", "rich"):
        try:
            __import__(name)
            return name
        except ImportError:
            continue
    return "text"
