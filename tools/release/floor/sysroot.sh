#!/usr/bin/env bash
# The build sysroot of the release wheels: Debian 11 (bullseye: glibc 2.31, GCC 10's
# libstdc++), the oldest Debian that Debian's mirror serves, made with debootstrap once per
# architecture and cached. Prints its path.
#
#   tools/release/floor/sysroot.sh x86_64        # ~/.cache/tf_hvd/floor/sysroot-bullseye-amd64
#   tools/release/floor/sysroot.sh aarch64       # the same for arm64 (no emulation needed: only files)
#
# Only headers, static archives and the libraries to link against are used from it; the
# compiler is the build machine's clang (tools/release/floor/toolchain.sh). Needs root and debootstrap.
set -euo pipefail
arch="${1:?usage: sysroot.sh x86_64|aarch64}"
case "${arch}" in
  x86_64) deb_arch=amd64 ;;
  aarch64) deb_arch=arm64 ;;
  *) echo "sysroot.sh: unknown architecture ${arch}" >&2; exit 2 ;;
esac
CACHE="${TF_HVD_FLOOR_CACHE:-${HOME:-/root}/.cache/tf_hvd/floor}"
root="${CACHE}/sysroot-bullseye-${deb_arch}"
# What compiles against it: the C and C++ runtimes' headers and libraries, and Boost's
# header-only Beast/Asio (the rendezvous client).
packages=libc6-dev,libstdc++-10-dev,libgcc-10-dev,linux-libc-dev,libboost1.74-dev
stamp="${root}/.tf_hvd-sysroot"
if [[ ! -f "${stamp}" || "$(cat "${stamp}")" != "${packages}" ]]; then
  command -v debootstrap >/dev/null || { echo "sysroot.sh: apt-get install debootstrap" >&2; exit 1; }
  echo "[floor] debootstrap bullseye ${deb_arch} into ${root}" >&2
  rm -rf "${root}.tmp"
  mkdir -p "${CACHE}"
  # --foreign: unpack only (a foreign architecture's maintainer scripts would need emulation);
  # the sysroot is read as files, never run.
  debootstrap --variant=minbase --arch="${deb_arch}" --foreign --include="${packages}" \
    bullseye "${root}.tmp" http://deb.debian.org/debian >&2
  # The first stage unpacks the essential packages; unpack the rest of what it fetched.
  for deb in "${root}.tmp"/var/cache/apt/archives/*.deb; do dpkg-deb -x "${deb}" "${root}.tmp"; done
  rm -f "${root}.tmp"/var/cache/apt/archives/*.deb
  # Absolute links (/lib64/ld-linux-x86-64.so.2 -> /lib/...) would point into the build
  # machine; make them relative so that they stay inside the sysroot.
  find "${root}.tmp" -type l -lname '/*' -print0 | while IFS= read -r -d '' link; do
    target="${root}.tmp$(readlink "${link}")"
    ln -sfn "$(realpath -m --relative-to="$(dirname "${link}")" "${target}")" "${link}"
  done
  echo "${packages}" > "${root}.tmp/.tf_hvd-sysroot"
  rm -rf "${root}"
  mv "${root}.tmp" "${root}"
fi
echo "${root}"
