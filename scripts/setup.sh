#!/usr/bin/env bash
# Installs everything Loom needs on a fresh Debian 12 machine: the apt
# packages (LLVM/MLIR 22, build tools, libraries) and the Python virtualenv
# with the pinned PyTorch. Idempotent: a second run checks and returns.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # A minimal Debian 12 (the debian:12 image) has none of these: Python
  # with venv (its ensurepip brings pip into .venv; lit runs on python3),
  # git to clone and update the repository, certificates for PyPI over
  # HTTPS, and make, which runs this script.
  python3 python3-venv git ca-certificates make
  # LLVM/MLIR 22 (mlir-tblgen, lit, FileCheck live in the -tools packages)
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # clang and its runtime, for the libFuzzer target of the importer
  clang-22 libclang-rt-22-dev
  # build
  cmake ninja-build ccache g++ pkg-config
  # libraries: zip reader for .pt2, JSON for the runtime's artifact reader,
  # GoogleTest for unit tests
  libzip-dev zlib1g-dev nlohmann-json3-dev libgtest-dev
  # Gloo's headers, which LibTorch's ProcessGroupGloo.hpp includes (the
  # wheel ships Gloo compiled, without headers)
  libgloo-dev
  # CBC (with CLP and its Osi interface), the MILP solver behind the
  # activation-checkpointing solvers (lib/Analysis/Milp.cpp)
  coinor-libcbc-dev
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing apt packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Python: a virtualenv with the pinned requirements. The stamp records the
# hash of requirements.txt so a change to it reinstalls.
PYTHON=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: creating .venv with $(grep -v '^#' requirements.txt | tr '\n' ' ')"
  # A .venv made before python3-venv was installed has a python but no pip:
  # make it again rather than fail in pip below.
  if [ ! -x .venv/bin/python ] || ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
    "$PYTHON" -m venv --clear .venv
  fi
  # The CUDA wheels torch pulls in are hundreds of MB; a dropped connection
  # near the end of one must not fail the whole set-up. Each install is
  # tried 3 times, and a pip that can (25.1 and later) resumes a cut
  # download (--resume-retries) instead of starting it again. No cache:
  # .venv is made once per clone, and a second copy of those wheels under
  # ~/.cache/pip would take some 3.5 GB more of the disk for nothing.
  pip_install() {
    local resume=() help
    help=$(.venv/bin/python -m pip install --help 2>/dev/null || true)
    if [[ $help == *--resume-retries* ]]; then
      resume=(--resume-retries 50)
    fi
    for attempt in 1 2 3; do
      if .venv/bin/python -m pip install -q --no-cache-dir --retries 10 --timeout 60 "${resume[@]}" "$@"; then
        return 0
      fi
      echo "setup: pip install $* failed (attempt $attempt of 3)" >&2
      sleep $((attempt * 10))
    done
    return 1
  }
  if ! pip_install --upgrade pip || ! pip_install -r requirements.txt; then
    echo "setup: error: could not install the pinned Python packages (see above)" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
fi
.venv/bin/python -c "import torch; print('setup: torch', torch.__version__, 'ready')"
