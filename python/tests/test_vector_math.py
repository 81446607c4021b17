"""oneMKL's vector-math first-call race (pytorch/pytorch#188792): before
anything runs on several threads, capture (``resolve_vector_math_kernels``)
and libloomrt (runtime/lib/VectorMath.h) call every function ATen computes
with oneMKL once on one thread. Both read the list from ATen's vml.h, one at
run time and one at configure time; they must find the same functions, and
find some: an empty list would silently drop the protection."""

from __future__ import annotations

import re

from build_tools import BUILD, needs_tools

GENERATED = BUILD / "runtime" / "lib" / "generated" / "VmlFunctions.inc"


@needs_tools(GENERATED)
def test_capture_and_runtime_resolve_the_same_functions():
    from loom.capture import resolve_vector_math_kernels

    names = resolve_vector_math_kernels()
    assert {"sqrt", "exp", "log", "tanh", "erf"} <= set(names), names
    assert list(names) == re.findall(r"LOOMRT_VML_FUNCTION\((\w+)\)", GENERATED.read_text())
