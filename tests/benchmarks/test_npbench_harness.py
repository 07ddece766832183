"""The NPBench-style harness on the CPU: build phase, timing, SQLite results, report (markdown + PNGs)."""

import gc
import math
import multiprocessing
import os
import re
import sqlite3
import time

import dace
import numpy as np
import pytest

from npbench_runs import frameworks, report, results
from npbench_runs import run as runner
from npbench_runs.__main__ import main
from npbench_runs.kernels import KERNELS

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(path))
    return path


def _rows(db):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM results ORDER BY id")]
    conn.close()
    return rows


def test_run_end_to_end(tmp_path, cache):
    """Parallel build phase, one worker process per kernel, rows appended; a second run loads the builds."""
    db = tmp_path / "results.db"
    kernels, fws = ["jacobi_2d", "atax"], ["numpy", "dace_cpufree_emulate"]
    run_id = runner.run("test", kernels, fws, repeat=2, db=db, jobs=2, ui_kind="plain")
    rows = _rows(db)
    assert [(r["kernel"], r["framework"]) for r in rows] == [(k, f) for k in kernels for f in fws]
    for r in rows:
        assert r["run_id"] == run_id and r["preset"] == "test" and r["error"] == ""
        assert r["validated"] == 1, r
        assert r["median_ms"] > 0 and 0 < r["min_ms"] <= r["median_ms"] and r["repeat"] == 2
        assert r["gpu"] and r["timestamp"] and r["framework_version"]
        assert r["git_commit"] is not None
    ours = [r for r in rows if r["framework"] == "dace_cpufree_emulate"]
    assert all(r["compile_s"] is not None and r["compile_s"] > 0 for r in ours)
    assert list(cache.glob("references/jacobi_2d-test-*.npz")) and list(cache.glob("references/atax-test-*.npz"))

    # repeated runs append; builds and references come from the cache (inline build path: --jobs 0, in-process)
    runner.run("test", ["atax"], ["dace_cpufree_emulate"], repeat=1, db=db, jobs=0, isolate=False, ui_kind="plain")
    rows = _rows(db)
    assert len(rows) == 5
    assert rows[-1]["validated"] == 1 and rows[-1]["compile_cached"] == 1


class _Broken(frameworks.NumPyFramework):
    name = "broken"

    def prepare(self, module):
        raise RuntimeError("does not compile")


class _Wrong(frameworks.NumPyFramework):
    name = "wrong"

    def prepare(self, module):
        def run(**args):
            module.reference(**args)
            for v in args.values():
                if isinstance(v, np.ndarray):
                    v += 1.0

        return run


def test_failures_are_stored_and_the_run_goes_on(tmp_path, cache, monkeypatch):
    monkeypatch.setitem(frameworks.FRAMEWORKS, "broken", _Broken)
    monkeypatch.setitem(frameworks.FRAMEWORKS, "wrong", _Wrong)
    db = tmp_path / "r.db"
    runner.run("test", ["jacobi_1d"], ["broken", "wrong", "numpy"], repeat=1, db=db, jobs=0, isolate=False)
    by = {r["framework"]: r for r in _rows(db)}
    assert "does not compile" in by["broken"]["error"] and by["broken"]["median_ms"] is None
    assert by["wrong"]["validated"] == 0 and "validation failed" in by["wrong"]["error"]
    assert by["wrong"]["median_ms"] > 0  # timed anyway, as NPBench does
    assert by["numpy"]["validated"] == 1 and by["numpy"]["error"] == ""


class _Probe(frameworks.NumPyFramework):
    """Records, inside each timed call, whether the garbage collector runs and which child processes are alive."""

    name = "probe"
    seen = []

    def prepare(self, module):
        def run(**args):
            _Probe.seen.append((gc.isenabled(), multiprocessing.active_children()))
            return module.reference(**args)

        return run


