#!/usr/bin/env bash
# Set up (idempotent), then run the unit tests (one process) and the parallel tests
# (multi-process, under the launcher) in one pytest run: -q, a per-test timeout, and the
# summary line. The exit code is pytest's.
#   tools/run_tests.sh [extra pytest args, e.g. -k allreduce]
#   TEST_TIMEOUT=600 tools/run_tests.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}"
"${ROOT}/tools/setup.sh"
export PATH="${VENV}/bin:${PATH}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
cd "${ROOT}"
dirs=()
for d in tests/unit tests/parallel; do [[ -d "$d" ]] && dirs+=("$d"); done
(( ${#dirs[@]} )) || dirs=(tests/unit tests/parallel)   # let pytest report what is missing
set +e
"${VENV}/bin/python" -m pytest -q -rfE --timeout="${TEST_TIMEOUT:-300}" "${dirs[@]}" "$@"
rc=$?
set -e
echo "[run_tests] pytest exit code ${rc}" >&2
exit "${rc}"
