#!/usr/bin/env bash
# Re-captures tiny.pt2 from tiny.py (needs the project's .venv).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
tmp=$(mktemp -d)
PYTHONPATH="$root/python" "$root/.venv/bin/python" -m loom.capture "$here/tiny.py" --out "$tmp" --steps 1
cp "$tmp/step.pt2" "$here/tiny.pt2"
rm -rf "$tmp"
