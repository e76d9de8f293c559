#!/usr/bin/env bash
# Set up (idempotent), then run the tests, -q with a per-test timeout and the summary line:
#   1. tests/unit (one process each) on TEST_WORKERS pytest-xdist workers (default 2): they
#      wait on subprocesses and servers more than they compute, so two at a time halve their
#      time on two cores; the modules that run Bazel share one worker (xdist_group "bazel"),
#      since Bazel serialises its commands on one workspace;
#   2. tests/parallel (multi-process jobs under the launcher) one at a time: their jobs use
#      every core and some judge time limits and CPU load.
# The exit code is the first failing run's (pytest's codes), 0 when both pass, 5 when
# neither collected a test.
#   tools/run_tests.sh [extra pytest args for both runs, e.g. -k allreduce]
#   TEST_TIMEOUT=600 TEST_WORKERS=1 tools/run_tests.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}"
"${ROOT}/tools/setup.sh"
export PATH="${VENV}/bin:${PATH}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
cd "${ROOT}"
pytest_run() {
  "${VENV}/bin/python" -m pytest -q -rfE --timeout="${TEST_TIMEOUT:-300}" "$@"
}
set +e
pytest_run tests/unit -n "${TEST_WORKERS:-2}" --dist loadgroup "$@"
unit=$?
pytest_run tests/parallel "$@"
parallel=$?
set -e
echo "[run_tests] pytest exit codes: unit ${unit}, parallel ${parallel}" >&2
# 5 is "nothing collected": a filter (-k) may select tests of one run only.
(( unit == 5 && parallel == 5 )) && exit 5
(( unit == 5 )) && unit=0
(( parallel == 5 )) && parallel=0
(( unit != 0 )) && exit "${unit}"
exit "${parallel}"
