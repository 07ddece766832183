#!/bin/bash
# 4 H200s (session 4, final): multigpu tests (default transport), then the scheduler's 9 kernels at paper and S
# size on GPU 0 (ours, plain, CuPy, NumPy), validated.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-540}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd); ST=/tmp/npb; CACHE=/tmp/nbc; mkdir -p $ST
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target /tmp/site . >> /tmp/install.log 2>&1 || echo "source install failed"
NV=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])")
export PYTHONPATH=/tmp/site:/tmp/run NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
export DACE_CPUFREE_CACHE=/tmp/cfc13 LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf /tmp/run && mkdir -p /tmp/run && cp -r tests npbench_runs pyproject.toml .gpu /tmp/run/ && cd /tmp/run
NB="python3 -m npbench_runs"; K9="softmax gesummv mvt atax bicg gemver mlp syr2k covariance"
nvidia-smi -L | head -1; echo "commit $DACE_CPUFREE_COMMIT; $(left) s left"
timeout -s KILL 200 $NB run --preset paper --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --compile-only --jobs 32 --cache $CACHE --progress plain > $ST/b.log 2>&1 &
timeout -s KILL 200 python3 -m pytest -q -p no:cacheprovider -m "multigpu" tests/test_multigpu.py > "$OUT/multigpu_tests.log" 2>&1
echo "multigpu pytest rc=$? $(left) s left"; grep -v -i warn "$OUT/multigpu_tests.log" | tail -2
wait
export CUDA_VISIBLE_DEVICES=0
timeout -s KILL 150 $NB run --preset paper --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --db $ST/P.db --jobs 8 --repeat 10 --budget 3 --timeout 90 --cache $CACHE --progress plain > $ST/tP.log 2>&1
echo "paper rc=$? $(left) s left"; grep -E "^\[[0-9]+/36\]" $ST/tP.log | tail -40
timeout -s KILL $(( $(left) - 5 )) $NB run --preset S --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --db $ST/S.db --jobs 8 --repeat 10 --budget 2 --timeout 60 --cache $CACHE --progress plain > $ST/tS.log 2>&1
echo "S rc=$? $(left) s left"; grep -E "^\[[0-9]+/36\]" $ST/tS.log | tail -40
cp $ST/P.db $ST/S.db $OUT/ 2>/dev/null
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
