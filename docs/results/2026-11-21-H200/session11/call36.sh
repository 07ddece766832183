#!/bin/bash
# 4 H200s (session 11): A/B of DeferSignals (a hidden put's fence and signal after the first 1/K of the map that
# follows it, instead of right after its stores), weak scaling at the large tiles, 1 and 4 GPUs, slope 10 -> 260
# steps, every row validated against NumPy; then per-block segment timing of jacobi_3d overlapped with K = 4.
#   V0: DACE_CPUFREE_DEFER_SIGNALS=0 (off, the session-10 code)   D4: K = 4   D8: K = 8
set -u
T0=$(date +%s); T_CMD=${T_CMD:-440}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc36 DACE_CPUFREE_REF_CACHE=/tmp/ref36 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS DACE_CPUFREE_DEFER_SIGNALS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -2 .gpu/COMMIT | tr '\n' ' '); $(left) s left"
variant() { case $1 in V0) export DACE_CPUFREE_DEFER_SIGNALS=0 ;; D4) export DACE_CPUFREE_DEFER_SIGNALS=4 ;; D8) export DACE_CPUFREE_DEFER_SIGNALS=8 ;; esac; }
PIDS=""
for v in V0 D4 D8; do
  ( variant $v; timeout -k 10 200 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY'
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 5), flush=True)
PY
  ) & PIDS="$PIDS $!"
done
DG="python3 .gpu/diag_blocks.py"
( variant D4; DG_BUILD_ONLY=4 timeout -k 5 200 $DG jacobi_3d overlapped 258 1018 10 > /tmp/b_dg.log 2>&1 ) & PIDS="$PIDS $!"
wait $PIDS; for v in V0 D4 D8; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; tail -1 /tmp/b_dg.log; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak --gpus 1 4"
LARGE="--steps 10 --slope-steps 260 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
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
for pf in "jacobi_3d overlapped" "jacobi_3d plain" "jacobi_2d plain" "jacobi_2d overlapped"; do
  set -- $pf
  for v in D4 V0 D8; do
    if [ $(left) -lt 60 ]; then echo "skip $v $1 $2: $(left) s left"; continue; fi
    d=$OUT/$v/$1_$2; mkdir -p $d
    ( variant $v; timeout -k 10 $(( $(left) - 40 )) $SC $LARGE --programs $1 --forms $2 --out $d > $d/scaling.log 2>&1 )
    show $d/multigpu_scaling.csv $v
  done
done
if [ $(left) -gt 35 ]; then
  echo "== per-block segments, D4, jacobi_3d overlapped, 4 GPUs ($(left) s left)"
  MPI="mpirun --allow-run-as-root --oversubscribe -x NVSHMEM_DISABLE_NVLS=1 -x PYTHONPATH -x DACE_CPUFREE_CACHE -x DACE_CPUFREE_REF_CACHE -x LD_LIBRARY_PATH -x DACE_CPUFREE_DEFER_SIGNALS"
  ( variant D4; timeout -k 5 $(( $(left) - 5 )) $MPI --output-filename $OUT/db_d4 -np 4 $DG jacobi_3d overlapped 258 1018 10 260 > /dev/null 2>&1 )
  grep -h RESULT -r $OUT/db_d4 2>/dev/null
fi
cd $OUT && tar czf runs.tgz V0 D4 D8 && rm -rf V0 D4 D8
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
