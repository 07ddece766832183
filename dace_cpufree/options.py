"""Every option of dace-cpufree, declared once: the ``DACE_CPUFREE_*`` environment variables (type, default,
meaning, the stage that uses them) and the typed compile options that travel from :func:`dace_cpufree.compile`
to the passes and the code generator.

The environment is read here and nowhere in the passes or the generator: :meth:`CompileOptions.resolve` fills
what the caller left open from it, once per compilation, and the stages receive the resulting object. The build
and the runtime read their variables through :func:`env` as well.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dace_cpufree.errors import CpufreeError
from dace_cpufree.launcher import placement

TRANSPORTS = ("auto", "p2p", "proxy")
PROGRESS = (False, True, "tqdm", "rich", "text")
#: seconds a grid sync waits in debug mode (``debug_waits=True``) before it reports a hang
DEBUG_WAITS_DEFAULT_S = 10.0


@dataclass(frozen=True)
class EnvOption:
    """One ``DACE_CPUFREE_*`` variable. ``kind``: ``bool`` (``0``/``1``), ``int``, ``float`` or ``str``."""

    name: str
    kind: type
    default: object
    stage: str  # "compile", "build", "run" or "benchmark"
    meaning: str

    def parse(self, text: str | None):
        if text is None or text.strip() == "":
            return self.default
        text = text.strip()
        try:
            if self.kind is bool:
                if text not in ("0", "1"):
                    raise ValueError
                return text == "1"
            return self.kind(text)
        except ValueError:
            expected = {bool: "0 or 1", int: "an integer", float: "a number"}.get(self.kind, "text")
            raise CpufreeError(
                f"{self.name}={text!r} is not {expected}. Fix: set it to {expected} or unset it."
            ) from None


ENVIRONMENT: tuple[EnvOption, ...] = (
    EnvOption(
        "DACE_CPUFREE_SHMEM_TRANSPORT",
        str,
        "auto",
        "compile",
        "How NVSHMEM programs reach their peers when compile() is not told: 'p2p' (the kernel stores to its peers "
        "directly; one node), 'proxy' (NVSHMEM's calls; any node) or 'auto' (proxy when the launcher placed the "
        "ranks on several nodes, else p2p).",
    ),
    EnvOption(
        "DACE_CPUFREE_EARLY_PUTS",
        bool,
        True,
        "compile",
        "Split a map followed by puts of its edge cells into edges, puts, interior (SplitForEarlyPuts), so the "
        "puts overlap the interior's work. 0 turns it off (for comparisons).",
    ),
    EnvOption(
        "DACE_CPUFREE_CONCURRENT_STEPS",
        bool,
        True,
        "compile",
        "Independent grid steps next to each other run side by side on blocks of their own when together they have "
        "fewer elements than the grid has threads (codegen/concurrency.py). 0 runs them one after another.",
    ),
    EnvOption(
        "DACE_CPUFREE_STEP_TIMES",
        bool,
        False,
        "compile",
        "Build kernels with step timing: thread 0 of every block sums the cycles of each segment between grid "
        "syncs, barriers and steps (PersistentProgram.step_times()).",
    ),
    EnvOption(
        "DACE_CPUFREE_WAIT_TIMEOUT_MS",
        float,
        None,
        "build",
        "Debugging hangs: SignalWait polls and, after this many milliseconds, reports the PE, flag and values "
        "it waited for and traps. Unset: waits block without a timeout.",
    ),
    EnvOption(
        "DACE_CPUFREE_CACHE",
        str,
        None,
        "build",
        "Folder of built libraries (default ~/.cache/dace_cpufree), keyed by the generated code and the command.",
    ),
    EnvOption(
        "DACE_CPUFREE_CUDA_ARCH",
        str,
        None,
        "build",
        "nvcc's -arch (e.g. sm_90). Default: the GPU of this machine, else sm_90.",
    ),
    EnvOption(
        "DACE_CPUFREE_HIP_ARCH",
        str,
        None,
        "build",
        "hipcc's AMD targets, comma-separated (e.g. gfx90a,gfx1030). Default: the AMD GPUs of this machine.",
    ),
    EnvOption(
        "DACE_CPUFREE_NVCC_FLAGS",
        str,
        "",
        "build",
        "More nvcc flags (space-separated), after the generated ones.",
    ),
    EnvOption(
        "DACE_CPUFREE_HIP_FLAGS",
        str,
        "",
        "build",
        "More hipcc flags (space-separated), after the generated ones (the tests add -Werror).",
    ),
    EnvOption(
        "DACE_CPUFREE_DEVICE",
        int,
        None,
        "run",
        "The GPU a SHMEM process uses. Default: its rank on the node modulo the GPUs it sees.",
    ),
    EnvOption(
        "DACE_CPUFREE_EMULATE_TIMEOUT",
        float,
        300.0,
        "run",
        "Seconds any wait of the emulated PEs (compile(..., backend='emulate', pes=P)) may last before the run stops "
        "with a KernelHang; a wait that can never end is reported at once.",
    ),
    EnvOption(
        "DACE_CPUFREE_REF_CACHE",
        str,
        None,
        "benchmark",
        "Folder where the multi-GPU benchmark keeps NumPy's results on the global domain between runs.",
    ),
    EnvOption(
        "DACE_CPUFREE_COMMIT",
        str,
        None,
        "benchmark",
        "The commit recorded with benchmark results when the package is not run from a git checkout.",
    ),
    EnvOption(
        "DACE_CPUFREE_MULTIGPU_TIMEOUT",
        int,
        300,
        "benchmark",
        "Seconds the multi-GPU tests give one mpirun job before they stop it (a hung kernel fails the test).",
    ),
)

_BY_NAME = {o.name: o for o in ENVIRONMENT}


def env(name: str, environ: Mapping[str, str] | None = None):
    """The parsed value of the declared variable ``name`` (its default when unset)."""
    option = _BY_NAME[name]
    return option.parse((os.environ if environ is None else environ).get(name))


#: The orders in which the emulation's race checker runs the threads between barriers.
RACE_ORDERS = ("forward", "reverse", "shuffle")


@dataclass(frozen=True)
class CompileOptions:
    """What one compilation is asked for; the passes and the generator take their settings from it.

    :ivar backend: ``"cuda"``, ``"hip"`` or ``"emulate"`` (the CUDA text built for the host).
    :ivar scheduler: ``True`` (tiles for maps that reduce over their contiguous dimension), ``"all"`` or ``False``.
    :ivar tile_sizes: tile size per map label, overriding the scheduler (``-1``: plain loop).
    :ivar symbols: size symbols compiled in as constants.
    :ivar shmem_transport: ``"p2p"`` or ``"proxy"`` once resolved (``"auto"`` is decided by :meth:`resolve`).
    :ivar early_puts: split maps followed by puts of their edge cells (SplitForEarlyPuts).
    :ivar step_times: build the kernel with step timing.
    :ivar concurrent_steps: independent grid steps side by side on blocks of their own when they are small.
    :ivar channel: build the device <-> host channel (cancel points at loop heads and grid syncs, progress,
                   notifications); ``None``: only where something needs it (``progress``, ``timeout``, or the
                   program calls ``dace_cpufree.progress``/``notify``).
    :ivar progress: the top-level loops report their iteration and the host shows it: ``True`` (tqdm, else rich,
                    else text lines), ``"tqdm"``, ``"rich"``, ``"text"`` or ``False``.
    :ivar timeout: seconds after which a call cancels its kernel (:class:`~dace_cpufree.errors.KernelCancelled`).
    :ivar notify_ring: notification records the channel's ring holds.
    :ivar race_check: the emulation's race checker, threads run in this order between barriers: ``"forward"``,
                      ``"reverse"`` or ``"shuffle"`` (``True`` given: ``"shuffle"``); ``None``: off.
    :ivar debug_waits: debug mode for hangs: seconds a grid sync waits before the kernel reports through the
                       channel which block waited at which step and stops (``True`` given:
                       :data:`DEBUG_WAITS_DEFAULT_S`); ``None``: plain grid syncs. Builds the channel.
    :ivar callback_timeout: seconds the kernel waits for the host to answer a host callback (``print``, a Python
                            function) before it stops.
    :ivar distribute: split the program over the PEs: ``(array, axis)`` pairs (``compile(distribute={...})``; see
                      :mod:`dace_cpufree.decomposition`); ``None``: the program as written.
    """

    backend: str = "cuda"
    scheduler: bool | str = True
    tile_sizes: Mapping[str, int] | None = None
    symbols: Mapping[str, int] | None = None
    shmem_transport: str = "auto"
    early_puts: bool = True
    step_times: bool = False
    concurrent_steps: bool = True
    channel: bool | None = None
    progress: bool | str = False
    timeout: float | None = None
    notify_ring: int = 1024
    race_check: str | None = None
    debug_waits: float | None = None
    callback_timeout: float = 60.0
    distribute: tuple[tuple[str, int], ...] | None = None

    def wants_channel(self, program_calls: bool) -> bool:
        """Whether the kernel is built with the channel, given whether the program calls progress/notify (or has
        host callbacks)."""
        if self.channel is not None:
            return self.channel or program_calls or self.debug_waits is not None
        return bool(self.progress) or self.timeout is not None or program_calls or self.debug_waits is not None

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **given) -> CompileOptions:
        """The options of one compilation: what the caller gave (``None``: not given), the rest from the declared
        environment variables, ``shmem_transport="auto"`` decided by the launcher's placement."""
        given = {k: v for k, v in given.items() if v is not None}
        transport = given.pop("shmem_transport", None) or env("DACE_CPUFREE_SHMEM_TRANSPORT", environ)
        if transport not in TRANSPORTS:
            raise CpufreeError(
                f"shmem_transport={transport!r}. Fix: use one of {', '.join(TRANSPORTS)} "
                "(argument shmem_transport or DACE_CPUFREE_SHMEM_TRANSPORT)."
            )
        if transport == "auto":  # ROC_SHMEM has its calls only; NVSHMEM stores directly unless ranks span nodes
            backend = given.get("backend", "cuda")
            transport = "proxy" if backend == "hip" or placement(environ).spans_nodes else "p2p"
        defaults = {
            "early_puts": env("DACE_CPUFREE_EARLY_PUTS", environ),
            "step_times": env("DACE_CPUFREE_STEP_TIMES", environ),
            "concurrent_steps": env("DACE_CPUFREE_CONCURRENT_STEPS", environ),
        }
        race = given.pop("race_check", False)
        race = "shuffle" if race is True else race or None
        if race is not None and (race not in RACE_ORDERS or given.get("backend", "cuda") != "emulate"):
            raise CpufreeError(
                f"race_check={race!r} with backend={given.get('backend', 'cuda')!r}. Fix: race checking runs in the "
                f"host emulation: backend='emulate' and race_check=True or one of {', '.join(map(repr, RACE_ORDERS))}."
            )
        waits = given.pop("debug_waits", False)
        waits = DEBUG_WAITS_DEFAULT_S if waits is True else (None if waits is False else waits)
        if waits is not None and (isinstance(waits, bool) or not isinstance(waits, (int, float)) or not waits > 0):
            raise CpufreeError(f"debug_waits={waits!r}. Fix: True, or a positive number of seconds (False: off).")
        given["debug_waits"] = None if waits is None else float(waits)
        split = given.pop("distribute", None)
        if split is not None:
            if not isinstance(split, Mapping) or not split:
                raise CpufreeError(
                    f"distribute={split!r}. Fix: give a dict of array name -> axis to split, e.g. {{'A': 0, 'B': 0}}."
                )
            given["distribute"] = tuple(sorted((str(k), v) for k, v in split.items()))
        options = cls(**{**defaults, **given, "shmem_transport": transport, "race_check": race})
        if not options.callback_timeout > 0:
            raise CpufreeError(
                f"callback_timeout={options.callback_timeout!r}. Fix: give a positive number of seconds."
            )
        if options.progress not in PROGRESS:
            raise CpufreeError(f"progress={options.progress!r}. Fix: use one of {', '.join(map(repr, PROGRESS))}.")
        if options.timeout is not None and not options.timeout > 0:
            raise CpufreeError(f"timeout={options.timeout!r}. Fix: give a positive number of seconds, or None.")
        if options.notify_ring < 1:
            raise CpufreeError(f"notify_ring={options.notify_ring!r}. Fix: give a positive number of records.")
        if options.channel is False and (options.progress or options.timeout is not None or options.debug_waits):
            raise CpufreeError(
                "progress, timeout and debug_waits need the channel. Fix: leave channel=None (or set it True)."
            )
        if options.scheduler not in (True, False, "all"):
            raise CpufreeError(
                f"scheduler={options.scheduler!r}. Fix: use True (reductions), 'all' (every map) or False."
            )
        return options
