# The release matrix, sourced by tools/release/build_wheels.sh and tools/trials/try_wheel.sh.
# Pythons: CPython 3.10-3.13 for every TensorFlow minor, and 3.9 for TF 2.20 (the last minor
# that ships cp39: RHEL 9's and Debian 11's system python3 is 3.9). Each minor is built
# against one release (2.22: its release candidate until 2.22.0 is out); a wheel serves every
# patch release of its minor.
WHEEL_PYTHONS="3.9,3.10,3.11,3.12,3.13"
WHEEL_TFS="2.20,2.21,2.22"
# What a build venv holds besides TensorFlow (tools/requirements.txt's pins). setuptools 65 or
# newer reads DIST_EXTRA_CONFIG, which keeps build/ and egg-info/ out of the source tree
# (tools/release/build_wheel.sh); Python 3.9's venvs start with 58.
WHEEL_BUILD_PINS=(pybind11==3.1.0 mpich==5.0.2 "setuptools>=65" wheel)

tf_pin() {  # tf_pin 2.21 -> 2.21.0
  case "$1" in
    2.20) echo 2.20.0 ;;
    2.21) echo 2.21.0 ;;
    2.22) echo 2.22.0rc0 ;;
    *) echo "unsupported TensorFlow minor $1 (supported: ${WHEEL_TFS})" >&2; return 2 ;;
  esac
}

in_matrix() {  # in_matrix 3.9 2.21: true when TensorFlow ships that minor for that Python
  [[ "$1" != 3.9 || "$2" == 2.20 ]]
}

find_python() {  # find_python 3.X: an interpreter of that version (pyenv's, else on PATH)
  local v="$1" p
  for p in "${HOME:-/root}"/.pyenv/versions/"${v}".*/bin/python"${v}" "$(command -v "python${v}" || true)"; do
    if [[ -x "${p}" ]] && "${p}" -c 'import sys; sys.exit(0)' >/dev/null 2>&1; then
      echo "${p}"; return 0
    fi
  done
  echo "no python${v} found (pyenv install ${v}, or put python${v} on PATH)" >&2; return 1
}
