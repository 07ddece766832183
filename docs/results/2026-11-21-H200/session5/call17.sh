#!/bin/bash
# 4 H200s (session 5, last): strided puts now spread over the blocks of their lane. Jacobi 2-D (strided east/west
# columns) weak at 1024^2 and 4096^2 per GPU and strong at 4098^2, ours, validated; the 2-D multigpu tests; on GPU 3
# meanwhile, the NPBench paper-size pairs the first call left (covariance, doitgen, syr2k: CuPy and ours; vadv plain).
set -u
T0=$(date +%s); T_CMD=${T_CMD:-330}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd)
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc17 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
nvidia-smi -L | head -1; echo "commit $DACE_CPUFREE_COMMIT; $(left) s left"
NB="python3 -m npbench_runs"
( CUDA_VISIBLE_DEVICES=3 DACE_CPUFREE_CACHE=/tmp/cfc17n timeout -s KILL 200 $NB run --preset paper --kernels covariance doitgen syr2k \
    --frameworks cupy dace_cpufree dace_cpufree_plain --db /tmp/P3.db --jobs 8 --repeat 10 --budget 3 --timeout 90 --cache /tmp/nbc \
    --progress plain > /tmp/tP3.log 2>&1
  CUDA_VISIBLE_DEVICES=3 DACE_CPUFREE_CACHE=/tmp/cfc17n timeout -s KILL 60 $NB run --preset paper --kernels vadv --frameworks dace_cpufree_plain \
    --db /tmp/P3.db --jobs 8 --repeat 10 --budget 3 --timeout 60 --cache /tmp/nbc --progress plain >> /tmp/tP3.log 2>&1
  cp /tmp/P3.db $OUT/results_paper_rest.db; grep -E "^\[" /tmp/tP3.log ) > /tmp/npb.out 2>&1 &
NPB=$!
timeout -s KILL 150 python3 - <<'PY' 2>&1 | tail -1
from npbench_runs.multigpu import scaling as s
c = list(s._configs(["jacobi_2d"], [1, 2, 4], ("weak", "strong")))
c += list(s._configs(["jacobi_2d"], [1, 4], ("weak",), {"jacobi_2d": 4098}))
print(len(c), "configurations prebuilt; errors:", s.prebuild_all(c, ["plain", "overlapped"], 40), flush=True)
PY
wait $NPB; cat /tmp/npb.out; echo "npbench + prebuild done, $(left) s left"
SC="python3 -m npbench_runs.multigpu.scaling --repeat 2 --timeout 50 --frameworks cpufree --programs jacobi_2d"
mkdir -p $OUT/weak_large $OUT/weak $OUT/strong
timeout -s KILL 100 $SC --out $OUT/weak_large --modes weak --steps 10 --slope-steps 60 --size jacobi_2d=4098 > $OUT/weak_large/scaling.log 2>&1
echo "weak large rc=$? $(left) s left"
timeout -s KILL 70 $SC --out $OUT/weak --modes weak --steps 100 --slope-steps 500 > $OUT/weak/scaling.log 2>&1
echo "weak rc=$? $(left) s left"
timeout -s KILL $(( $(left) - 70 )) $SC --out $OUT/strong --modes strong --steps 20 --slope-steps 100 > $OUT/strong/scaling.log 2>&1
echo "strong rc=$? $(left) s left"
timeout -s KILL $(( $(left) - 3 )) python3 -m pytest -q -p no:cacheprovider -m multigpu tests/test_multigpu.py -k jacobi_2d > $OUT/multigpu_tests.log 2>&1
echo "multigpu pytest (2-D) rc=$?"; grep -v -i warn $OUT/multigpu_tests.log | tail -1
for d in weak_large weak strong; do echo "== $d"; cut -d'|' -f2-7,11-14,16-21 $OUT/$d/multigpu_scaling.md 2>/dev/null | head -12; done
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