def test_timed_calls_run_alone_with_the_collector_off(tmp_path, cache, monkeypatch):
    """The build phase's processes (here: the reference's) have exited before the first timed call; inside the
    clock the garbage collector is off (as in timeit), and on again after."""
    monkeypatch.setitem(frameworks.FRAMEWORKS, "probe", _Probe)
    monkeypatch.setattr(_Probe, "seen", [])
    runner.run("test", ["jacobi_1d"], ["probe"], repeat=3, db=tmp_path / "p.db", jobs=2, isolate=False)
    assert list(cache.glob("references/jacobi_1d-test-*.npz"))  # computed in the build phase's pool
    assert _Probe.seen == [(False, [])] * 4  # the validated first run and three timed ones
    assert gc.isenabled()


def test_reference_cache(cache):
    module = runner.kernels()["gemm"]
    first = runner.compute_reference("gemm", "test")
    assert not first["cached"] and runner.reference_path(module, "test").exists()
    assert runner.compute_reference("gemm", "test")["cached"]
    ref = runner.load_reference(module, "test")
    args = module.initialize(**module.PRESETS["test"])
    module.reference(**args)
    np.testing.assert_array_equal(ref["C"], args["C"])


FAKE = {  # kernel -> framework -> median ms (None: failed); one row of each category at least
    "gemm": {"dace_pure": 2.0, "dace_cublas": 0.5, "cupy": 0.4, "dace_cpufree": 1.0, "dace_cpufree_plain": 1.5},
    "atax": {"dace_pure": 3.0, "dace_cublas": 1.0, "cupy": 0.3, "dace_cpufree": 2.0, "dace_cpufree_plain": None},
    "jacobi_2d": {"dace_pure": 6.0, "dace_cublas": 6.0, "cupy": 7.0, "dace_cpufree": 0.3, "dace_cpufree_plain": 0.4},
    "softmax": {"dace_pure": 9.0, "dace_cublas": 9.0, "cupy": 0.3, "dace_cpufree": 0.3, "dace_cpufree_plain": 0.6},
}


def _fake_db(path):
    conn = results.connect(path)
    for kernel, times in FAKE.items():
        for fw, ms in times.items():
            results.insert(
                conn,
                {
                    "run_id": "r1",
                    "timestamp": "2026-01-01T00:00:00",
                    "kernel": kernel,
                    "preset": "S",
                    "framework": fw,
                    "gpu": "NVIDIA H200",
                    "median_ms": ms,
                    "min_ms": ms,
                    "compile_s": 12.5 if fw.startswith("dace") else None,
                    "validated": ms is not None and not (kernel == "softmax" and fw == "cupy"),
                    "error": "" if ms is not None else "LaunchError: boom",
                },
            )
    conn.close()


@pytest.mark.filterwarnings("ignore")
def test_report_markdown_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    db, out = tmp_path / "fake.db", tmp_path / "report"
    _fake_db(db)
    assert main(["report", "--db", str(db), "--preset", "S", "--out", str(out)]) == 0
    md = (out / "report_S.md").read_text()
    for kernel in FAKE:
        assert f"| {kernel} |" in md
    assert "Speedup over DaCe-Pure" in md
    assert "| jacobi_2d | 0.857x | 1x | 15x | 20x |" in md  # cupy, cublas, plain, ours over dace_pure
    assert "LaunchError: boom" in md and "0.400 ✗" not in md and "0.300 ✗" in md  # softmax cupy not validated
    assert "geomean all" in md
    for key in ("blas", "iterative", "others"):
        png = out / f"speedup_S_{key}.png"
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 1000


def test_report_of_a_real_run(tmp_path, cache):
    pytest.importorskip("matplotlib")
    db = tmp_path / "real.db"
    runner.run("test", ["jacobi_2d", "gemm"], ["numpy", "dace_cpufree_emulate"], 1, db, jobs=0, isolate=False)
    written = report.report(db, "test", tmp_path / "out")  # no dace_pure: speedups over numpy
    md = written["markdown"].read_text()
    assert "| jacobi_2d |" in md and "| gemm |" in md and "Speedup over NumPy" in md
    assert all(written[k].read_bytes()[:8] == PNG for k in ("blas", "iterative", "others"))
    # "others" holds no kernel here: its plot keeps a figure's width (the PNG header's, in pixels)
    assert int.from_bytes(written["others"].read_bytes()[16:20], "big") < 2000


