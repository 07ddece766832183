#!/bin/bash
# 4 H200s (session 7): A/B at the large weak tiles, 4 GPUs, of where the direct-store halo's cost goes:
# base (spread puts, each block fences at once), defer (-DCPUFREE_P2P_DEFER_SIGNALS: fence and signal when the
# block next waits or synchronises), nodata (DIAGNOSTIC: signals without the data; results invalid on purpose).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-400}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc22 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
declare -A FL=([base]="" [defer]="-DCPUFREE_P2P_DEFER_SIGNALS" [nodata]="-DCPUFREE_P2P_DIAG_NO_DATA")
declare -A GP=([base]="1 4" [defer]="4" [nodata]="4")
VARIANTS="base defer nodata"
for v in $VARIANTS; do
  DACE_CPUFREE_NVCC_FLAGS="${FL[$v]}" GPUS="${GP[$v]}" timeout -s KILL 200 python3 - > /tmp/prebuild_$v.log 2>&1 <<'PY' &
import os
from npbench_runs.multigpu import scaling as s
g = [int(x) for x in os.environ["GPUS"].split()]
c = list(s._configs(["jacobi_2d", "jacobi_3d"], g, ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 20), flush=True)
PY
done
wait; for v in $VARIANTS; do echo "$v: $(tail -1 /tmp/prebuild_$v.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --repeat 1 --timeout 40 --frameworks cpufree --modes weak --steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258"
for v in $VARIANTS; do
  mkdir -p $OUT/$v
  DACE_CPUFREE_NVCC_FLAGS="${FL[$v]}" timeout -s KILL 120 $SC --out $OUT/$v --gpus ${GP[$v]} > $OUT/$v/scaling.log 2>&1
  echo "$v rc=$? $(left) s left"
done
for v in $VARIANTS; do python3 - $OUT/$v/multigpu_scaling.csv $v <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["launch"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7],
              "eff", r["efficiency"][:5], "halo/ex", r["halo_us_per_exchange"][:6], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
done
cd $OUT && tar czf variants.tgz $VARIANTS && rm -rf $VARIANTS
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
