#!/usr/bin/env bash
# Runs HOME/run.sh inside a Debian root (tools/trials/user_root.sh) as its user tfhvd-try (uid 1000),
# the way tools/trials/try_wheel_in_root.sh and tools/trials/try_wheel_emulated.sh try a wheel: in mount, net,
# UTS and PID namespaces that end with the run (network: loopback only; hostname tfhvd-SUITE),
# with a fresh /proc, /dev bound, a /dev/shm and /tmp of its own, /sys read-only, the
# wheelhouse HOUSE read-only at /tmp/wheelhouse and HOME at /home/tfhvd-try. Everything
# mounted is unmounted on the way out, and a mount left under ROOT fails the run.
#
#   tools/trials/run_in_root.sh ROOT HOME HOUSE SUITE SECONDS     # exit status: run.sh's
set -euo pipefail
(( $# == 5 )) || { sed -n '2,8p' "${BASH_SOURCE[0]}" >&2; exit 2; }
root="$1" home="$2" house="$3" suite="$4" seconds="$5"
set +e
timeout -k 20 "${seconds}" unshare --mount --propagation private --net --uts --pid --fork \
  bash -euo pipefail -c '
  root="$1" home="$2" house="$3" suite="$4"
  mounted=()
  cleanup() { for (( i = ${#mounted[@]} - 1; i >= 0; i-- )); do umount -l "${mounted[i]}" || true; done; }
  trap cleanup EXIT
  m() { mount "$@"; mounted+=("${@: -1}"); }
  ip link set lo up
  hostname "tfhvd-${suite}"
  m -t proc proc "${root}/proc"
  m --bind /dev "${root}/dev"
  m -t tmpfs -o mode=1777,nosuid,nodev tmpfs "${root}/dev/shm"
  m -t sysfs -o ro sysfs "${root}/sys"
  m -t tmpfs -o mode=1777 tmpfs "${root}/tmp"
  mkdir "${root}/tmp/wheelhouse"
  m --bind -o ro "${house}" "${root}/tmp/wheelhouse"
  m --bind "${home}" "${root}/home/tfhvd-try"
  env -i HOME=/home/tfhvd-try USER=tfhvd-try LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin \
    "$(command -v chroot)" --userspec=1000:1000 "${root}" /bin/bash /home/tfhvd-try/run.sh
' _ "${root}" "${home}" "${house}" "${suite}"
status=$?
set -e
if grep -q " ${root}/" /proc/self/mounts; then
  echo "[run_in_root] mounts left under ${root}" >&2; exit 1
fi
exit "${status}"
