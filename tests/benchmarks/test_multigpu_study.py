"""The multi-GPU study merger: runs cut short merge into one table, comparisons recomputed with the floor measured
on the machine, the plots written (CPU only, made-up rows)."""

from npbench_runs.multigpu import scaling, study
from npbench_runs.solvers import scaling as cg_scaling


def _row(framework, form, gpus, us, n=130, nx=None, mode="weak"):
    nx = nx or n
    shape = [130, 130, 130]
    return {"framework": framework, "program": "jacobi_3d", "form": form, "mode": mode, "gpus": gpus, "n": n,
            "nx": nx, "local_shape": shape, "us_per_step": us, "valid": True, "bitwise": True}  # fmt: skip


def test_runs_merge_later_wins_and_the_floor_is_this_machines(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    scaling._write([_row("cpufree", "plain", 1, 34.0), _row("cpufree", "plain", 2, 99.0, nx=258)], first)
    scaling._write([_row("cpufree", "plain", 2, 48.0, nx=258), _row("dace_mpi", "mpi", 2, 240.0, nx=258)], second)
    rows = study.stencils([first / "multigpu_scaling.csv", second / "multigpu_scaling.csv"], floor_us=4.0)
    two = {r["framework"]: r for r in rows if r["gpus"] == 2}
    assert two["cpufree"]["us_per_step"] == 48.0  # the later run's measurement
    assert two["cpufree"]["halo_us_per_step"] == 14.0
    assert two["cpufree"]["exchange_vs_floor"] == 14.0 / 2 / 4.0  # two exchanges per step, this floor
    assert two["cpufree"]["vs_dace_mpi"] == 5.0
    assert rows[0]["local_shape"] == [130, 130, 130] and rows[0]["valid"] is True


def test_cg_rows_merge_and_plots_are_written(tmp_path):
    def cg_row(framework, gpus, us):
        return {"gpu": "Test GPU", "framework": framework, "gpus": gpus, "n": 256, "iters": 20,
                "local_shape": [258 // gpus, 258], "us_per_iter_best": us, "validated": True}  # fmt: skip

    cg_scaling.write([cg_row("cg", 1, 20.0), cg_row("cupy", 1, 300.0)], tmp_path)
    rows = study.cg([tmp_path / "cg_scaling.csv"])
    assert {r["framework"]: r.get("cupy_over_ours") for r in rows} == {"cg": 15.0, "cupy": None}
    stencil = [dict(_row("cpufree", "plain", 1, 34.0), efficiency=1.0)]
    written = study.plot(stencil, rows, "Test GPU", tmp_path)
    assert [p.name for p in written] == ["stencils.png", "cg.png"] and all(p.stat().st_size > 0 for p in written)
