#!/usr/bin/env bash
# TensorFlow for a cross-build (tools/release/build_wheel.sh --arch aarch64): the headers and the two
# libraries the op library links (libtensorflow_framework.so.2, libtensorflow_cc.so.2) taken
# from TensorFlow's own wheel for that architecture and Python, which no Python on the build
# machine can import. Downloaded once (pip download: TensorFlow's aarch64 wheels are
# manylinux_2_17 for 2.20, manylinux_2_27 for 2.21 and 2.22) and unpacked, both cached under
# ~/.cache/tf_hvd/floor/tf-<arch>/. Prints the unpacked tensorflow/ folder: TF_HVD_TF_DIR for
# tools/build/local_deps.bzl, holding include/, the libraries and tf_hvd_version.txt
# ("<version>|<git version>", what tf.__version__ and tf.version.GIT_VERSION say there).
#
#   tools/release/floor/tensorflow.sh aarch64 3.11 2.21.0
set -euo pipefail
arch="${1:?usage: tensorflow.sh aarch64 PYTHON_VERSION TF_VERSION}"
py="${2:?usage: tensorflow.sh aarch64 PYTHON_VERSION TF_VERSION}"
tf="${3:?usage: tensorflow.sh aarch64 PYTHON_VERSION TF_VERSION}"
CACHE="${TF_HVD_FLOOR_CACHE:-${HOME:-/root}/.cache/tf_hvd/floor}/tf-${arch}"
DOWNLOADER="${TF_HVD_PIP_PYTHON:-python3}"
cp="cp${py/./}"
dest="${CACHE}/tensorflow-${tf}-${cp}"
if [[ -f "${dest}/tensorflow/tf_hvd_version.txt" ]]; then echo "${dest}/tensorflow"; exit 0; fi

mkdir -p "${CACHE}"
shopt -s nullglob
wheels=("${CACHE}/tensorflow-${tf}-${cp}-${cp}-"*"_${arch}"*.whl)
if (( ! ${#wheels[@]} )); then
  # pip's --platform is matched exactly: offer every manylinux tag up to the sysroot's glibc.
  platforms=()
  for (( m = 31; m >= 17; m-- )); do platforms+=(--platform "manylinux_2_${m}_${arch}"); done
  platforms+=(--platform "manylinux2014_${arch}")
  echo "[floor] downloading tensorflow==${tf} for ${cp} ${arch}" >&2
  "${DOWNLOADER}" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version "${py}" --implementation cp --abi "${cp}" "${platforms[@]}" \
    -d "${CACHE}" "tensorflow==${tf}" >&2
  wheels=("${CACHE}/tensorflow-${tf}-${cp}-${cp}-"*"_${arch}"*.whl)
fi
(( ${#wheels[@]} == 1 )) || { echo "tensorflow.sh: no single TensorFlow ${tf} wheel for ${cp} ${arch} in ${CACHE}" >&2; exit 1; }
wheel="${wheels[0]}"
echo "[floor] unpacking $(basename "${wheel}")" >&2
rm -rf "${dest}.tmp"
mkdir -p "${dest}.tmp"
# The headers, the libraries, and the module that carries TensorFlow's git version.
unzip -q "${wheel}" 'tensorflow/include/*' tensorflow/libtensorflow_framework.so.2 \
  tensorflow/libtensorflow_cc.so.2 tensorflow/python/client/_pywrap_tf_session.so \
  -d "${dest}.tmp"
git_version="$(strings "${dest}.tmp/tensorflow/python/client/_pywrap_tf_session.so" \
  | grep -m1 -E "^v${tf//./\\.}(-[0-9A-Za-z.]+)*$" || true)"
[[ -n "${git_version}" ]] || { echo "tensorflow.sh: no git version in $(basename "${wheel}")" >&2; exit 1; }
rm -f "${dest}.tmp/tensorflow/python/client/_pywrap_tf_session.so"
echo "${tf}|${git_version}" > "${dest}.tmp/tensorflow/tf_hvd_version.txt"
rm -rf "${dest}"
mv "${dest}.tmp" "${dest}"
echo "${dest}/tensorflow"
