"""Checks that a safetensors file written by loom-import holds exactly the
weights of a .pt2 archive (same names, dtypes, shapes and bytes).

usage: check_weights.py ARCHIVE.pt2 WEIGHTS.safetensors
"""

import json
import struct
import sys
import zipfile

DTYPES = {7: "F32", 5: "I64", 8: "F64", 13: "BF16", 6: "F16", 12: "BOOL"}


def main():
    archive, weights = sys.argv[1:3]
    raw = open(weights, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n :]
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
        begin, end = h["data_offsets"]
        if h["dtype"] != dtype or h["shape"] != shape:
            sys.exit(f"{fqn}: {h['dtype']}{h['shape']} vs {dtype}{shape}")
        if data[begin:end] != blob[: end - begin] or end - begin != len(blob):
            sys.exit(f"{fqn}: bytes differ")
    print(f"ok: {len(expected)} tensors match")


if __name__ == "__main__":
    main()
