"""Gives a hand-written step the weights loom-compile needs for an artifact.

Wraps STEP.mlir's ops in a module that names OUT/step.weights.safetensors
(`loom.weights`) and writes that file, with deterministic values for every
argument of role parameter, buffer or constant (f32 only; enough for the
hand-written test steps), written with the `safetensors` package.

usage: add_weights.py STEP.mlir OUT_DIR
"""

import re
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save


def main():
    step, out = Path(sys.argv[1]), Path(sys.argv[2])
    text = step.read_text()
    args = re.findall(r"%\w+: tensor<((?:\d+x)*)f32> \{loom\.name = \"([^\"]+)\", "
                      r"loom\.role = #loom\.role<(parameter|buffer|constant)>", text)
    blobs = {}
    for dims, name, _ in args:
        # A tensor several step functions bind (MPMD programs sharing a
        # weight) is stored once.
        if name in blobs:
            continue
        shape = [int(d) for d in dims.split("x") if d]
        count = 1
        for d in shape:
            count *= d
        values = [((i * 7 + len(name)) % 13 - 6) / 16 for i in range(count)]
        blobs[name] = np.array(values, dtype=np.float32).reshape(shape)
    (out / "step.weights.safetensors").write_bytes(save(blobs))
    (out / "step.mlir").write_text(
        'module attributes {loom.weights = "step.weights.safetensors"} {\n'
        + text + "}\n")


if __name__ == "__main__":
    main()
