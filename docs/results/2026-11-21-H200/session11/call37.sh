#!/bin/bash
# 4 H200s (session 11), short: (1) per-block segment timing of jacobi_3d overlapped on 4 GPUs with the defaults
# (each rank's output in a file of its own; call 35's interleaved), (2) A/B of the hidden puts spread over all
# blocks of their lanes (-DCPUFREE_P2P_PER_THREAD_HIDDEN=1, against 4 per thread), jacobi_3d overlapped, 1 and 4 GPUs.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-230}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc37 DACE_CPUFREE_REF_CACHE=/tmp/ref37 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_DEFER_SIGNALS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
variant() { case $1 in V0) unset DACE_CPUFREE_NVCC_FLAGS ;; H1) export DACE_CPUFREE_NVCC_FLAGS=-DCPUFREE_P2P_PER_THREAD_HIDDEN=1 ;; esac; }
PIDS=""
for v in V0 H1; do
  ( variant $v; timeout -k 10 150 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_3d"], [1, 4], ("weak",), {"jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["overlapped"], 2), flush=True)
PY
  ) & PIDS="$PIDS $!"
done
DG="python3 .gpu/diag_blocks.py"
( DG_BUILD_ONLY=4 timeout -k 5 150 $DG jacobi_3d overlapped 258 1018 10 > /tmp/b_dg.log 2>&1 ) & PIDS="$PIDS $!"
wait $PIDS; for v in V0 H1; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; tail -1 /tmp/b_dg.log; echo "prebuilt, $(left) s left"
MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x DACE_CPUFREE_REF_CACHE -x LD_LIBRARY_PATH -x OUT"
export OUT
timeout -k 5 60 $MPI -np 4 sh -c 'exec python3 .gpu/diag_blocks.py jacobi_3d overlapped 258 1018 10 260 > $OUT/db_v0_pe$OMPI_COMM_WORLD_RANK.txt 2>&1'
echo "diag rc=$?"; grep -h RESULT $OUT/db_v0_pe*.txt; grep -h "total_us" $OUT/db_v0_pe*.txt
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak --gpus 1 4"
LARGE="--steps 10 --slope-steps 260 --size jacobi_3d=258 --repeat 2"
show() { python3 - $1 $2 <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"), r.get("stderr", "")[-300:])
PY
}
for v in H1 V0; do
  if [ $(left) -lt 35 ]; then echo "skip $v: $(left) s left"; continue; fi
  d=$OUT/$v; mkdir -p $d
  ( variant $v; timeout -k 10 $(( $(left) - 5 )) $SC $LARGE --programs jacobi_3d --forms overlapped --out $d > $d/scaling.log 2>&1 )
  show $d/multigpu_scaling.csv $v
done
cd $OUT && tar czf runs.tgz V0 H1 && rm -rf V0 H1
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
