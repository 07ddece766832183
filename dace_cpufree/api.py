"""The public API: persistent_sdfg, generate_code, compile."""

from __future__ import annotations

import copy
from pathlib import Path

import dace

from dace_cpufree.codegen import DIALECTS, KernelSource
from dace_cpufree.codegen.channel import program_calls
from dace_cpufree.codegen.program_source import program_source
from dace_cpufree.decomposition import decomposition_of
from dace_cpufree.errors import BuildError, CpufreeError, LaunchError
from dace_cpufree.frontend.callbacks import callables
from dace_cpufree.frontend.parse_errors import frontend_errors
from dace_cpufree.frontend.source_forms import everyday_forms
from dace_cpufree.options import CompileOptions
from dace_cpufree.runtime import BACKENDS, PersistentProgram, build, gpu_count
from dace_cpufree.runtime.distributed import DistributedProgram
from dace_cpufree.runtime.emulated_pes import EmulatedPes
from dace_cpufree.transformations import pipeline
from dace_cpufree.vocabulary import communicates


def _to_sdfg(program_or_sdfg, opts: CompileOptions) -> dace.SDFG:
    if isinstance(program_or_sdfg, dace.SDFG):
        return copy.deepcopy(program_or_sdfg)
    if hasattr(program_or_sdfg, "to_sdfg"):
        with frontend_errors(getattr(program_or_sdfg, "name", "program")):
            with everyday_forms(program_or_sdfg) as program:
                sdfg = program.to_sdfg(simplify=False)
            return pipeline.run(sdfg, pipeline.PARSED, opts)
    raise CpufreeError(
        f"expected a @dace.program or a dace.SDFG, got {type(program_or_sdfg).__name__}. "
        "Fix: decorate the function with @dace.program."
    )


def persistent_sdfg(
    program_or_sdfg,
    scheduler: bool | str = True,
    tile_sizes: dict[str, int] | None = None,
    symbols: dict[str, int] | None = None,
    backend: str = "cuda",
    shmem_transport: str | None = None,
    *,
    options: CompileOptions | None = None,
) -> dace.SDFG:
    """The SDFG of a program, transformed to run as one persistent cooperative kernel.

    :param scheduler: map steps onto tiles of the grid (:class:`ScheduleThreads`): ``True`` tiles the
                      maps that reduce over their contiguous dimension, ``"all"`` every multi-dimensional
                      map; ``False`` keeps every map a plain grid-stride loop over the whole grid.
    :param tile_sizes: tile size per map label, overriding the scheduler's choice (``-1``: plain loop).
    :param symbols: values of size symbols to compile in as constants : extents
                    become known, so tile sizes are chosen at compile time instead of at run time.
                    (The symbols are replaced by the values throughout the SDFG.)
    :param backend: selects the SHMEM library that ``nvshmem.Putmem``/``SignalWait`` expand to
                    (NVSHMEM for ``"cuda"``, ROC_SHMEM for ``"hip"``).
    :param shmem_transport: NVSHMEM only: ``"auto"`` (default, or ``DACE_CPUFREE_SHMEM_TRANSPORT``:
                    ``"proxy"`` when the launcher placed the ranks on several nodes, else ``"p2p"``),
                    ``"proxy"`` (NVSHMEM's calls, any node) or ``"p2p"`` (the kernel stores to its peers
                    directly; one node).
    :param options: all of the above as one :class:`~dace_cpufree.options.CompileOptions` (then the other
                    keywords are ignored).

    The input is not modified. Raises :class:`NotPersistableError` naming what cannot be made persistent.
    """
    opts = options or CompileOptions.resolve(
        backend=backend, scheduler=scheduler, tile_sizes=tile_sizes, symbols=symbols, shmem_transport=shmem_transport
    )
    return _transformed(program_or_sdfg, opts)


def _transformed(program_or_sdfg, opts: CompileOptions) -> dace.SDFG:
    """The program's SDFG through the declared pipeline (:mod:`dace_cpufree.transformations.pipeline`)."""
    sdfg = _to_sdfg(program_or_sdfg, opts)
    with frontend_errors(sdfg.name, transforming=True):
        return pipeline.run(sdfg, pipeline.PERSISTENT, opts)


def kernel_source(program_or_sdfg, backend: str = "cuda", **options) -> KernelSource:
    """The generated source and the facts about it (kernel name, arguments, grid syncs).

    ``options`` are those of :func:`persistent_sdfg` (``scheduler``, ``tile_sizes``, ``symbols``).
    """
    opts = CompileOptions.resolve(backend=backend, **options)
    return program_source(_transformed(program_or_sdfg, opts), opts)


