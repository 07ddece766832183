"""The FP64 DMMA tile product's index arithmetic (``cpufree/gemm_dmma.cuh``), emulated lane by lane on the host:
every DMMA tile of the benchmark's configurations (the default among them) and one per atom depth, against CuTe's
own fragment layouts and a plain product, for the sm_90 atoms and the m8n8k4 split of other architectures."""

import shutil

import pytest

from npbench_runs import gemm_tiles

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (host compilation of the check)")


def test_dmma_fragment_layouts_match_cute_and_a_plain_product(tmp_path, capsys):
    assert gemm_tiles.check(tmp_path, compile_configs=False) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    # every tile was checked for both the sm_90 atoms and the sm_80 split
    assert out.count("ok   check") == 2 * len(gemm_tiles.dmma_tiles())
