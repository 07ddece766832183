"""Progress display: ``rich`` if installed, else ``tqdm``, else plain lines on stdout."""

from __future__ import annotations

import sys


class _Plain:
    def __init__(self, total: int, title: str):
        self.total, self.done, self.title = total, 0, title
        print(f"{title}: {total} steps", flush=True)

    def status(self, text: str) -> None:
        pass

    def advance(self, text: str = "") -> None:
        self.done += 1
        print(f"[{self.done}/{self.total}] {text}", flush=True)

    def log(self, text: str) -> None:
        print(text, flush=True)

    def close(self) -> None:
        pass


class _Tqdm(_Plain):
    def __init__(self, total: int, title: str):
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=title, file=sys.stdout, dynamic_ncols=True)

    def status(self, text: str) -> None:
        self.bar.set_postfix_str(text)

    def advance(self, text: str = "") -> None:
        if text:
            self.bar.write(text)
        self.bar.update(1)

    def log(self, text: str) -> None:
        self.bar.write(text)

    def close(self) -> None:
        self.bar.close()


class _Rich(_Plain):
    def __init__(self, total: int, title: str):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[status]}"),
        )
        self.progress.start()
        self.task = self.progress.add_task(title, total=total, status="")

    def status(self, text: str) -> None:
        self.progress.update(self.task, status=text)

    def advance(self, text: str = "") -> None:
        if text:
            self.progress.console.print(text, highlight=False, markup=False)
        self.progress.advance(self.task)

    def log(self, text: str) -> None:
        self.progress.console.print(text, highlight=False, markup=False)

    def close(self) -> None:
        self.progress.stop()


def progress(total: int, title: str, kind: str = "auto"):
    """A progress display with ``status``/``advance``/``log``/``close``; ``kind``: auto, rich, tqdm, plain."""
    order = {"auto": (_Rich, _Tqdm), "rich": (_Rich,), "tqdm": (_Tqdm,), "plain": ()}[kind]
    if sys.stdout.isatty() or kind != "auto":
        for cls in order:
            try:
                return cls(total, title)
            except ImportError:
                continue
    return _Plain(total, title)
