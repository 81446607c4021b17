"""Compares loom-simulate's bubble fraction with the formula for equal stages.

    check_bubble.py [--shrink-only] FILE:P:M:V ...

Each FILE is a `loom-simulate json=true` report of a pipelined step with P
pipeline ranks, M microbatches and V stages per rank; the formula is
(P-1)/(V*M+P-1). Prints one line per file; fails (exit 1) when a bubble is
more than 0.02 from the formula (not checked with --shrink-only, for
unequal stages), or when it does not shrink as M grows for the same P and V.
"""

import json
import re
import sys


def main(argv):
    shrink_only = "--shrink-only" in argv
    specs = [a for a in argv if a != "--shrink-only"]
    ok = True
    seen = {}
    for spec in specs:
        path, p, m, v = spec.rsplit(":", 3)
        p, m, v = int(p), int(m), int(v)
        report = json.load(open(path))
        bubble = report["bubble_fraction"]
        formula = (p - 1) / (v * m + p - 1)
        name = re.sub(r"^.*\.tmp\.|\.json$", "", path.rsplit("/", 1)[-1])
        ranks = report["pipeline_ranks"]
        if shrink_only:
            print(f"{name}: {ranks} ranks, bubble {bubble:.4f}")
        else:
            print(f"{name}: {ranks} ranks, bubble {bubble:.4f} "
                  f"(formula {formula:.4f})")
            ok &= abs(bubble - formula) <= 0.02
        ok &= ranks == p
        for (p0, v0, m0), b0 in seen.items():
            if (p0, v0) == (p, v) and m0 < m and not b0 > bubble:
                print(f"{name}: bubble {bubble:.4f} does not shrink from "
                      f"{b0:.4f} at {m0} microbatches")
                ok = False
        seen[(p, v, m)] = bubble
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
