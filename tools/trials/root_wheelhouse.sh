#!/usr/bin/env bash
# The wheelhouse a Debian root installs from (tools/trials/try_wheel_in_root.sh,
# tools/trials/try_wheel_emulated.sh): the given packages downloaded on this machine, once, as wheels
# for the root's CPython, glibc and architecture, into HOUSE (made aside, then renamed; a
# second call finds it complete and returns at once).
#
#   tools/trials/root_wheelhouse.sh HOUSE 3.9 2.31 x86_64 "tensorflow==2.20.0" scikit-learn ...
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${ROOT}/tools/release/wheel_matrix.sh"
(( $# >= 5 )) || { sed -n '2,7p' "${BASH_SOURCE[0]}" >&2; exit 2; }
house="$1" py="$2" glibc="$3" arch="$4"
shift 4
[[ -f "${house}/.complete" ]] && exit 0
t=${SECONDS}
platforms=()
for (( m = ${glibc#2.}; m >= 5; m-- )); do platforms+=(--platform "manylinux_2_${m}_${arch}"); done
platforms+=(--platform "manylinux2014_${arch}" --platform "manylinux2010_${arch}" --platform "manylinux1_${arch}")
# An interpreter of the same version: pip evaluates the requirements' markers
# (python_version < "3.10") with the interpreter running it, whatever --python-version says.
downloader="$(find_python "${py}")"
rm -rf "${house}.tmp"
mkdir -p "${house}.tmp"
echo "[wheelhouse] downloading $* for cp${py/./} ${arch} glibc ${glibc} into ${house}" >&2
timeout 900 "${downloader}" -m pip download -q --disable-pip-version-check --only-binary=:all: \
  --python-version "${py}" --implementation cp --abi "cp${py/./}" "${platforms[@]}" \
  -d "${house}.tmp" "$@" >&2
touch "${house}.tmp/.complete"
rm -rf "${house}"
mv "${house}.tmp" "${house}"
echo "[wheelhouse] $(du -sm "${house}" | cut -f1) MB downloaded in $((SECONDS - t)) s" >&2