def test_compare_still_works(tmp_path, cache):
    from npbench_runs import compare

    assert compare.main(["--preset", "test", "--kernels", "jacobi_2d", "--frameworks", "dace_cpufree_emulate",
                         "--repeat", "1", "--out", str(tmp_path)]) == 0  # fmt: skip
    assert "jacobi_2d,test,dace_cpufree_emulate,True" in (tmp_path / "compare_test.csv").read_text()


class _Slow(frameworks.NumPyFramework):
    """NumPy that takes at least SECONDS per run."""

    name = "slow"
    seconds = 0.05

    def prepare(self, module):
        def run(**args):
            time.sleep(self.seconds)
            return module.reference(**args)

        return run


class _Slower(_Slow):
    name = "slower"
    seconds = 0.3


def test_time_budget_stops_the_repeats(tmp_path, cache, monkeypatch):
    """Repeats stop once the budget is spent; a first run longer than the budget is the only one."""
    monkeypatch.setitem(frameworks.FRAMEWORKS, "slow", _Slow)
    monkeypatch.setitem(frameworks.FRAMEWORKS, "slower", _Slower)
    db = tmp_path / "budget.db"
    runner.run("test", ["jacobi_1d"], ["slow", "slower", "numpy"], 10, db, jobs=0, isolate=False, budget=0.2)
    by = {r["framework"]: r for r in _rows(db)}
    slow = by["slow"]
    assert slow["validated"] == 1 and slow["repeat_target"] == 10 and slow["budget_s"] == 0.2
    assert 1 <= slow["repeat"] < 10 and slow["first_ms"] >= 50 and slow["min_ms"] >= 50
    slower = by["slower"]  # 0.3 s > 0.2 s: the validated first run is the result
    assert slower["validated"] == 1 and slower["repeat"] == 0
    assert slower["median_ms"] == slower["min_ms"] == slower["first_ms"] >= 300
    assert by["numpy"]["repeat"] == 10  # fast: all repeats fit
    md = report.report(db, "test", tmp_path / "out", plots=False)["markdown"].read_text()
    assert "## Timed runs" in md and "the validated first run only" in md and f"{slow['repeat']} of 10" in md
    assert " †" in md