def generate_code(program_or_sdfg, backend: str = "cuda", **options) -> str:
    """The device code (kernel and host launcher) of a program, for ``backend`` ``"cuda"`` or ``"hip"``."""
    if backend not in DIALECTS:
        raise CpufreeError(f"unknown backend '{backend}'. Fix: use one of {', '.join(DIALECTS)}.")
    return kernel_source(program_or_sdfg, backend, **options).code


def compile(  # noqa: A001 - the API's name
    program_or_sdfg,
    backend: str = "cuda",
    scheduler: bool | str = True,
    tile_sizes: dict[str, int] | None = None,
    symbols: dict[str, int] | None = None,
    *,
    shmem_transport: str | None = None,
    progress: bool | str = False,
    timeout: float | None = None,
    channel: bool | None = None,
    notify_ring: int | None = None,
    race_check: bool | str = False,
    debug_waits: bool | float = False,
    callback_timeout: float | None = None,
    concurrent_steps: bool | None = None,
    step_times: bool | None = None,
    pes: int | None = None,
    distribute: dict[str, int] | None = None,
    load: bool = True,
) -> PersistentProgram | EmulatedPes | DistributedProgram:
    """Compiles a program into a callable that runs it as one persistent kernel.

    :param backend: ``"cuda"`` (NVIDIA GPUs), ``"hip"`` (AMD GPUs) or ``"emulate"``: the same CUDA
                    text built for the host and run by one thread, to test the generator without a GPU.
    :param scheduler: map steps onto tiles of the grid (default); ``False``: plain grid-stride loops.
    :param tile_sizes: tile size per map label, overriding the scheduler's choice.
    :param symbols: size symbols to compile in as constants (static tile sizes).
    :param shmem_transport: how NVSHMEM programs reach their peers (see :func:`persistent_sdfg`).
    :param progress: a live bar of the top-level loop's iteration while the kernel runs: ``True`` (tqdm, else
                     rich, else text), ``"tqdm"``, ``"rich"``, ``"text"``.
    :param timeout: seconds after which a call stops its kernel at the next cancel point and raises
                    :class:`~dace_cpufree.errors.KernelCancelled` (``run.timeout`` changes it later).
    :param channel: build the device <-> host channel even where nothing above asks for it, so that Ctrl-C and
                    ``run.cancel()`` stop a running kernel; ``None``: built where progress, timeout or the
                    program's ``dace_cpufree.progress``/``notify`` calls need it. See ``docs/channel.md``.
    :param notify_ring: records of the channel's notification ring (default 1024).
    :param race_check: with ``backend="emulate"``: run the kernel as several blocks of several threads, one at a
                       time between barriers in the order given (``"forward"``, ``"reverse"``, ``"shuffle"``;
                       ``True``: shuffled), and raise :class:`~dace_cpufree.errors.RaceError` naming the array,
                       the steps and their program lines where two threads access an element with no barrier
                       between them, or where a barrier could never complete. See ``docs/debugging.md``.
    :param debug_waits: debug mode for hangs: a grid sync that waits longer than this many seconds (``True``: 10)
                        reports which block waited at which step, and the kernel stops instead of hanging: the call
                        raises :class:`~dace_cpufree.errors.KernelHang` naming them. Grid syncs become a hand-written
                        barrier (slower); see ``docs/channel.md``.
    :param callback_timeout: seconds the kernel waits for the host to answer a ``print`` or Python callback in the
                             program (default 60) before it stops.
    :param concurrent_steps: independent grid steps next to each other run side by side on blocks of their own when
                             together they have fewer elements than the grid has threads (default, or
                             ``DACE_CPUFREE_CONCURRENT_STEPS``); ``False``: one after another on the whole grid.
    :param step_times: build the kernel with step timing (``run.step_times()``: each block's time per segment
                       between grid syncs, barriers and steps; the timed build is cached apart from the plain one);
                       default ``DACE_CPUFREE_STEP_TIMES``, else off.
    :param pes: ``backend="emulate"`` runs a program that communicates on this many PEs on the host: the result's
                ``on_pes([kwargs_pe0, ...])`` runs them together, one dict of arguments per PE (``docs/multigpu.md``).
    :param distribute: split an unmodified single-GPU program over the PEs: ``{array: axis}`` of the arrays to cut
                       into blocks along that axis; halos, their exchanges and the reductions' ``Allreduce`` are
                       derived from the program. The result is called with the global arrays like the program (with
                       ``backend="emulate"``, ``pes`` PEs run on the host; on GPUs, one PE per ``mpirun`` process).
                       See ``docs/multigpu.md``.
    :param load: ``False``: only build (see :func:`prebuild`).

    ``print(...)`` of scalars and calls of Python functions that DaCe turns into callbacks run on the host while
    the kernel's leader thread waits (scalar arguments and result; see ``docs/channel.md``).
    """
    _check_backend(backend, load)
    opts = CompileOptions.resolve(
        backend=backend,
        scheduler=scheduler,
        tile_sizes=tile_sizes,
        symbols=symbols,
        shmem_transport=shmem_transport,
        progress=progress,
        timeout=timeout,
        channel=channel,
        notify_ring=notify_ring,
        race_check=race_check,
        debug_waits=debug_waits,
        callback_timeout=callback_timeout,
        concurrent_steps=concurrent_steps,
        step_times=step_times,
        distribute=distribute,
    )
    return _loaded(*_built(program_or_sdfg, backend, opts, pes), backend, opts, pes, load)


