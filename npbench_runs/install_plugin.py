"""Install dace-cpufree as an NPBench framework: ``python -m npbench_runs.install_plugin /path/to/npbench``.

NPBench (github.com/spcl/npbench) finds a framework ``-f NAME`` through ``framework_info/NAME.json``,
whose ``"class"`` it looks up as an attribute of the package ``npbench.infrastructure``. So:

1. ``framework_info/dace_cpufree_gpu.json`` and ``framework_info/dace_cpufree_emulate.json`` are added;
2. ``npbench/infrastructure/dace_cpufree_framework.py`` (the class) is added;
3. one line, ``from .dace_cpufree_framework import *`` with a marker comment, is appended to
   ``npbench/infrastructure/__init__.py``: the registration NPBench's design requires (its own
   frameworks are imported the same way). Nothing else of NPBench is touched.

``--link`` makes symbolic links instead of copies (edits here take effect there);
``--uninstall`` removes the three files and the line again.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import npbench_plugin

MARKER = "# dace-cpufree plugin (python -m npbench_runs.install_plugin)"
IMPORT_LINE = f"from .dace_cpufree_framework import *  {MARKER}"


def _layout(root: Path) -> tuple[Path, Path, Path]:
    info = root / "framework_info"
    infra = root / "npbench" / "infrastructure"
    init = infra / "__init__.py"
    if not info.is_dir() or not init.is_file():
        raise SystemExit(
            f"{root} does not look like an NPBench checkout: expected {info}/ and {init}. "
            "Fix: pass the directory that contains run_benchmark.py."
        )
    return info, infra, init


def _place(src: Path, dst: Path, link: bool) -> None:
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    if link:
        dst.symlink_to(src)
    else:
        shutil.copyfile(src, dst)


def install(root: str | Path, link: bool = False) -> list[str]:
    """Installs the plugin into the NPBench checkout ``root``; returns what was touched."""
    root = Path(root).resolve()
    info, infra, init = _layout(root)
    if not npbench_plugin.FRAMEWORK_INFO:
        raise SystemExit(
            f"no framework descriptions in {npbench_plugin.PLUGIN_DIR / 'framework_info'}. Fix: run from a "
            "checkout of dace-cpufree (or an editable install: pip install -e .)."
        )
    touched = []
    for src in npbench_plugin.FRAMEWORK_INFO:
        _place(src, info / src.name, link)
        touched.append(f"{'linked' if link else 'copied'} {info / src.name}")
    target = infra / npbench_plugin.FRAMEWORK_MODULE.name
    _place(npbench_plugin.FRAMEWORK_MODULE, target, link)
    touched.append(f"{'linked' if link else 'copied'} {target}")
    text = init.read_text()
    if MARKER not in text:
        init.write_text(text + ("" if text.endswith("\n") or not text else "\n") + IMPORT_LINE + "\n")
        touched.append(f"appended to {init}: {IMPORT_LINE}")
    else:
        touched.append(f"{init} already imports the plugin")
    return touched


def uninstall(root: str | Path) -> list[str]:
    root = Path(root).resolve()
    info, infra, init = _layout(root)
    touched = []
    for path in [info / p.name for p in npbench_plugin.FRAMEWORK_INFO] + [infra / npbench_plugin.FRAMEWORK_MODULE.name]:
        if path.is_symlink() or path.exists():
            path.unlink()
            touched.append(f"removed {path}")
    lines = init.read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if MARKER not in ln]
    if len(kept) != len(lines):
        init.write_text("".join(kept))
        touched.append(f"removed the plugin's import line from {init}")
    return touched


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m npbench_runs.install_plugin",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("npbench", help="the NPBench checkout (the directory with run_benchmark.py)")
    parser.add_argument("--link", action="store_true", help="symbolic links instead of copies")
    parser.add_argument("--uninstall", action="store_true")
    args = parser.parse_args(argv)
    touched = uninstall(args.npbench) if args.uninstall else install(args.npbench, args.link)
    for line in touched:
        print(line)
    if not args.uninstall:
        names = ", ".join(npbench_plugin.FRAMEWORK_NAMES)
        print(
            f"frameworks: {names}. Example: cd {Path(args.npbench).resolve()} && "
            "python run_benchmark.py -b jacobi_2d -f dace_cpufree_emulate -p S"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
