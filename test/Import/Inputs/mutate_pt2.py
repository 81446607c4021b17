"""Writes a damaged copy of a .pt2 archive, for the importer's error tests.

usage: mutate_pt2.py IN.pt2 OUT.pt2 MUTATION

Each mutation breaks one thing the importer must diagnose; only the Python
standard library is used, so the tests need no torch.
"""

import json
import sys
import zipfile


def rewrite(src, dst, edit_json=None, drop=None, replace=None):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            name = info.filename
            if drop and drop(name):
                continue
            data = zin.read(name)
            if name.endswith("models/model.json") and edit_json:
                model = json.loads(data)
                edit_json(model)
                data = json.dumps(model).encode()
            if replace and name in replace:
                data = replace[name]
            zout.writestr(info, data)


def nodes(model):
    return model["graph_module"]["graph"]["nodes"]


def first(model, target):
    return next(n for n in nodes(model) if n["target"] == target)


def set_custom(node, keys):
    """Adds ``keys`` to a node's custom metadata (a JSON text in the archive)."""
    custom = json.loads(node["metadata"]["custom"])
    custom.update(keys)
    node["metadata"]["custom"] = json.dumps(custom)


# Checkpoint-region tags that capture never writes: {mutation: (target, keys)}.
AC_MUTATIONS = {
    "ac-region-negative": ("torch.ops.aten.addmm.default",
                           {"loom.ac_region": -1, "loom.ac_policy": "prefer_recompute"}),
    "ac-region-string": ("torch.ops.aten.addmm.default",
                         {"loom.ac_region": "0", "loom.ac_policy": "prefer_recompute"}),
    "ac-policy-unknown": ("torch.ops.aten.addmm.default",
                          {"loom.ac_region": 0, "loom.ac_policy": "save"}),
    "ac-policy-alone": ("torch.ops.aten.addmm.default", {"loom.ac_policy": "must_save"}),
    "ac-backward": ("torch.ops.aten.ones_like.default",
                    {"loom.ac_region": 0, "loom.ac_policy": "prefer_recompute"}),
}

# Module-call tags (`loom.calls`) that capture never writes, in the same form.
CALL_MUTATIONS = {
    "calls-zero": ("torch.ops.aten.addmm.default", {"loom.calls": {"fc1": 0}}),
    "calls-not-object": ("torch.ops.aten.addmm.default", {"loom.calls": 1}),
    "calls-elsewhere": ("torch.ops.aten.addmm.default", {"loom.calls": {"nowhere": 1}}),
}

# Cast-pair tags (`loom.cast`) that capture never writes, in the same form.
CAST_MUTATIONS = {
    "cast-negative": ("torch.ops.aten.addmm.default", {"loom.cast": -1}),
    "cast-not-a-cast": ("torch.ops.aten.addmm.default", {"loom.cast": 0}),
}

# nn.SyncBatchNorm marks (`loom.sync_batch_norm`) that capture never writes.
SYNC_BATCH_NORM_MUTATIONS = {
    "sync-bn-false": ("torch.ops.aten._native_batch_norm_legit_functional.default",
                      {"loom.sync_batch_norm": False}),
    "sync-bn-not-bn": ("torch.ops.aten.addmm.default", {"loom.sync_batch_norm": True}),
}

TAG_MUTATIONS = {**AC_MUTATIONS, **CALL_MUTATIONS, **CAST_MUTATIONS, **SYNC_BATCH_NORM_MUTATIONS}


