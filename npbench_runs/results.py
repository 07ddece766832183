"""The results database (SQLite, one ``results`` table; repeated runs append) and facts about the machine."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sqlite3
import subprocess
from pathlib import Path

#: The environment variable naming the harness's folder (``run --cache DIR`` sets it for the run).
CACHE_ENV = "NPBENCH_RUNS_CACHE"


def cache_dir() -> Path:
    """The harness's folder, outside the repository: ``$NPBENCH_RUNS_CACHE``, else ``~/.cache/npbench_runs``.

    Builds, references and logs live there, and the results database when none is named (:func:`default_db`).
    Read at each call: ``run --cache DIR`` moves all of them.
    """
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "npbench_runs")


def default_db(cache: str | Path | None = None) -> Path:
    """The results database when ``--db`` is not given: ``results.db`` in ``cache``, else in :func:`cache_dir`."""
    return (Path(cache).expanduser() if cache else cache_dir()) / "results.db"


REPO = Path(__file__).resolve().parent.parent

#: Column name -> SQLite type. Times in milliseconds, compile time in seconds.
COLUMNS = {
    "run_id": "TEXT NOT NULL",  # one invocation of ``python -m npbench_runs run``
    "timestamp": "TEXT NOT NULL",  # ISO 8601, UTC, when the row was written
    "kernel": "TEXT NOT NULL",
    "category": "TEXT",
    "preset": "TEXT NOT NULL",
    "params": "TEXT",  # the preset's sizes, JSON
    "framework": "TEXT NOT NULL",
    "framework_version": "TEXT",
    "gpu": "TEXT",  # GPU name, "cpu" where there is none
    "host": "TEXT",
    "median_ms": "REAL",
    "min_ms": "REAL",
    "repeat": "INTEGER",  # timed runs that ran (0: the budget was spent by the first run, whose time is given)
    "repeat_target": "INTEGER",  # timed runs asked for (--repeat)
    "budget_s": "REAL",  # time budget of the runs of one (kernel, framework); NULL: none
    "first_ms": "REAL",  # the validated first run
    "compile_s": "REAL",  # time of a fresh build (kept from the run that built it when cached)
    "compile_cached": "INTEGER",  # 1: this run loaded an existing build
    "validated": "INTEGER NOT NULL",  # 1: the first run's outputs matched NumPy within RTOL/ATOL
    "error": "TEXT",  # compile error, exception, validation failure, crash or timeout; empty if none
    "kernel_ms": "REAL",  # ours: device-event time of the last kernel
    "grid": "TEXT",  # ours: grid x block of the last launch
    "git_commit": "TEXT",  # of this repository ("-dirty": tracked files modified), else $DACE_CPUFREE_COMMIT
}

#: Where the commit comes from when the harness runs without ``.git`` (a copy on a GPU host).
COMMIT_ENV = "DACE_CPUFREE_COMMIT"


def connect(path: str | Path) -> sqlite3.Connection:
    path = Path(path)
    if path.parent != Path(""):
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    cols = ", ".join(f"{name} {kind}" for name, kind in COLUMNS.items())
    conn.execute(f"CREATE TABLE IF NOT EXISTS results (id INTEGER PRIMARY KEY AUTOINCREMENT, {cols})")
    have = {row["name"] for row in conn.execute("PRAGMA table_info(results)")}
    for name, kind in COLUMNS.items():  # a database written by an older harness gains the new columns
        if name not in have:
            conn.execute(f"ALTER TABLE results ADD COLUMN {name} {kind.replace(' NOT NULL', '')}")
    conn.commit()
    return conn


def insert(conn: sqlite3.Connection, row: dict) -> None:
    values = {k: row.get(k) for k in COLUMNS}
    if isinstance(values["params"], dict):
        values["params"] = json.dumps(values["params"], sort_keys=True)
    values["validated"] = int(bool(values["validated"]))
    if values["compile_cached"] is not None:
        values["compile_cached"] = int(bool(values["compile_cached"]))
    values["error"] = values["error"] or ""
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    conn.execute(f"INSERT INTO results ({names}) VALUES ({marks})", list(values.values()))
    conn.commit()


def latest(conn: sqlite3.Connection, preset: str, gpu: str | None = None, run_id: str | None = None) -> list[dict]:
    """The newest row of each (kernel, framework) for ``preset`` (optionally of one GPU or one run)."""
    where, args = ["preset = ?"], [preset]
    if gpu:
        where.append("gpu = ?")
        args.append(gpu)
    if run_id:
        where.append("run_id = ?")
        args.append(run_id)
    query = (
        f"SELECT * FROM results WHERE id IN (SELECT MAX(id) FROM results WHERE {' AND '.join(where)} "
        "GROUP BY kernel, framework) ORDER BY id"
    )
    return [dict(r) for r in conn.execute(query, args)]


def done_pairs(conn: sqlite3.Connection, preset: str) -> set[tuple[str, str]]:
    """The (kernel, framework) pairs with a row of ``preset`` (errors included: a timeout is not retried)."""
    return {
        (r["kernel"], r["framework"])
        for r in conn.execute("SELECT kernel, framework FROM results WHERE preset = ?", (preset,))
    }


def copy(src: str | Path, dst: str | Path) -> None:
    """A consistent copy of the database (SQLite's backup; a journal left by a killed writer is rolled back)."""
    source = sqlite3.connect(src)
    target = sqlite3.connect(dst)
    with target:
        source.backup(target)
    target.close()
    source.close()


def merge(sources, dst: str | Path) -> int:
    """Append the rows of the databases ``sources`` to ``dst`` (e.g. one study run as shards on several GPUs,
    one database per shard). Returns the number of rows added."""
    target = connect(dst)
    added = 0
    for src in sources:
        source = connect(src)  # an older file gains the newer columns, so every row has all of COLUMNS
        for row in source.execute("SELECT * FROM results ORDER BY id"):
            insert(target, {k: row[k] for k in COLUMNS})
            added += 1
        source.close()
    target.close()
    return added


def git_commit() -> str:
    """This repository's commit, ``-dirty`` when tracked files were modified; else ``$DACE_CPUFREE_COMMIT``.

    A copy of the tree without ``.git`` (the GPU host gets one) cannot ask git: whoever starts the run
    there passes the commit in the environment. ``""`` when neither is known.
    """
    return _git_head() or os.environ.get(COMMIT_ENV, "").strip()


def _git_head() -> str:
    git = shutil.which("git")
    if git is None:
        return ""
    try:
        top = subprocess.run(
            [git, "rev-parse", "--show-toplevel"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if not top or Path(top).resolve() != REPO:  # no repository, or one around a copy of this tree
            return ""
        head = subprocess.run(
            [git, "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if not head:
            return ""
        dirty = subprocess.run(
            [git, "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def gpu_name() -> str:
    """The first GPU's name: from ``nvidia-smi`` (no CUDA context needed), else CuPy; ``"cpu"`` if none."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            )
            names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
            if out.returncode == 0 and names:
                return names[0]
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "cpu"


def host() -> str:
    return platform.node()
