#!/usr/bin/env bash
# Re-captures micro.pt2, the importer fuzzer's small seed, from micro.py
# (needs the project's .venv). The fuzzer's speed is roughly inverse to its
# inputs' size (the importer parses the whole graph JSON each time), so the
# seed drops what the importer does not need or what only adds bytes: the
# sample inputs (a pickle) and the nodes' stack traces (tiny.pt2, the other
# seed, keeps its own).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
tmp=$(mktemp -d)
PYTHONPATH="$root/python" "$root/.venv/bin/python" -m loom.capture "$here/micro.py" --out "$tmp" --steps 1
python3 - "$tmp/step.pt2" "$here/micro.pt2" <<'PY'
import json, sys, zipfile
src = zipfile.ZipFile(sys.argv[1])
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as out:
    for info in src.infolist():
        data = src.read(info.filename)
        if info.filename.endswith("sample_inputs/model.pt"):
            continue
        if info.filename.endswith("models/model.json"):
            model = json.loads(data)
            for node in model["graph_module"]["graph"]["nodes"]:
                node.get("metadata", {}).pop("stack_trace", None)
            data = json.dumps(model, separators=(",", ":")).encode()
        out.writestr(info.filename, data)
PY
rm -rf "$tmp"
