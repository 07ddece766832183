#!/bin/bash
# 4 H200s (session 8), commit in .gpu/COMMIT (= 23758e1's code): weak scaling of jacobi_2d at the default small
# tile (1024^2 per GPU, latency-bound), 1 and 4 GPUs, direct stores and NVSHMEM's calls side by side. Validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-250}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc28 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_STAGGER
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
for tr in p2p proxy; do
  DACE_CPUFREE_SHMEM_TRANSPORT=$tr timeout -k 10 120 python3 - > /tmp/prebuild_$tr.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d"], [1, 4], ("weak",)))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 8), flush=True)
PY
done
wait; for tr in p2p proxy; do echo "$tr: $(tail -1 /tmp/prebuild_$tr.log)"; done; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 40 --frameworks cpufree --modes weak --programs jacobi_2d --gpus 1 4"
for tr in p2p proxy; do
  mkdir -p $OUT/small_$tr
  DACE_CPUFREE_SHMEM_TRANSPORT=$tr timeout -k 5 $(( $(left) / 2 - 5 )) $SC --steps 100 --slope-steps 500 --repeat 1 --out $OUT/small_$tr > $OUT/small_$tr/scaling.log 2>&1
  echo "small $tr rc=$? $(left) s left"
  python3 - $OUT/small_$tr/multigpu_scaling.csv $tr <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(sys.argv[2], r["program"], r["form"], r["transport"], r["launch"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7],
              "eff", r["efficiency"][:5], "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(sys.argv[2], r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
done
cd $OUT && tar czf runs.tgz small_p2p small_proxy && rm -rf small_p2p small_proxy
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
