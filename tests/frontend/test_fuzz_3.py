"""Generated NumPy programs (tests/fuzz_grammar.py), every fourth from case 3 so that ``--dist loadfile`` spreads
the four files over the workers: each runs in NumPy and in ours (the emulation under the race checker), and in
upstream DaCe on the CPU where those two disagree."""

import pytest
from fuzz_grammar import case_params, check_case


@pytest.mark.parametrize("case", case_params(part=3, parts=4))
def test_generated_program_matches_numpy(case, tmp_path):
    check_case(case, tmp_path)