def main():
    src, dst, mutation = sys.argv[1:4]
    raw = open(src, "rb").read()
    if mutation == "truncate":
        open(dst, "wb").write(raw[: len(raw) // 2])
    elif mutation == "not-zip":
        open(dst, "wb").write(b"this is not an archive\n")
    elif mutation == "corrupt":
        # Entries are stored uncompressed: flipping bytes inside model.json's
        # data leaves the zip structure intact but breaks the entry's CRC.
        start = raw.index(b'"graph_module"')
        data = bytearray(raw)
        for i in range(start + 100, start + 110):
            data[i] ^= 0x5A
        open(dst, "wb").write(bytes(data))
    elif mutation == "schema-version":
        rewrite(src, dst, edit_json=lambda m: m["schema_version"].update(major=99))
    elif mutation == "bad-json":
        with zipfile.ZipFile(src) as z:
            name = next(n for n in z.namelist() if n.endswith("models/model.json"))
        rewrite(src, dst, replace={name: b'{"graph_module": ['})
    elif mutation == "no-model":
        rewrite(src, dst, drop=lambda n: n.endswith("models/model.json"))
    elif mutation == "unknown-arg-kind":
        def edit(m):
            arg = first(m, "torch.ops.aten.addmm.default")["inputs"][1]["arg"]
            arg["as_tensor_v2"] = arg.pop("as_tensor")
        rewrite(src, dst, edit_json=edit)
    elif mutation == "unknown-target":
        rewrite(src, dst, edit_json=lambda m: first(
            m, "torch.ops.aten.relu.default").update(target="my_lib.fancy_relu"))
    elif mutation == "higher-order":
        rewrite(src, dst, edit_json=lambda m: first(
            m, "torch.ops.aten.relu.default").update(target="torch.ops.higher_order.cond.default"))
    elif mutation == "dangling":
        def edit(m):
            first(m, "torch.ops.aten.addmm.default")["inputs"][1]["arg"] = {
                "as_tensor": {"name": "no_such_value"}}
        rewrite(src, dst, edit_json=edit)
    elif mutation == "shape":
        # Claim the first addmm produces one column too many.
        def edit(m):
            out = first(m, "torch.ops.aten.addmm.default")["outputs"][0]["as_tensor"]["name"]
            sizes = m["graph_module"]["graph"]["tensor_values"][out]["sizes"]
            sizes[-1]["as_int"] += 1
        rewrite(src, dst, edit_json=edit)
    elif mutation == "sparse-output":
        def edit(m):
            out = first(m, "torch.ops.aten.addmm.default")["outputs"][0]["as_tensor"]["name"]
            m["graph_module"]["graph"]["tensor_values"][out]["layout"] = 1
        rewrite(src, dst, edit_json=edit)
    elif mutation == "symbolic":
        def edit(m):
            tv = m["graph_module"]["graph"]["tensor_values"]
            name = next(iter(tv))
            tv[name]["sizes"][0] = {"as_expr": {"expr_str": "s0"}}
        rewrite(src, dst, edit_json=edit)
    elif mutation == "missing-weights":
        rewrite(src, dst, drop=lambda n: n.endswith("data/weights/weight_0"))
    elif mutation == "short-weights":
        with zipfile.ZipFile(src) as z:
            name = next(n for n in z.namelist() if n.endswith("data/weights/weight_0"))
            data = z.read(name)
        rewrite(src, dst, replace={name: data[:8]})
    elif mutation == "weight-shape":
        with zipfile.ZipFile(src) as z:
            name = next(n for n in z.namelist()
                        if n.endswith("model_weights_config.json"))
            cfg = json.loads(z.read(name))
        meta = cfg["config"]["fc1.weight"]["tensor_meta"]
        meta["sizes"][0]["as_int"] += 1
        rewrite(src, dst, replace={name: json.dumps(cfg).encode()})
    elif mutation == "empty-weights":
        # What `loom.capture --meta` writes: every weight and constant is
        # listed with its metadata but its entry holds no bytes.
        with zipfile.ZipFile(src) as z:
            names = [n for n in z.namelist()
                     if ("/data/weights/" in n or "/data/constants/" in n)
                     and not n.endswith(".json")]
        rewrite(src, dst, replace={n: b"" for n in names})
    elif mutation == "unlisted-weights":
        # No weight configs at all (nor their entries).
        rewrite(src, dst, drop=lambda n: "/data/weights/" in n or "/data/constants/" in n)
    elif mutation == "signature":
        rewrite(src, dst, edit_json=lambda m: m["graph_module"]["signature"][
            "input_specs"].pop())
    elif mutation in TAG_MUTATIONS:
        target, keys = TAG_MUTATIONS[mutation]
        rewrite(src, dst, edit_json=lambda m: set_custom(first(m, target), keys))
    else:
        sys.exit(f"unknown mutation {mutation}")


if __name__ == "__main__":
    main()
