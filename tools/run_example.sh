#!/usr/bin/env bash
# Set up (idempotent), then train the example on 2 local processes:
#   tools/run_example.sh [extra args for the example]
#   NP=3 EXAMPLE=python/examples/other.py tools/run_example.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}"
"${ROOT}/tools/setup.sh"
export PATH="${VENV}/bin:${PATH}"
cd "${ROOT}"
EXAMPLE="${EXAMPLE:-python/examples/tf2_digits.py}"
set -x
exec tfhvdrun -np "${NP:-2}" python "${EXAMPLE}" "$@"
