"""Copies a .loomx artifact with one key added to its program JSON, to show
that check_artifact.py refuses a key the schema does not declare.

usage: add_key.py IN.loomx OUT.loomx WHERE KEY
WHERE: `program` (the top level), `input` (inputs[0]), `instruction`
(programs[0].instructions[0]) or `send-wait` (the wait of programs[0]'s
first send_start, to show that a send's wait may not have a `result`).
"""

import json
import struct
import sys

src, dst, where, key = sys.argv[1:5]
blob = open(src, "rb").read()
version, flags, n, m = struct.unpack("<IIQQ", blob[8:32])
program = json.loads(blob[32:32 + n])


def send_wait(p):
    insts = p["programs"][0]["instructions"]
    future = next(i["future"] for i in insts if i["op"] == "send_start")
    return next(i for i in insts if i["op"] == "wait" and i["future"] == future)


target = {"program": lambda p: p, "input": lambda p: p["inputs"][0],
          "instruction": lambda p: p["programs"][0]["instructions"][0],
          "send-wait": send_wait}[where](program)
target[key] = 0
text = json.dumps(program).encode()
with open(dst, "wb") as f:
    f.write(blob[:8] + struct.pack("<IIQQ", version, flags, len(text), m) + text + blob[32 + n:])
