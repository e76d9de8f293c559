#!/usr/bin/env bash
# A user's machine as a root filesystem: a Debian release made with debootstrap (minbase) from
# Debian's mirror, holding what such a machine has and no more (python3 and its venv module,
# CA certificates, procps; no compiler, no -dev package, no Bazel), plus a non-root user,
# tfhvd-try (uid 1000, home /home/tfhvd-try). Made once and cached: built into <root>.tmp,
# then renamed, so an interrupted run leaves no half root and a second run reuses it. Prints
# the root's path. tools/trials/try_wheel_in_root.sh runs wheels in it.
#
#   tools/trials/user_root.sh bullseye    # ~/.cache/tf_hvd/roots/bullseye-amd64 (glibc 2.31, python3.9)
#   tools/trials/user_root.sh trixie      # ~/.cache/tf_hvd/roots/trixie-amd64 (glibc 2.41, python3.13)
#   tools/trials/user_root.sh bookworm arm64   # another architecture's root (glibc 2.36, python3.11),
#                                       # its programs run by qemu-user (qemu-user-static and
#                                       # binfmt-support: the qemu-aarch64 handler enabled, flag F)
#
# Needs root, debootstrap and the network the first time (~150 MB from deb.debian.org).
set -euo pipefail
suite="${1:?usage: user_root.sh bullseye|trixie|<debian suite> [<debian arch>]}"
arch="${2:-$(dpkg --print-architecture)}"
CACHE="${TF_HVD_ROOTS:-${HOME:-/root}/.cache/tf_hvd/roots}"
MIRROR="${TF_HVD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
root="${CACHE}/${suite}-${arch}"
user=tfhvd-try
packages=python3,python3-venv,ca-certificates,procps
stamp="${root}/.tf_hvd-root"
log() { echo "[user_root] $*" >&2; }

if [[ -f "${stamp}" && "$(cat "${stamp}")" == "${packages} ${user}" ]]; then
  echo "${root}"; exit 0
fi
[[ "$(id -u)" == 0 ]] || { log "needs root (debootstrap, chroot)"; exit 2; }
command -v debootstrap >/dev/null || { log "needs debootstrap (apt-get install debootstrap)"; exit 2; }
if [[ "${arch}" != "$(dpkg --print-architecture)" ]]; then
  # debootstrap's second stage runs the root's own programs (chroot): the kernel hands them to
  # qemu-user through binfmt_misc, with the F flag so that the handler needs no file in the root.
  qemu="$(case "${arch}" in arm64) echo aarch64 ;; *) echo "${arch}" ;; esac)"
  grep -qs '^flags: .*F' "/proc/sys/fs/binfmt_misc/qemu-${qemu}" || {
    log "${arch} programs need qemu-user: apt-get install qemu-user-static binfmt-support," \
        "then update-binfmts --enable qemu-${qemu} (flags must include F)"; exit 2; }
fi
log "debootstrap --variant=minbase ${suite} ${arch} into ${root} (${packages})"
t=${SECONDS}
mkdir -p "${CACHE}"
rm -rf "${root}.tmp"
# debootstrap mounts /proc and /sys inside the target: in a mount namespace of its own, so
# nothing stays mounted if it fails. The user is made in the same namespace.
timeout 1200 unshare --mount --propagation private bash -euo pipefail -c '
  debootstrap --variant=minbase --arch="$3" --include="$4" "$1" "$2" "$5" >&2
  chroot "$2" useradd --create-home --uid 1000 --user-group --shell /bin/bash "$6"
' _ "${suite}" "${root}.tmp" "${arch}" "${packages}" "${MIRROR}" "${user}"
# Loopback names only: the jobs run with the hostname tfhvd-<suite> in a network namespace
# that has nothing but lo.
printf '127.0.0.1\tlocalhost\n127.0.1.1\ttfhvd-%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' \
  "${suite}" > "${root}.tmp/etc/hosts"
echo "tfhvd-${suite}" > "${root}.tmp/etc/hostname"
rm -rf "${root}.tmp"/var/cache/apt/archives/*.deb "${root}.tmp"/var/lib/apt/lists/*
# What a user's machine does not have: refuse the root if the package set pulled one in.
dev="$(chroot "${root}.tmp" dpkg-query -W -f '${Package}\n' | grep -E -- '-dev$|^(gcc|g\+\+|cpp|clang|binutils|bazel.*)(-[0-9.]+)?$' || true)"
[[ -z "${dev}" ]] || { log "the root holds build tools or dev packages: ${dev//$'\n'/ }"; exit 1; }
echo "${packages} ${user}" > "${root}.tmp/.tf_hvd-root"
rm -rf "${root}"
mv "${root}.tmp" "${root}"
log "${root}: $(du -sm "${root}" | cut -f1) MB in $((SECONDS - t)) s"
echo "${root}"
