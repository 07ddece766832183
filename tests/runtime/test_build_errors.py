"""A failed build names the compiler's first error, the generated line, its step and the program line."""

import pytest
from programs import boundary_copies, time_loop

import dace_cpufree
from dace_cpufree import api
from dace_cpufree.errors import BuildError
from dace_cpufree.runtime import build
from dace_cpufree.runtime.build import first_error

NVCC_OUTPUT = """/tmp/k/prog.cu(41): error: identifier "int_floor" is undefined
          __out = int_floor(a, 2);
                  ^
/tmp/k/prog.cu(57): error: no instance of overloaded function "min" matches the argument list
2 errors detected in the compilation of "/tmp/k/prog.cu".
"""

GXX_OUTPUT = """/tmp/k/prog.cpp: In function 'void kernel(double*)':
/tmp/k/prog.cpp:12:17: error: 'int_floor' was not declared in this scope
   12 |         __out = int_floor(a, 2);
/tmp/k/prog.cpp:20:3: error: expected ';' before '}' token
"""


@pytest.mark.parametrize(("output", "line"), [(NVCC_OUTPUT, 41), (GXX_OUTPUT, 12)])
def test_the_first_error_is_found_in_either_compilers_format(output, line):
    error, found = first_error(output)
    assert "int_floor" in error and found == line


def test_a_failed_host_build_names_the_first_error_and_its_step(tmp_path, monkeypatch):
    monkeypatch.setenv("DACE_CPUFREE_CACHE", str(tmp_path))
    code = "\n".join(
        [
            "void kernel(double *a) {",
            "    // loop outer",
            "    for (int i = 0; i < 2; ++i) {",
            "        // map compute_map",
            "        a[0] = undefined_function(a[1]);",
            "        a[1] = another_undefined(a[0]);",
            "    }",
            "}",
        ]
    )
    with pytest.raises(BuildError) as info:  # the steps as the generator states them: the innermost one named
        build(code, "broken", "emulate", steps=((2, 7, "loop outer"), (4, 6, "map compute_map")))
    err = info.value
    assert "undefined_function" in err.first_error and "another_undefined" not in err.first_error
    assert err.step == "map compute_map"
    text = str(err)
    assert text.index("first error:") < text.index("compiler output")
    assert "generated line 5: a[0] = undefined_function(a[1]);" in text
    with pytest.raises(BuildError) as info:  # no steps stated: none named, however the code is commented
        build(code, "broken", "emulate")
    assert info.value.step is None and "in the step" not in str(info.value)


def test_the_generator_states_the_lines_of_each_step_and_an_error_there_names_it(tmp_path, monkeypatch):
    """``KernelSource.step_lines``: each step's and loop's lines in the generated text, from its ``// label`` comment
    to its end, loops around their steps; a compiler error on a step's line names that step."""
    monkeypatch.setenv("DACE_CPUFREE_CACHE", str(tmp_path))
    source = dace_cpufree.kernel_source(time_loop, backend="emulate")
    lines = source.code.splitlines()
    spans = source.step_lines
    labels = [label for _, _, label in spans]
    assert labels[:2] == ["map _Add__map", "map _Add__map"] and labels[2].startswith("loop ") and len(labels) == 3
    for first, last, label in spans:
        assert lines[first - 1].strip() == f"// {label}" and first < last <= len(lines)
    (first_map, end_map, _), (second, _, _), (loop, end_loop, _) = spans
    assert loop < first_map < end_map < second < end_loop
    broken = list(lines)  # an error on the second map's first line of code, the line count kept
    broken[second] = "undefined_in_the_second_map(); " + broken[second]
    with pytest.raises(BuildError) as info:
        build("\n".join(broken), "broken_step", "emulate", steps=spans)
    assert info.value.step == "map _Add__map" and f"generated line {second + 1}:" in str(info.value)


def test_compile_adds_the_program_line_of_the_failing_step(monkeypatch):
    """The generator records the program line of each step; a build error in a step is reported with it."""
    source = dace_cpufree.kernel_source(boundary_copies)
    step, where = next(iter(source.step_sources.items()))
    assert "programs.py:" in where and where.rsplit(":", 1)[1].isdigit()

    def failing_build(code, name, backend, **flags):
        raise BuildError("g++ failed on the generated code", first_error="error: x", step=step)

    monkeypatch.setattr(api, "build", failing_build)
    with pytest.raises(BuildError, match=r"program line of that step: .*programs\.py:\d+"):
        dace_cpufree.compile(boundary_copies, backend="emulate")
