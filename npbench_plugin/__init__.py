"""dace-cpufree as an NPBench framework (github.com/spcl/npbench; NPBench itself is not vendored here).

Install into an NPBench checkout with ``python -m npbench_runs.install_plugin /path/to/npbench``.
The files:

``framework_info/dace_cpufree_gpu.json``      -> ``<npbench>/framework_info/`` (``-f dace_cpufree_gpu``)
``framework_info/dace_cpufree_emulate.json``  -> ``<npbench>/framework_info/`` (``-f dace_cpufree_emulate``)
``dace_cpufree_framework.py``                  -> ``<npbench>/npbench/infrastructure/``
"""

from pathlib import Path

PLUGIN_DIR = Path(__file__).resolve().parent
FRAMEWORK_MODULE = PLUGIN_DIR / "dace_cpufree_framework.py"
FRAMEWORK_INFO = sorted((PLUGIN_DIR / "framework_info").glob("*.json"))
FRAMEWORK_NAMES = [p.stem for p in FRAMEWORK_INFO]
