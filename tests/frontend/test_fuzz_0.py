"""Generated NumPy programs (tests/fuzz_grammar.py), every fourth from case 0 so that ``--dist loadfile`` spreads
the four files over the workers: each runs in NumPy and in ours (the emulation under the race checker), and in
upstream DaCe on the CPU where those two disagree."""

import pytest
from fuzz_grammar import case_params, check_case


@pytest.mark.parametrize("case", case_params(part=0, parts=4))
def test_generated_program_matches_numpy(case, tmp_path):
    check_case(case, tmp_path)


def test_the_grammar_is_seeded_and_covers_its_productions():
    from fuzz_grammar import KNOWN_DISAGREEMENTS, all_cases, cases

    generated = all_cases()
    assert len(generated) >= 150
    assert [c.source for c in cases(count=10)] == [c.source for c in generated[:10]]
    tags = [t for c in generated for t in c.tags]
    for production in (
        "loop",
        "branch",
        "stencil",
        "transpose",
        "column",
        "row",
        "keepdims",
        "axisNone",
        "axis2",
        "np.prod",
        "np.mean",
        "np.where",
        "np.exp",
        "slice_step",
        "slice_const",
        "target_index",
        "loop_index",
        "temporary",
        "local",
        "return",
        "int_in_float",
        "aug-=",
        "aug/=",
    ):
        assert tags.count(production) >= 2, production
    assert set(KNOWN_DISAGREEMENTS) <= {c.case_id for c in generated}
