#!/bin/bash
# 4 H200s (session 5): multigpu tests (the launch now waits on an on-stream barrier), then the scaling study with
# time per step as the slope between two runs (launch cost apart): weak at the default tiles (ours + DaCe/MPI),
# weak at large tiles (ours), strong (ours + DaCe/MPI). Every configuration validated against NumPy.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-585}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc16 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(cat .gpu/COMMIT); $(left) s left"
timeout -s KILL 240 python3 - > /tmp/prebuild.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak", "strong")))
c += list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 48), flush=True)
PY
PB=$!
timeout -s KILL 230 python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -v -i warn "$OUT/multigpu_tests.log" | tail -2
wait $PB; tail -1 /tmp/prebuild.log; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --repeat 2 --timeout 60"
mkdir -p $OUT/weak $OUT/weak_large $OUT/strong
timeout -s KILL $(( $(left) - 200 )) $SC --out $OUT/weak --modes weak --steps 100 --slope-steps 500 > $OUT/weak/scaling.log 2>&1
echo "weak rc=$? $(left) s left"
timeout -s KILL $(( $(left) - 110 )) $SC --out $OUT/weak_large --modes weak --frameworks cpufree --steps 10 --slope-steps 60 \
  --size jacobi_2d=4098 jacobi_3d=258 > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
timeout -s KILL $(( $(left) - 5 )) $SC --out $OUT/strong --modes strong --steps 20 --slope-steps 100 > $OUT/strong/scaling.log 2>&1
echo "strong rc=$? $(left) s left"
for d in weak weak_large strong; do echo "== $d"; cut -d'|' -f2-7,10-20 $OUT/$d/multigpu_scaling.md 2>/dev/null | head -30; done
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
