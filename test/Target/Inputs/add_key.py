"""Copies a .loomx artifact with one key added to its program JSON, to show
that check_artifact.py refuses a key the schema does not declare.

usage: add_key.py IN.loomx OUT.loomx WHERE KEY
WHERE: `program` (the top level), `input` (inputs[0]) or `instruction`
(programs[0].instructions[0]).
"""

import json
import struct
import sys

src, dst, where, key = sys.argv[1:5]
blob = open(src, "rb").read()
version, flags, n, m = struct.unpack("<IIQQ", blob[8:32])
program = json.loads(blob[32:32 + n])
target = {"program": lambda p: p, "input": lambda p: p["inputs"][0],
          "instruction": lambda p: p["programs"][0]["instructions"][0]}[where](program)
target[key] = 0
text = json.dumps(program).encode()
with open(dst, "wb") as f:
    f.write(blob[:8] + struct.pack("<IIQQ", version, flags, len(text), m) + text + blob[32 + n:])
