#!/bin/bash
# 4 H200s (session 10), commit in .gpu/COMMIT (puts on the last blocks of their lanes; HideWaits opt-in):
# the multigpu tests (with HideWaits on for 4 of them), then weak scaling at the large tiles with the defaults,
# every row validated against NumPy.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-530}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc34 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
unset DACE_CPUFREE_SHMEM_TRANSPORT DACE_CPUFREE_NVCC_FLAGS DACE_CPUFREE_EARLY_PUTS DACE_CPUFREE_HIDE_WAITS
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(head -1 .gpu/COMMIT); $(left) s left"
timeout -k 10 200 python3 - > /tmp/prebuild.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 30), flush=True)
PY
timeout -k 15 $(( $(left) - 215 )) python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -E "passed|failed|error" "$OUT/multigpu_tests.log" | tail -3
wait; echo "prebuild: $(tail -1 /tmp/prebuild.log)"
SC="python3 -m npbench_runs.multigpu.scaling --timeout 60 --frameworks cpufree --modes weak"
LARGE="--steps 10 --slope-steps 60 --size jacobi_2d=4098 jacobi_3d=258 --repeat 2"
mkdir -p $OUT/weak_large
timeout -k 10 $(( $(left) - 5 )) $SC $LARGE --gpus 1 2 4 --out $OUT/weak_large > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
python3 - $OUT/weak_large/multigpu_scaling.csv <<'PY'
import csv, sys
for r in csv.DictReader(open(sys.argv[1])):
    if r.get("us_per_step"):
        print(r["program"], r["form"], r["gpus"], r["n"], "us/step", r["us_per_step"][:7], "eff", r["efficiency"][:5],
              "halo/ex", r["halo_us_per_exchange"][:6], "x floor", r["exchange_vs_floor"][:5], "valid", r["valid"], r["bitwise"])
    else:
        print(r["program"], r["form"], r["gpus"], r["n"], "ERROR", r.get("error"))
PY
cd $OUT && tar czf runs.tgz weak_large && rm -rf weak_large
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
