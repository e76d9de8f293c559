#!/usr/bin/env bash
# Gloo for the release wheels: built from source with the floor toolchain
# (tools/release/floor/toolchain.sh) as a static, position-independent library with the TCP transport
# only, so that _hvd.so carries it (symbols hidden) instead of bundling a distribution's
# libgloo.so.0 built for a newer glibc (and hiredis, ibverbs, libnl with it). Cached; prints
# the install prefix (include/gloo, lib/libgloo.a): GLOO_INCLUDE_DIR / GLOO_LIB_DIR for Bazel.
#
#   tools/release/floor/gloo.sh x86_64 | aarch64
#
# The source: Debian's mirror serves Gloo only as binaries, so it comes from the one package
# index reachable everywhere this builds, PyPI: the horovod 0.28.1 source distribution carries
# upstream Gloo unmodified (third_party/gloo, facebookincubator/gloo). Only that folder is
# used, checked by the archive's SHA-256; nothing of Horovod is compiled.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
arch="${1:?usage: gloo.sh x86_64|aarch64}"
CACHE="${TF_HVD_FLOOR_CACHE:-${HOME:-/root}/.cache/tf_hvd/floor}"
SDIST=horovod-0.28.1.tar.gz
SDIST_SHA256=92a43f5a94c43907a56805bad15f19700c62ffc83b7ca483f9e104e229f67ef0
prefix="${CACHE}/gloo-${arch}"
tools="$("${HERE}/toolchain.sh" "${arch}")"
stamp="${prefix}/.tf_hvd-gloo"
want="${SDIST_SHA256} ${tools} $(sha1sum "${BASH_SOURCE[0]}" "${HERE}/glibc_floor.h" | cut -c1-40 | tr '\n' ' ')"
if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${want}" ]]; then echo "${prefix}"; exit 0; fi

src="${CACHE}/src"
mkdir -p "${src}"
if [[ ! -f "${src}/${SDIST}" ]] || ! echo "${SDIST_SHA256}  ${src}/${SDIST}" | sha256sum -c --quiet 2>/dev/null; then
  echo "[floor] downloading Gloo's source (${SDIST} from PyPI)" >&2
  python3 -m pip download -q --no-deps --no-binary :all: --no-build-isolation -d "${src}" \
    "horovod==0.28.1" >&2 || true
  echo "${SDIST_SHA256}  ${src}/${SDIST}" | sha256sum -c --quiet \
    || { echo "gloo.sh: ${SDIST} missing or not the expected archive" >&2; exit 1; }
fi
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT
tar -xzf "${src}/${SDIST}" -C "${work}" horovod-0.28.1/third_party/gloo
echo "[floor] building Gloo for ${arch} (static, TCP transport)" >&2
cmake_args=(
  -S "${work}/horovod-0.28.1/third_party/gloo" -B "${work}/build"
  -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_C_COMPILER="${tools}/cc" -DCMAKE_CXX_COMPILER="${tools}/c++"
  -DCMAKE_CXX_STANDARD=17 -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DCMAKE_CXX_FLAGS="-D_GLIBCXX_USE_CXX11_ABI=1 -fvisibility=hidden -fvisibility-inlines-hidden -O2"
  -DBUILD_SHARED_LIBS=OFF -DUSE_REDIS=OFF -DUSE_IBVERBS=OFF -DUSE_NCCL=OFF -DUSE_RCCL=OFF
  -DUSE_LIBUV=OFF -DUSE_MPI=OFF -DUSE_CUDA=OFF -DUSE_TCP_OPENSSL_LINK=OFF
  -DUSE_TCP_OPENSSL_LOAD=OFF -DBUILD_TEST=OFF -DBUILD_BENCHMARK=OFF
  -DCMAKE_INSTALL_PREFIX="${prefix}.tmp"
)
if [[ "${arch}" != "$(uname -m)" ]]; then
  cmake_args+=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR="${arch}")
fi
cmake "${cmake_args[@]}" >&2
cmake --build "${work}/build" -j "$(nproc)" >&2
rm -rf "${prefix}.tmp"
cmake --install "${work}/build" >&2
mkdir -p "${prefix}.tmp/lib"
# Some Gloo versions install to lib64/ or lib/<triplet>/: one place for Bazel.
find "${prefix}.tmp" -name libgloo.a ! -path "${prefix}.tmp/lib/libgloo.a" -exec mv {} "${prefix}.tmp/lib/" \;
echo "${want}" > "${prefix}.tmp/.tf_hvd-gloo"
rm -rf "${prefix}"
mv "${prefix}.tmp" "${prefix}"
echo "${prefix}"