def test_timeout_kills_one_framework_and_the_run_goes_on(tmp_path, cache, monkeypatch):
    """A framework that hangs in the worker process is killed after --timeout; the next one runs."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(  # the worker process learns of a framework that hangs
        "import time\nfrom npbench_runs import frameworks\n\n"
        "class Hang(frameworks.NumPyFramework):\n"
        "    def prepare(self, module):\n"
        "        return lambda **args: time.sleep(600)\n\n"
        "frameworks.FRAMEWORKS['hang'] = Hang\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    monkeypatch.setitem(frameworks.FRAMEWORKS, "hang", frameworks.NumPyFramework)  # known to this process
    db = tmp_path / "timeout.db"
    runner.run("test", ["jacobi_1d"], ["hang", "numpy"], repeat=1, db=db, jobs=0, timeout=5, ui_kind="plain")
    by = {r["framework"]: r for r in _rows(db)}
    assert "timeout" in by["hang"]["error"] and by["hang"]["median_ms"] is None
    assert by["numpy"]["validated"] == 1 and by["numpy"]["error"] == ""


def test_one_study_over_several_invocations(tmp_path, cache, capsys):
    """--stop-after leaves kernels for later, --skip-done adds only what is missing; one report at the end."""
    db = tmp_path / "study.db"
    kernels, fws = ["jacobi_1d", "atax", "gemm"], ["numpy"]
    first = runner.run("test", kernels, fws, 1, db, jobs=0, isolate=False, stop_after=0.0)
    assert not db.exists() or _rows(db) == []
    assert "not started" in capsys.readouterr().out
    second = runner.run("test", ["jacobi_1d"], fws, 1, db, jobs=0, isolate=False, skip_done=True)
    third = runner.run("test", kernels, fws, 1, db, jobs=0, isolate=False, skip_done=True)
    rows = _rows(db)
    assert [(r["kernel"], r["run_id"]) for r in rows] == [("jacobi_1d", second), ("atax", third), ("gemm", third)]
    assert first not in {r["run_id"] for r in rows}
    runner.run("test", kernels, fws, 1, db, jobs=0, isolate=False, skip_done=True)  # nothing left to do
    assert len(_rows(db)) == 3
    copy = tmp_path / "copy.db"
    results.copy(db, copy)
    assert len(_rows(copy)) == 3
    md = report.report(copy, "test", tmp_path / "out", plots=False)["markdown"].read_text()
    assert all(f"| {k} |" in md for k in kernels) and second in md and third in md


def test_shards_of_one_study_merge_into_one_report(tmp_path, cache, capsys):
    """Kernels timed as shards (one database each, e.g. one per GPU) merge into one file and one report."""
    a, b, merged = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "study.db"
    run_a = runner.run("test", ["jacobi_1d"], ["numpy"], 1, a, jobs=0, isolate=False)
    run_b = runner.run("test", ["atax", "gemm"], ["numpy"], 1, b, jobs=0, isolate=False)
    assert main(["merge", "--db", str(merged), str(a), str(b)]) == 0
    assert "3 rows added" in capsys.readouterr().out
    rows = _rows(merged)
    assert [(r["kernel"], r["run_id"]) for r in rows] == [("jacobi_1d", run_a), ("atax", run_b), ("gemm", run_b)]
    assert [r["median_ms"] for r in rows] == [r["median_ms"] for r in _rows(a) + _rows(b)]
    md = report.report(merged, "test", tmp_path / "out", plots=False)["markdown"].read_text()
    assert all(f"| {k} |" in md for k in ("jacobi_1d", "atax", "gemm")) and run_a in md and run_b in md


def test_commit_from_git_else_from_the_environment(tmp_path, cache, monkeypatch):
    monkeypatch.delenv(results.COMMIT_ENV, raising=False)
    head = results.git_commit()
    if head:  # a checkout: git knows the commit
        assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", head)
    monkeypatch.setattr(results, "REPO", tmp_path)  # a copy of the tree without .git, as on the GPU host
    assert results.git_commit() == ""
    sha = "0123456789abcdef0123456789abcdef01234567-dirty"
    monkeypatch.setenv(results.COMMIT_ENV, sha)
    assert results.git_commit() == sha
    db = tmp_path / "commit.db"
    runner.run("test", ["gemm"], ["numpy"], 1, db, jobs=0, isolate=False)
    assert _rows(db)[0]["git_commit"] == sha
    md = report.report(db, "test", tmp_path / "out", plots=False)["markdown"].read_text()
    assert "commit: 0123456789ab-dirty." in md


def test_a_run_without_a_known_commit_says_how_to_record_it(tmp_path, cache, monkeypatch, capsys):
    """An installed copy without .git and without $DACE_CPUFREE_COMMIT: the run's first line says the commit is not
    recorded and names the variable that records it, before any kernel runs."""
    monkeypatch.delenv(results.COMMIT_ENV, raising=False)
    monkeypatch.setattr(results, "REPO", tmp_path)
    runner.run("test", ["gemm"], ["numpy"], 1, tmp_path / "none.db", jobs=0, isolate=False)
    first = capsys.readouterr().out.splitlines()[0]
    assert "commit (not recorded: no git checkout here; set DACE_CPUFREE_COMMIT=<commit> to record it)" in first


def test_report_says_when_no_commit_was_recorded(tmp_path):
    db = tmp_path / "fake.db"
    _fake_db(db)  # rows without git_commit, as the first H200 run wrote them
    md = report.report(db, "S", tmp_path / "out", plots=False)["markdown"].read_text()
    assert "commit: not recorded." in md and "commit: ?" not in md


def test_report_prints_the_products_rate_of_kernels_that_declare_their_flops(tmp_path):
    """gemm declares its product's operations (2 NI NJ NK): the report prints each framework's TFLOP/s from the sizes
    stored with the row and the rate over the baseline's; jacobi_2d declares none and is not in that table, nor is a
    result that did not validate."""
    db = tmp_path / "rates.db"
    conn = results.connect(db)
    sizes = {"gemm": dict(NI=1000, NJ=2000, NK=500), "jacobi_2d": dict(N=100, TSTEPS=10)}
    for kernel, times in {"gemm": {"cupy": 0.1, "dace_cpufree": 0.125, "dace_cublas": 2.0}, "jacobi_2d": {}}.items():
        for fw, ms in (times or {"cupy": 1.0, "dace_cpufree": 0.5}).items():
            row = dict(run_id="r1", timestamp="2026-01-01T00:00:00", kernel=kernel, preset="S", framework=fw)
            row.update(params=sizes[kernel], gpu="NVIDIA H200", median_ms=ms, min_ms=ms, validated=fw != "dace_cublas")
            results.insert(conn, row)
    conn.close()
    md = report.report(db, "S", tmp_path / "out", baseline="cupy", plots=False)["markdown"].read_text()
    table = md.split("## Matrix products: TFLOP/s")[1].split("\n## ")[0]
    assert "| kernel | GFLOP | CuPy | DaCe-cuBLAS | CPU-free | DaCe-cuBLAS / CuPy | CPU-free / CuPy |" in table
    assert "| gemm | 2.0 | 20 | — | 16 | — | 0.8x |" in table  # 2 GFLOP in 0.1 and 0.125 ms; cuBLAS not validated
    assert "jacobi_2d" not in table
    assert report.product_flops(dict(kernel="jacobi_2d", params='{"N": 100, "TSTEPS": 10}')) is None


@pytest.mark.parametrize("name", ["gemm", "k2mm", "k3mm", "doitgen"])
def test_declared_product_flops_match_the_programs_products(name):
    """A kernel's ``product_flops`` counts the matrix products its SDFG holds: 2 x (rows of the left operand, batch
    dimensions included) x its columns x the right operand's columns, summed over every product, at the test sizes."""
    module = KERNELS[name]
    sizes = module.PRESETS["test"]
    counted, products = 0, 0
    for node, state in module.program.to_sdfg(simplify=True).all_nodes_recursive():
        if type(node).__name__ == "MatMul":
            shape = {
                e.dst_conn: [int(dace.symbolic.evaluate(n, sizes)) for n in e.data.subset.size()]
                for e in state.in_edges(node)
            }
            counted += 2 * math.prod(shape["_a"]) * shape["_b"][-1]
            products += 1
    assert products == {"gemm": 1, "k2mm": 2, "k3mm": 3, "doitgen": 1}[name]
    assert module.product_flops(**sizes) == counted


