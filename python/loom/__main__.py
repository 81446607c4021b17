"""``python -m loom COMMAND``: the Python side's commands (run, capture)."""

from __future__ import annotations

import sys

USAGE = """usage: python -m loom COMMAND [ARGS...]

commands:
  run FILE.py --nproc N --dp fsdp [...]   capture, import, compile and train (loom.run)
  capture FILE.py --out DIR [...]         capture a training step only (loom.capture)

`python -m loom COMMAND --help` describes a command's options."""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "run":
        from loom import run
        return run.main(rest)
    if command == "capture":
        from loom import capture
        return capture.main(rest)
    print(f"loom: error: unknown command '{command}' (expected run or capture)\n\n{USAGE}",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
