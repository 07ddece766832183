#!/bin/bash
set -u
OUT=$(cd "${OUT:?}" && pwd); R=/tmp
export PYTHONPATH=$R/run:$R/site DACE_CPUFREE_CACHE=$R/cfc10 PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $R/site .whl/*.whl > /tmp/install.log 2>&1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target $R/site . >> /tmp/install.log 2>&1 || echo "source install failed"
rm -rf $R/run && mkdir -p $R/run && cp -r npbench_runs .gpu $R/run/ && cd $R/run
timeout -s KILL 330 python3 .gpu/diag_gemv.py mvt gesummv 2>&1 | grep -v -i warn
} 2>&1 | tee $OUT/console.log