def _loaded(sdfg, functions, source, library, backend: str, opts: CompileOptions, pes: int | None, load: bool):
    """The program that :func:`compile` returns: the library's path where not ``load``, the emulated PEs where
    ``pes`` is given, else the callable of one kernel."""
    if not load:
        return library
    if pes is not None:
        program = EmulatedPes(sdfg, source, library, pes, callbacks=functions)
    else:
        program = PersistentProgram(
            sdfg, source, library, backend, progress=opts.progress, timeout=opts.timeout, callbacks=functions
        )
    return program if decomposition_of(sdfg) is None else DistributedProgram(sdfg, program, pes)


def _check_backend(backend: str, load: bool) -> None:
    """Refuses an unknown backend, and a CUDA build to be loaded where no NVIDIA GPU is visible."""
    if backend not in BACKENDS:
        raise CpufreeError(f"unknown backend '{backend}'. Fix: use one of {', '.join(BACKENDS)}.")
    if load and backend == "cuda" and gpu_count() == 0:
        raise LaunchError(
            "no NVIDIA GPU is visible to this process. Fix: run on a GPU machine, or use "
            "backend='emulate' to run the generated kernel on the host."
        )


def _check_pes(name: str, backend: str, shmem: bool, pes: int | None) -> None:
    """A program that communicates runs in the host emulation on ``pes`` emulated PEs, given; nothing else does."""
    if pes is None:
        if shmem and backend == "emulate":
            raise CpufreeError(
                f"'{name}' communicates (nvshmem.Putmem/SignalWait/Allreduce), which the host emulation cannot run "
                "as one PE: it runs the PEs together. Fix: compile(..., backend='emulate', pes=P) and call "
                "run.on_pes([kwargs_pe0, ..., kwargs_peP-1]) with one dict of arguments per PE."
            )
        return
    if backend != "emulate" or not shmem or isinstance(pes, bool) or not isinstance(pes, int) or pes < 1:
        raise CpufreeError(
            f"pes={pes!r} for '{name}' with backend={backend!r}. Fix: pes (a number of PEs, at least 1) is for "
            "programs that communicate, run in the host emulation (backend='emulate'); on GPUs each PE is a process "
            "of an mpirun job."
        )


def _built(program_or_sdfg, backend: str, opts: CompileOptions, pes: int | None = None) -> tuple:
    """``(SDFG, host callbacks' functions, generated source, library)`` of the program transformed, generated and
    built; a build error names the program line of the step it is in, where known."""
    sdfg = _transformed(program_or_sdfg, opts)
    functions = callables(program_or_sdfg, program_calls(sdfg))
    _check_pes(sdfg.name, backend, communicates(sdfg), pes)
    source = program_source(sdfg, opts)
    if pes is not None and (source.channel is not None or source.step_labels):
        raise CpufreeError(
            f"'{sdfg.name}': the emulated PEs run without the device <-> host channel (progress, timeout, "
            "callbacks, print, debug_waits) and step timing. Fix: compile without them, or run on GPUs."
        )
    try:
        library = build(
            source.code,
            sdfg.name,
            backend,
            shmem=source.shmem,
            full_blocks=source.direct_stores,
            race_check=opts.race_check,
            environments=source.environments,
            steps=source.step_lines,
        )
    except BuildError as err:
        where = (source.step_sources or {}).get(err.step)
        if where is None:
            raise
        raise BuildError(
            f"{err}\nprogram line of that step: {where}", first_error=err.first_error, step=err.step
        ) from None
    return sdfg, functions, source, library


def prebuild(program_or_sdfg, backend: str = "cuda", **options) -> Path:
    """Compiles like :func:`compile` into the build cache without loading the library (nor initialising
    NVSHMEM): a launcher script builds every configuration in parallel once, and each process of the
    later ``mpirun`` jobs then finds its build in the cache. Returns the library's path."""
    return compile(program_or_sdfg, backend=backend, load=False, **options)
