#!/bin/bash
# 4 H200s (session 11), commit in .gpu/COMMIT (the session-10 defaults). Diagnosis of the 4-GPU weak-scaling loss:
#  1. the speed of each GPU alone: jacobi_3d overlapped at the 1-GPU weak size on GPU 0, 1, 2, 3 in turn, then on
#     all four at once (four independent single-PE jobs), with nvidia-smi sampling clocks, power and throttling;
#  2. per-block segment timing (.gpu/diag_blocks.py) of jacobi_3d overlapped on 1 and 4 GPUs, plain on 4 GPUs,
#     jacobi_2d plain and overlapped on 4 GPUs;
#  3. weak-scaling rows (1 and 4 GPUs) of jacobi_3d both forms, slope over 10 -> 260 steps.
# Every run is validated against NumPy.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-560}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc35 DACE_CPUFREE_REF_CACHE=/tmp/ref35 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
nvidia-smi topo -m > $OUT/topo.txt 2>&1
Q=index,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$Q --format=csv > $OUT/smi_idle.csv 2>&1 || Q=index,clocks.sm,clocks.mem,power.draw,temperature.gpu
nvidia-smi --query-gpu=$Q --format=csv,noheader -lms 250 > $OUT/smi_trace.csv 2>&1 & SMI=$!
DG="python3 .gpu/diag_blocks.py"
( timeout -k 10 200 python3 - > /tmp/prebuild.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 8), flush=True)
PY
) & PIDS="$!"
for c in "jacobi_3d overlapped 258 1018 4" "jacobi_3d plain 258 1018 4" "jacobi_2d plain 8194 0 4" "jacobi_2d overlapped 8194 0 4"; do
  set -- $c; ( DG_BUILD_ONLY=$5 timeout -k 5 200 $DG $1 $2 $3 $4 10 > /tmp/b_$1_$2_$5.log 2>&1 ) & PIDS="$PIDS $!"
done
wait $PIDS; echo "prebuild: $(tail -1 /tmp/prebuild.log)"; tail -qn1 /tmp/b_*.log; echo "built, $(left) s left"
MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x DACE_CPUFREE_REF_CACHE -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES"
one() {  # GPU form: jacobi_3d at the 1-GPU weak size alone on that GPU
  CUDA_VISIBLE_DEVICES=$1 timeout -k 10 100 $MPI -np 1 python3 -m npbench_runs.multigpu.run --program jacobi_3d --form $2 \
    --n 258 --nx 258 --steps 10 --slope-steps 260 --repeat 3 --json 2>/dev/null | grep '^{' | \
    python3 -c "import json,sys; r=json.loads(sys.stdin.read()); print('$3 GPU $1 jacobi_3d', r['form'], 'us/step %.2f' % r['us_per_step'], 'valid', r.get('valid'), r.get('bitwise'))"
}
echo "== 1. each GPU alone, in turn ($(left) s left)"; date +%T.%N
for g in 0 1 2 3; do one $g overlapped alone; done
echo "== all four at once ($(left) s left)"; date +%T.%N
P=""; for g in 0 1 2 3; do one $g overlapped together > /tmp/together_$g.log & P="$P $!"; done; wait $P; cat /tmp/together_*.log
P=""; for g in 0 1 2 3; do one $g plain together > /tmp/together_$g.log & P="$P $!"; done; wait $P; cat /tmp/together_*.log
date +%T.%N
echo "== 2. per-block segments ($(left) s left)"
drun() { echo "-- $*"; timeout -k 5 80 $MPI -np "$@" 2>&1 | grep -E "^DB|^RESULT|rror|rap"; }
drun 4 $DG jacobi_3d overlapped 258 1018 10 260 > $OUT/db_3d_ovl_4.txt; grep RESULT $OUT/db_3d_ovl_4.txt
drun 1 $DG jacobi_3d overlapped 258 258 10 260 > $OUT/db_3d_ovl_1.txt; grep RESULT $OUT/db_3d_ovl_1.txt
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak --gpus 1 4"
LARGE="--steps 10 --slope-steps 260 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
show() { python3 - $1 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
echo "== 3. weak rows ($(left) s left)"
mkdir -p $OUT/weak3d; timeout -k 10 $(( $(left) - 150 )) $SC $LARGE --programs jacobi_3d --out $OUT/weak3d > $OUT/weak3d/scaling.log 2>&1
show $OUT/weak3d/multigpu_scaling.csv
echo "== per-block segments, more ($(left) s left)"
[ $(left) -gt 40 ] && { drun 4 $DG jacobi_3d plain 258 1018 10 260 > $OUT/db_3d_plain_4.txt; grep RESULT $OUT/db_3d_plain_4.txt; }
[ $(left) -gt 40 ] && { drun 4 $DG jacobi_2d plain 8194 0 10 260 > $OUT/db_2d_plain_4.txt; grep RESULT $OUT/db_2d_plain_4.txt; }
[ $(left) -gt 40 ] && { drun 4 $DG jacobi_2d overlapped 8194 0 10 260 > $OUT/db_2d_ovl_4.txt; grep RESULT $OUT/db_2d_ovl_4.txt; }
kill $SMI 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
