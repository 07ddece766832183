"""The ``dace-cpufree`` command: ``demo`` and ``inspect``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from dace_cpufree.errors import CpufreeError


def load_program(spec: str):
    """Loads ``path/to/file.py:function`` (a ``@dace.program``)."""
    path, _, func = spec.rpartition(":")
    if not path or not func:
        raise CpufreeError(f"'{spec}' is not of the form path/to/file.py:function.")
    file = Path(path)
    if not file.exists():
        raise CpufreeError(f"no such file: {file}")
    module_spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, str(file.parent.resolve()))
    module_spec.loader.exec_module(module)
    if not hasattr(module, func):
        raise CpufreeError(f"{file} has no function '{func}'.")
    return getattr(module, func)


def summary(source) -> str:
    """What was generated, in a few lines."""
    lines = [
        f"kernel        : {source.kernel} ({source.dialect.name}), launched once, cooperatively",
        f"work items    : {source.items} (maps, copies, scalar tasklets) fused into it",
        f"grid.sync()   : {source.grid_syncs} site(s) in the kernel text",
        "arguments     : " + ", ".join(f"{a.name} [{a.kind}]" for a in source.args),
        "steps (in program order; '|' = grid.sync() before):",
    ]
    lines += [f"  {'|' if sync else ' '} {label}: {strategy}" for label, strategy, sync in source.steps or []]
    return "\n".join(lines)


def _split_arg(text: str | None) -> dict[str, int] | None:
    """``A:0,B:0`` as ``{"A": 0, "B": 0}``."""
    if text is None:
        return None
    out = {}
    for item in text.split(","):
        name, _, axis = item.partition(":")
        if not name or not axis.strip().isdigit():
            raise CpufreeError(f"--distribute {text!r}: '{item}' is not NAME:AXIS. Fix: e.g. --distribute A:0,B:0.")
        out[name.strip()] = int(axis)
    return out


def _inspect(args) -> int:
    from dace_cpufree.api import persistent_sdfg
    from dace_cpufree.codegen.program_source import program_source
    from dace_cpufree.decomposition import decomposition_of
    from dace_cpufree.options import CompileOptions

    opts = CompileOptions.resolve(backend=args.backend, distribute=_split_arg(args.distribute))
    sdfg = persistent_sdfg(load_program(args.program), options=opts)
    source = program_source(sdfg, opts)
    print(source.code)
    print("/*\n" + summary(source) + "\n*/")
    decomposition = decomposition_of(sdfg)
    if decomposition is not None:
        print("/* decomposition:\n" + decomposition.describe(args.pes) + "\n*/")
    return 0


def _demo(args) -> int:
    from dace_cpufree.demo import run_demo

    return run_demo(size=args.size, steps=args.steps)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="dace-cpufree", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inspect", help="print the generated code of path/to/file.py:function")
    p.add_argument("program")
    p.add_argument("--backend", choices=["cuda", "hip"], default="cuda")
    p.add_argument("--distribute", metavar="A:0,B:0", help="split these arrays along these axes over the PEs")
    p.add_argument("--pes", type=int, default=4, help="the PE count the decomposition is shown for (default 4)")
    p.set_defaults(func=_inspect)
    d = sub.add_parser("demo", help="compile and (on a GPU) run the built-in Jacobi 2-D")
    d.add_argument("--size", type=int, default=150)
    d.add_argument("--steps", type=int, default=50)
    d.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CpufreeError as err:
        print(f"dace-cpufree: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
