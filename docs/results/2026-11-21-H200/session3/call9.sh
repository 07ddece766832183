#!/bin/bash
# 1 H200: the time-loop NPBench kernels at S with grid steps apart (default) and inlined (DACE_CPUFREE_INLINE_STEPS=1).
set -u
OUT=$(cd "${OUT:?}" && pwd); R=/tmp; ST=$R/npb; mkdir -p $ST
export PYTHONPATH=$R/run:$R/site PYTHONUNBUFFERED=1 DACE_CPUFREE_COMMIT=$(cat .gpu/COMMIT)
K="vadv jacobi_1d cg_residual adi go_fast fdtd_2d heat_3d jacobi_2d"; NB="python3 -m npbench_runs"
{
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $R/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target $R/site . >> /tmp/install.log 2>&1 || echo "source install failed"
rm -rf $R/run && mkdir -p $R/run && cp -r npbench_runs .gpu $R/run/ && cd $R/run
( DACE_CPUFREE_CACHE=$R/cA timeout -s KILL 150 $NB run --preset S --kernels $K --frameworks numpy dace_cpufree --compile-only --jobs 8 --cache $R/nA --progress plain > $ST/bA.log 2>&1 ) &
( DACE_CPUFREE_INLINE_STEPS=1 DACE_CPUFREE_CACHE=$R/cB timeout -s KILL 150 $NB run --preset S --kernels $K --frameworks numpy dace_cpufree --compile-only --jobs 8 --cache $R/nB --progress plain > $ST/bB.log 2>&1 ) &
wait; echo builds done
DACE_CPUFREE_CACHE=$R/cA timeout -s KILL 100 $NB run --preset S --kernels $K --frameworks numpy dace_cpufree --db $ST/A.db --jobs 8 --repeat 10 --budget 2 --timeout 60 --cache $R/nA --progress plain > $ST/tA.log 2>&1
echo "apart:"; grep -E "^\[" $ST/tA.log | grep cpufree
DACE_CPUFREE_INLINE_STEPS=1 DACE_CPUFREE_CACHE=$R/cB timeout -s KILL 100 $NB run --preset S --kernels $K --frameworks numpy dace_cpufree --db $ST/B.db --jobs 8 --repeat 10 --budget 2 --timeout 60 --cache $R/nB --progress plain > $ST/tB.log 2>&1
echo "inline:"; grep -E "^\[" $ST/tB.log | grep cpufree
cp $ST/A.db $OUT/apart_S.db; cp $ST/B.db $OUT/inline_S.db
} 2>&1 | grep --line-buffered -v -i "warn" | tee $OUT/console.log
