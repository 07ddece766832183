#!/bin/bash
# 4 H200s (session 6): direct stores (shmem_transport=p2p) with full blocks. multigpu tests under p2p, then weak
# scaling of ours at the large tiles (2-D 4096^2, 3-D 256^3 per GPU) and the default tiles, every row validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-585}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc18 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
export DACE_CPUFREE_SHMEM_TRANSPORT=${TRANSPORT:-p2p}
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $(cat .gpu/COMMIT); transport $DACE_CPUFREE_SHMEM_TRANSPORT; $(left) s left"
timeout -s KILL 240 python3 - > /tmp/prebuild.log 2>&1 <<'PY' &
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",), {"jacobi_2d": 4098, "jacobi_3d": 258}))
c += list(s._configs(["jacobi_2d", "jacobi_3d"], [1, 2, 4], ("weak",)))
print(len(c), "configurations; errors:", s.prebuild_all(c, ["plain", "overlapped"], 60), flush=True)
PY
PB=$!
timeout -s KILL 220 python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -v -i warn "$OUT/multigpu_tests.log" | tail -2
wait $PB; tail -1 /tmp/prebuild.log; echo "prebuilt, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --repeat 2 --timeout 60 --frameworks cpufree --modes weak"
mkdir -p $OUT/weak_large $OUT/weak
timeout -s KILL $(( $(left) - 90 )) $SC --out $OUT/weak_large --steps 10 --slope-steps 60 \
  --size jacobi_2d=4098 jacobi_3d=258 > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
timeout -s KILL $(( $(left) - 5 )) $SC --out $OUT/weak --steps 100 --slope-steps 500 > $OUT/weak/scaling.log 2>&1
echo "weak rc=$? $(left) s left"
for d in weak_large weak; do echo "== $d"; cut -d'|' -f2-9,12-21 $OUT/$d/multigpu_scaling.md 2>/dev/null | head -16; done
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
