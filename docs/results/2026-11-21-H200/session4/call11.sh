#!/bin/bash
# 1 H200 (session 4): column-reduction unrolling, the scheduler's kernels at S and paper (ours, plain, CuPy,
# NumPy), then the GPU test suite.
set -u
T0=$(date +%s); T_CMD=${T_CMD:-580}
left() { echo $(( T_CMD - ($(date +%s) - T0) )); }
OUT=$(cd "${OUT:?}" && pwd); R=/tmp; ST=$R/npb; CACHE=$R/nbc; mkdir -p $ST
export PYTHONPATH=$R/run:$R/site NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 DACE_CPUFREE_CACHE=$R/cfc11
export PYTHONUNBUFFERED=1 DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
NB="python3 -m npbench_runs"
K9="softmax gesummv mvt atax bicg gemver mlp syr2k covariance"
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $R/site .whl/*.whl > $ST/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target $R/site . >> $ST/install.log 2>&1 || echo "source install failed"
rm -rf $R/run && mkdir -p $R/run && cp -r tests npbench_runs pyproject.toml .gpu $R/run/ && cd $R/run
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; echo "commit $DACE_CPUFREE_COMMIT; $(left) s left"
timeout -s KILL 200 $NB run --preset S --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --compile-only --jobs 16 --cache $CACHE --progress plain > $ST/b.log 2>&1 &
timeout -s KILL 150 python3 .gpu/diag_cols.py mvt atax bicg 2>&1 | grep -v -i warn
wait; echo "diag + S builds done, $(left) s left"
timeout -s KILL 200 nice -n 10 $NB run --preset paper --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --compile-only --jobs 8 --cache $CACHE --progress plain > $ST/bp.log 2>&1 &
timeout -s KILL 150 $NB run --preset S --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --db $ST/S.db --jobs 8 --repeat 10 --budget 2 --timeout 60 --cache $CACHE --progress plain > $ST/tS.log 2>&1
echo "S rc=$? $(left) s left"; grep -E "^\[" $ST/tS.log | tail -40
wait
timeout -s KILL 150 $NB run --preset paper --kernels $K9 --frameworks numpy cupy dace_cpufree dace_cpufree_plain --db $ST/P.db --jobs 8 --repeat 10 --budget 3 --timeout 90 --cache $CACHE --progress plain > $ST/tP.log 2>&1
echo "paper rc=$? $(left) s left"; grep -E "^\[" $ST/tP.log | tail -40
cp $ST/S.db $ST/P.db $OUT/
timeout -s KILL $(( $(left) - 15 )) python3 -m pytest -q -m gpu tests -p no:cacheprovider > $ST/gpu_tests.log 2>&1
echo "gpu pytest rc=$?"; tail -5 $ST/gpu_tests.log
tar czf $OUT/logs.tgz -C $ST b.log bp.log tS.log tP.log gpu_tests.log
echo "done after $(( $(date +%s) - T0 )) s"
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
