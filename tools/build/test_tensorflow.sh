#!/usr/bin/env bash
# Builds tf_hvd against another TensorFlow and runs the core tests with it: collectives at
# np=2 and 3 on Gloo and MPI (tests/parallel/test_collectives.py) and the three ways of
# training (tests/parallel/test_training.py). It reports; it is no CI gate (the release
# matrix, tools/release/build_wheels.sh, builds every supported minor).
#
#   tools/build/test_tensorflow.sh tensorflow==2.22.0rc0
#   tools/build/test_tensorflow.sh tf-nightly                 # the newest nightly, what changed there
#   tools/build/test_tensorflow.sh tensorflow==2.20.0 -k gloo # extra pytest arguments
#
# A venv per requirement (Python 3.11) under ${TF_HVD_WHEEL_CACHE}/test-venvs, a Bazel output
# base of its own; the library goes to that cache and the tests load it via TF_HVD_LIBRARY,
# so the development build and tf_hvd/_hvd.so are not touched. Exit code: pytest's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${ROOT}/tools/release/wheel_matrix.sh"
CACHE="${TF_HVD_WHEEL_CACHE:-${HOME:-/root}/.cache/tf_hvd/wheel-build}"
SPEC="${1:?usage: tools/build/test_tensorflow.sh REQUIREMENT [pytest args]}"
shift
tag="$(echo "${SPEC}" | tr -c 'A-Za-z0-9.\n' '_')"
venv="${CACHE}/test-venvs/${tag}"
log() { echo "[test_tensorflow] $*" >&2; }

if [[ ! -x "${venv}/bin/python" ]]; then
  "$(find_python 3.11)" -m venv "${venv}"
fi
log "pip install ${SPEC} and the test tools into ${venv}"
pip_args=(-q)
[[ "${SPEC}" == tf-nightly* ]] && pip_args+=(--pre --upgrade)
"${venv}/bin/python" -m pip install "${pip_args[@]}" "${SPEC}" "${WHEEL_BUILD_PINS[@]}" \
  pytest==9.2.0 pytest-timeout==2.4.0 psutil==7.2.2 pyyaml==6.0.3 cloudpickle==3.1.2 \
  scikit-learn >&2
version="$("${venv}/bin/python" -c 'import tensorflow as tf; print(tf.__version__, tf.version.GIT_VERSION)' 2>/dev/null | tail -1)"
log "TensorFlow ${version}"

lib="${CACHE}/test-libs/${tag}/_hvd.so"
start=$SECONDS
TF_HVD_BAZEL_OUTPUT_BASE="${CACHE}/bazel/output_base" PYTHON_BIN_PATH="${venv}/bin/python" \
  TF_HVD_LIB_DEST="${lib}" "${ROOT}/tools/build/build_lib.sh" --disk_cache="${CACHE}/bazel/disk"
log "built ${lib} against TensorFlow ${version} in $(( SECONDS - start )) s"

cd "${ROOT}"
set +e
TF_HVD_LIBRARY="${lib}" PATH="${venv}/bin:${PATH}" TF_CPP_MIN_LOG_LEVEL=2 \
  "${venv}/bin/python" -m pytest -q -rfE --timeout=300 -p no:cacheprovider \
  tests/parallel/test_collectives.py tests/parallel/test_training.py "$@"
rc=$?
set -e
log "TensorFlow ${version}: pytest exit code ${rc}"
exit "${rc}"
