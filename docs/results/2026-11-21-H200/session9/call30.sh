#!/bin/bash
# 4 H200s (session 9), commit in .gpu/COMMIT: why the split plain forms (SplitForEarlyPuts) are slow on several
# GPUs (call 29: jacobi_3d 199 us/step on 1 GPU, 357 on 2). Phases seen by blocks 0 and last of every PE
# (.gpu/diag_phases.py), and scaling rows with the hidden puts spread over all blocks (HIDDEN=1).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-420}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc30 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS; export DACE_CPUFREE_EARLY_PUTS=1
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
DG="python3 .gpu/diag_phases.py"
MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x LD_LIBRARY_PATH -x DACE_CPUFREE_EARLY_PUTS"
for c in "jacobi_3d plain 258 258 1" "jacobi_3d plain 258 514 2" "jacobi_3d overlapped 258 514 2" "jacobi_2d plain 8194 0 4"; do
  set -- $c; DG_BUILD_ONLY=$5 timeout -k 5 200 $DG $1 $2 $3 $4 10 > /tmp/b_$1_$2_$5.log 2>&1 &
done
DACE_CPUFREE_EARLY_PUTS=0 DG_BUILD_ONLY=2 timeout -k 5 200 $DG jacobi_3d plain 258 514 10 > /tmp/b_off.log 2>&1 &
DACE_CPUFREE_NVCC_FLAGS=-DCPUFREE_P2P_PER_THREAD_HIDDEN=1 timeout -k 10 200 python3 - > /tmp/prebuild_h1.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain"], 20), flush=True)
PY
wait; tail -q -n1 /tmp/b_*.log /tmp/prebuild_h1.log; echo "builds done, $(left) s left"
run() { timeout -k 5 60 $MPI -np "$@" 2>&1 | grep -E "^DG|^RESULT|rror|Trap|trap"; }
run 1 $DG jacobi_3d plain 258 258 60
run 2 $DG jacobi_3d plain 258 514 60
DACE_CPUFREE_EARLY_PUTS=0 run 2 $DG jacobi_3d plain 258 514 60
run 2 $DG jacobi_3d overlapped 258 514 60
run 4 $DG jacobi_2d plain 8194 0 60
echo "diag done, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak"
LARGE="--steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
mkdir -p $OUT/weak_h1
DACE_CPUFREE_NVCC_FLAGS=-DCPUFREE_P2P_PER_THREAD_HIDDEN=1 timeout -k 10 $(( $(left) - 10 )) $SC $LARGE --gpus 1 2 4 --forms plain --out $OUT/weak_h1 > $OUT/weak_h1/scaling.log 2>&1
echo "weak h1 rc=$? $(left) s left"
python3 - $OUT/weak_h1/multigpu_scaling.csv h1 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