def test_a_run_in_which_every_framework_failed_exits_non_zero(tmp_path, cache, capsys):
    """Without a GPU the CUDA framework cannot launch: every row is an error, and the command says so by its exit."""
    from dace_cpufree.runtime import gpu_count

    if gpu_count() > 0:
        pytest.skip("a GPU is present: the CUDA framework would run")
    db = tmp_path / "failed.db"
    args = ["run", "--preset", "test", "--kernels", "jacobi_1d", "--frameworks", "dace_cpufree", "--db", str(db)]
    assert main([*args, "--jobs", "0", "--no-isolate"]) == 1
    assert "every framework failed" in capsys.readouterr().err
    assert _rows(db)[0]["error"]


def test_without_a_gpu_the_default_frameworks_run_here(capsys, monkeypatch):
    """No GPU: NumPy and the host emulation, and one line naming the GPU frameworks left out and why."""
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 0)
    assert runner.default_frameworks() == ["numpy", "dace_cpufree_emulate"]
    notice = capsys.readouterr().out
    assert notice.count("\n") == 1 and notice.startswith("no GPU here (no CUDA device visible)")
    assert "for a short check add --preset test (tiny sizes) or --kernels K" in notice
    left_out = notice.split("leaving out ")[1].split(",")[0].split()
    assert left_out == [f for f in frameworks.DEFAULT_FRAMEWORKS if f not in ("numpy", "dace_cpufree_emulate")]


