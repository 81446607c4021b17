"""Checks that a safetensors file written by loom-import holds exactly the
weights of a .pt2 archive (same names, dtypes, shapes and bytes).

usage: check_weights.py ARCHIVE.pt2 WEIGHTS.safetensors
"""

import json
import sys
import zipfile

import safetensors

DTYPES = {7: "F32", 5: "I64", 8: "F64", 13: "BF16", 6: "F16", 12: "BOOL"}


def main():
    archive, weights = sys.argv[1:3]
    # The format's reference reader, not a second parser of our own.
    header = {name: t for name, t in safetensors.deserialize(open(weights, "rb").read())}
    expected = {}
    with zipfile.ZipFile(archive) as z:
        for cfg_name in [x for x in z.namelist() if x.endswith("_config.json")]:
            folder = cfg_name.rsplit("/", 1)[0] + "/"
            for fqn, entry in json.loads(z.read(cfg_name))["config"].items():
                meta = entry["tensor_meta"]
                expected[fqn] = (
                    DTYPES[meta["dtype"]],
                    [s["as_int"] for s in meta["sizes"]],
                    z.read(folder + entry["path_name"]),
                )
    if set(header) != set(expected):
        sys.exit(f"names differ: {sorted(header)} vs {sorted(expected)}")
    for fqn, (dtype, shape, blob) in expected.items():
        h = header[fqn]
        if h["dtype"] != dtype or list(h["shape"]) != shape:
            sys.exit(f"{fqn}: {h['dtype']}{h['shape']} vs {dtype}{shape}")
        if bytes(h["data"]) != blob:
            sys.exit(f"{fqn}: bytes differ")
    print(f"ok: {len(expected)} tensors match")


if __name__ == "__main__":
    main()