def test_with_a_gpu_the_default_frameworks_are_the_gpu_ones(capsys, monkeypatch):
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 1)
    assert runner.default_frameworks() == frameworks.DEFAULT_FRAMEWORKS
    assert capsys.readouterr().out == ""


@pytest.mark.filterwarnings("error:No artists with labels:UserWarning")
def test_report_of_one_framework(tmp_path):
    """Results of one framework have nothing to compare: the markdown says so (no empty speedup table) and the
    plots show its times."""
    pytest.importorskip("matplotlib")
    db, out = tmp_path / "one.db", tmp_path / "report"
    conn = results.connect(db)
    for kernel, ms in (("gemm", 1.5), ("jacobi_2d", 0.2), ("softmax", None)):
        row = {"run_id": "r1", "timestamp": "2026-01-01T00:00:00", "kernel": kernel, "preset": "S", "gpu": "cpu"}
        row.update(framework="dace_cpufree_emulate", median_ms=ms, min_ms=ms, validated=ms is not None)
        results.insert(conn, {**row, "error": "" if ms is not None else "LaunchError: boom"})
    conn.close()
    assert main(["report", "--db", str(db), "--preset", "S", "--out", str(out)]) == 0
    md = (out / "report_S.md").read_text()
    assert "| gemm | BLAS-heavy | 1.500 ✓ |" in md and "| softmax | Others | ⚠ |" in md
    assert "Only CPU-free emulate (`dace_cpufree_emulate`) is in these results: no speedups" in md
    assert "Speedup over" not in md and "|  |" not in md
    for key in ("blas", "iterative", "others"):
        png = out / f"speedup_S_{key}.png"
        assert png.read_bytes()[:8] == PNG and png.stat().st_size > 1000


def test_cache_moves_the_default_database_and_db_names_another(tmp_path, cache, capsys):
    """``run --cache DIR`` writes its results to DIR/results.db (not to the default folder's); ``--db`` wins;
    ``report --cache DIR`` reads what the run wrote."""
    moved = tmp_path / "moved"
    args = ["run", "--preset", "test", "--kernels", "jacobi_1d", "--frameworks", "numpy", "--jobs", "0"]
    assert main([*args, "--no-isolate", "--cache", str(moved)]) == 0
    assert len(_rows(moved / "results.db")) == 1
    assert not (cache / "results.db").exists()
    assert f"Results appended to {moved / 'results.db'}" in capsys.readouterr().out
    named = tmp_path / "named" / "r.db"
    assert main([*args, "--no-isolate", "--cache", str(moved), "--db", str(named)]) == 0
    assert len(_rows(named)) == 1 and len(_rows(moved / "results.db")) == 1
    out = tmp_path / "report"
    assert main(["report", "--cache", str(moved), "--preset", "test", "--out", str(out), "--no-plots"]) == 0
    assert "| jacobi_1d |" in (out / "report_test.md").read_text()


def test_one_place_computes_the_default_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(tmp_path / "c"))
    assert results.cache_dir() == tmp_path / "c" and results.default_db() == tmp_path / "c" / "results.db"
    assert frameworks.cache_root() == results.cache_dir() and results.cache_dir().is_dir()
    assert results.default_db(tmp_path / "d") == tmp_path / "d" / "results.db"
    monkeypatch.delenv("NPBENCH_RUNS_CACHE")
    assert results.cache_dir() == results.Path.home() / ".cache" / "npbench_runs"
    assert results.cache_dir().resolve() != results.REPO and results.REPO not in results.default_db().parents


def test_report_without_a_database_names_it_and_creates_none(tmp_path, cache):
    with pytest.raises(SystemExit, match="no results database at .*missing.db.*npbench_runs run"):
        main(["report", "--db", str(tmp_path / "missing.db"), "--out", str(tmp_path / "out")])
    assert not (tmp_path / "missing.db").exists()


def test_list_prints_what_run_would_use_here(capsys, cache, monkeypatch):
    """No GPU: the defaults printed are NumPy and the emulation, with run's notice naming those left out."""
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 0)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "no GPU here (no CUDA device visible): leaving out cupy dace_pure" in out
    assert "(default here: numpy dace_cpufree_emulate)" in out
    assert f"cache: {cache}\n" in out and f"results: {cache / 'results.db'}\n" in out
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 1)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "no GPU here" not in out and f"(default here: {' '.join(frameworks.DEFAULT_FRAMEWORKS)})" in out


def test_a_run_in_which_nothing_validated_exits_non_zero(tmp_path, cache, capsys, monkeypatch):
    """Outputs that differ from NumPy's are no success: exit 1, one line on stderr. One validated pair is: exit 0."""
    monkeypatch.setitem(frameworks.FRAMEWORKS, "wrong", _Wrong)
    db = tmp_path / "wrong.db"
    args = ["run", "--preset", "test", "--kernels", "jacobi_1d", "atax", "--db", str(db), "--jobs", "0", "--no-isolate"]
    assert main([*args, "--frameworks", "wrong"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nothing validated: 2 of 2 (kernel, framework) pairs ran" in err
    assert [r["validated"] for r in _rows(db)] == [0, 0]
    assert main([*args, "--frameworks", "wrong", "numpy"]) == 0
    assert capsys.readouterr().err == ""


def test_unknown_options_name_the_fix(capsys):
    """NPBench's --benchmarks on run: the error says run's option and the command for NPBench's own programs."""
    with pytest.raises(SystemExit) as exc:
        main(["run", "--benchmarks", "jacobi_2d", "--preset", "S"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "python -m npbench_runs run: error: unrecognized arguments: --benchmarks jacobi_2d" in err
    assert "--kernels" in err and "foreign --npbench DIR" in err
    with pytest.raises(SystemExit, match="unknown kernel 'nope'.*foreign --npbench DIR"):
        main(["run", "--kernels", "nope", "--frameworks", "numpy"])


def test_help_tells_the_defaults_and_the_exit_status(capsys, cache):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"here{cache / 'results.db'};with--cacheDIR:DIR/results.db" in text.replace(" ", "")  # wrapped at "-"
    assert f"else {' '.join(frameworks.HOST_FRAMEWORKS)}" in text
    assert "exit status: 0 when at least one (kernel, framework) validated" in text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "foreign" in capsys.readouterr().out


def test_the_docs_examples_write_no_database_into_the_repository():
    docs = [results.REPO / "README.md", *sorted((results.REPO / "docs").glob("*.md"))]
    for path in docs:
        for db in re.findall(r"--db\s+([^\s`]+)", path.read_text()):
            assert db.startswith(("~", "/", "$", "FILE")), (path.name, db)


def test_report_writes_next_to_the_database_not_into_the_current_folder(tmp_path, cache, capsys, monkeypatch):
    """No --out: report_<preset> next to the database (the default one's is in the cache folder); --out still wins."""
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    cache.mkdir(parents=True)
    _fake_db(cache / "results.db")
    assert main(["report", "--preset", "S", "--no-plots"]) == 0
    assert (cache / "report_S" / "report_S.md").is_file()
    assert f"report written to {cache / 'report_S'}" in capsys.readouterr().out
    named = tmp_path / "studies" / "study.db"
    named.parent.mkdir()
    _fake_db(named)
    assert main(["report", "--db", str(named), "--preset", "S", "--no-plots"]) == 0
    assert (named.parent / "report_S" / "report_S.md").is_file()
    assert main(["report", "--db", str(named), "--preset", "S", "--no-plots", "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "report_S.md").is_file()
    assert report.report(named, "S", plots=False)["markdown"] == named.parent / "report_S" / "report_S.md"
    assert list(here.iterdir()) == []


def test_merge_defaults_to_the_results_database(tmp_path, cache, capsys):
    shard = tmp_path / "shard.db"
    _fake_db(shard)
    n = len(_rows(shard))
    assert main(["merge", str(shard)]) == 0
    assert len(_rows(cache / "results.db")) == n
    assert f"{n} rows added to {cache / 'results.db'}" in capsys.readouterr().out
    assert main(["merge", "--cache", str(tmp_path / "moved"), str(shard)]) == 0
    assert len(_rows(tmp_path / "moved" / "results.db")) == n


def test_run_with_a_cache_leaves_the_environment_as_it_was(tmp_path, monkeypatch):
    """``run(cache=...)`` moves the harness's folder for the run only, also when the run raises."""
    moved = tmp_path / "moved"
    monkeypatch.setenv("NPBENCH_RUNS_CACHE", str(tmp_path / "before"))
    runner.run("test", ["jacobi_1d"], ["numpy"], 1, jobs=0, isolate=False, ui_kind="plain", cache=moved)
    assert len(_rows(moved / "results.db")) == 1 and os.environ["NPBENCH_RUNS_CACHE"] == str(tmp_path / "before")
    with pytest.raises(SystemExit, match="unknown kernel"):
        runner.run("test", ["nope"], ["numpy"], cache=moved)
    assert os.environ["NPBENCH_RUNS_CACHE"] == str(tmp_path / "before")
    monkeypatch.delenv("NPBENCH_RUNS_CACHE")
    monkeypatch.setattr(runner, "timing_phase", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        runner.run("test", ["jacobi_1d"], ["numpy"], 1, jobs=0, isolate=False, ui_kind="plain", cache=moved)
    assert "NPBENCH_RUNS_CACHE" not in os.environ


def test_compare_defaults_to_what_run_uses_and_writes_into_the_cache(tmp_path, cache, capsys, monkeypatch):
    """No GPU: NumPy and the emulation (run's notice included), output in <cache>/compare, nothing in the current
    folder; with a GPU, run's GPU frameworks."""
    from npbench_runs import compare

    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 0)
    assert compare.main(["--preset", "test", "--kernels", "jacobi_1d", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "no GPU here (no CUDA device visible)" in out and f"written: {cache / 'compare' / 'compare_test'}.csv" in out
    csv_text = (cache / "compare" / "compare_test.csv").read_text()
    assert "jacobi_1d,test,numpy,True" in csv_text and "jacobi_1d,test,dace_cpufree_emulate,True" in csv_text
    md = (cache / "compare" / "compare_test.md").read_text()
    assert "| kernel | numpy | dace_cpufree_emulate | vs numpy | per step (µs) |" in md and "on the host" in md
    assert list(here.iterdir()) == []

    asked = []
    monkeypatch.setattr(compare, "run_kernel", lambda module, preset, names, repeat, log: asked.append(names) or [])
    monkeypatch.setattr("dace_cpufree.runtime.gpu_count", lambda: 1)
    assert compare.main(["--preset", "test", "--kernels", "jacobi_1d", "--out", str(tmp_path / "o")]) == 0
    assert asked == [frameworks.DEFAULT_FRAMEWORKS] and (tmp_path / "o" / "compare_test.csv").is_file()


def test_compare_markdown_of_the_old_comparison():
    from npbench_runs import compare

    rows = [
        {"kernel": "gemm", "framework": f, "median_ms": ms, "validated": True}
        for f, ms in (("dace_cpufree", 1.0), ("dace_gpu", 4.0), ("cupy", 2.0))
    ]
    md = compare.markdown("S", compare.ratios(rows), "H")
    assert md.startswith("# dace-cpufree vs upstream DaCe GPU vs CuPy — preset S\n")
    header = "| kernel | dace_cpufree | dace_gpu | cupy | vs dace_gpu | vs cupy | per step (µs) |"
    assert f"{header}\n|---|---|---|---|---|---|---|\n" in md
    assert "| gemm | 1.000 | 4.000 | 2.000 | 4.00x | 2.00x | — |" in md
    assert "Geomean speedup vs upstream DaCe GPU: 4.00x; vs CuPy: 2.00x." in md


def test_the_docs_examples_write_no_report_into_the_current_folder():
    docs = [results.REPO / "README.md", *sorted((results.REPO / "docs").glob("*.md"))]
    for path in docs:
        for out in re.findall(r"npbench_runs(?: report|\.compare)[^\n`]*?--out\s+([^\s`]+)", path.read_text()):
            assert out.startswith(("~", "/", "$", "DIR")), (path.name, out)
