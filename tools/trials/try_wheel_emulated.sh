#!/usr/bin/env bash
# Runs a release wheel built for another architecture (tools/release/build_wheel.sh --arch aarch64) on
# this machine, under emulation: in a Debian root filesystem of that architecture
# (tools/trials/user_root.sh SUITE arm64: debootstrap minbase, cached; no compiler, -dev package or
# Bazel) whose every program qemu-user runs (qemu-user-static, binfmt_misc), as its non-root
# user, with the root's own python3 and glibc:
#   python3 -m venv venv; pip install tensorflow==<pin> (from a wheelhouse); pip install <wheel>
#   import tf_hvd; tfhvdrun --gloo -np 2 python allreduce_check.py
# allreduce_check.py: hvd.init(), then Sum, Average, Min and Max allreduces of float32, float64
# and int32 tensors on Gloo, each compared exactly with what it must give. Prints [emulated]
# lines with the time of each step; exits non-zero on any failure.
#
#   tools/trials/try_wheel_emulated.sh dist/tf_hvd-0.1.0+tf2.21-cp311-cp311-manylinux_2_28_aarch64.whl
#   tools/trials/try_wheel_emulated.sh --root bookworm WHEEL
#
# The root's python3 must be the wheel's Python: bookworm's is 3.11 (the cp311 wheel), and
# bullseye's 3.9, for which TensorFlow 2.21 ships no wheel. The packages come from a wheelhouse
# downloaded on this machine for the root's Python, glibc and architecture
# (~/.cache/tf_hvd/wheelhouse/<tags>, made once) and bind-mounted read-only; the job runs in
# namespaces of its own (mount, network: loopback only, PID, UTS), as
# tools/trials/try_wheel_in_root.sh's do. Needs root, and the network only for a new root or wheelhouse.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${ROOT}/tools/release/wheel_matrix.sh"
log() { echo "[emulated] $*" >&2; }
usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" >&2; exit 2; }
WHEEL="" SUITE=bookworm
while (( $# )); do
  case "$1" in
    --root) SUITE="$2"; shift 2 ;;
    -*) usage ;;
    *) WHEEL="$(realpath "$1")"; shift ;;
  esac
done
[[ -f "${WHEEL}" ]] || usage
[[ "$(id -u)" == 0 ]] || { log "needs root (debootstrap, namespaces, chroot)"; exit 2; }
name="$(basename "${WHEEL}")"
[[ "${name}" =~ \+tf([0-9]+\.[0-9]+)-cp([0-9])([0-9]+)-[^-]+-[a-z0-9_]+_(aarch64|x86_64)\.whl$ ]] \
  || { log "not a release wheel: ${name}"; exit 2; }
tf="${BASH_REMATCH[1]}" py="${BASH_REMATCH[2]}.${BASH_REMATCH[3]}" arch="${BASH_REMATCH[4]}"
case "${arch}" in aarch64) deb_arch=arm64 ;; x86_64) deb_arch=amd64 ;; esac
pin="$(tf_pin "${tf}")"
T0=${SECONDS}

# 1. The root (its programs emulated), its python3 and glibc.
t=${SECONDS}
root="$("${ROOT}/tools/trials/user_root.sh" "${SUITE}" "${deb_arch}")"
log "root ${root}: ready in $((SECONDS - t)) s"
t=${SECONDS}
read -r root_machine root_py root_glibc < <(chroot "${root}" /usr/bin/python3 -c \
  'import os, platform, sys; print(platform.machine(), "%d.%d" % sys.version_info[:2], os.confstr("CS_GNU_LIBC_VERSION").split()[1])')
distro="$(. "${root}/etc/os-release" && echo "${NAME%% *} ${VERSION_ID} ${VERSION_CODENAME}")"
log "${root_machine} (this machine: $(uname -m)), glibc ${root_glibc} (${distro}), python3 ${root_py}; python3 -c started in $((SECONDS - t)) s"
[[ "${root_machine}" == "${arch}" ]] || { log "${SUITE}'s python3 reports ${root_machine}, the wheel is ${arch}"; exit 2; }
if [[ "${py}" != "${root_py}" ]]; then
  log "${name} is for Python ${py}, but ${SUITE}'s python3 is ${root_py}"; exit 2
fi

# 2. The wheelhouse: TensorFlow and what it needs, for the root's Python, glibc and architecture.
house="${TF_HVD_ROOT_WHEELHOUSE:-${HOME:-/root}/.cache/tf_hvd/wheelhouse}/cp${py/./}-manylinux_${root_glibc/./_}_${arch}-tensorflow${pin}-emulated"
"${ROOT}/tools/trials/root_wheelhouse.sh" "${house}" "${py}" "${root_glibc}" "${arch}" \
  "tensorflow==${pin}" cloudpickle pip

# 3. The user's home for this run (the root stays as cached): the wheel and the job.
work="$(mktemp -d /var/tmp/tf_hvd-emulated.XXXXXX)"
trap 'rm -rf "${work}"' EXIT
home="${work}/home"
mkdir -p "${home}"
cp "${WHEEL}" "${home}/"
cat > "${home}/allreduce_check.py" <<'EOF'
import platform
import time

t0 = time.time()
import numpy as np
import tensorflow as tf
import tf_hvd as hvd
t1 = time.time()
hvd.init()
t2 = time.time()
rank, size = hvd.rank(), hvd.size()
assert size == 2 and hvd.gloo_enabled(), (size, hvd.gloo_enabled())
n = 1000
base = np.arange(n)
checks = [
    # (dtype, op, this rank's values, what every rank must receive)
    (np.float32, hvd.Sum, base * (rank + 1) + 0.25, base * 3 + 0.5),
    (np.float64, hvd.Average, base + rank, base + 0.5),
    (np.int32, hvd.Sum, base * (rank + 1) - 7, base * 3 - 14),
    (np.int32, hvd.Min, base - 100 * rank, base - 100),
    (np.float32, hvd.Max, -base + 3.5 * rank, -base + 3.5),
]
t3 = time.time()
for dtype, op, mine, want in checks:
    got = hvd.allreduce(tf.constant(mine.astype(dtype)), op=op).numpy()
    assert got.dtype == dtype and np.array_equal(got, want.astype(dtype)), (dtype, op, got[:4], want[:4])
# One larger float32 tensor (4 MiB), values exact in float32.
big = np.arange(1 << 20, dtype=np.float32) % 4096
got = hvd.allreduce(tf.constant(big * (rank + 1)), op=hvd.Sum).numpy()
assert np.array_equal(got, big * 3)
t4 = time.time()
print("[emulated] rank %d of %d on %s: %d allreduces exact (Gloo); import %.1f s, init %.1f s, "
      "allreduces %.1f s (TensorFlow %s)"
      % (rank, size, platform.machine(), len(checks) + 1, t1 - t0, t2 - t1, t4 - t3, tf.__version__))
hvd.shutdown()
EOF
cat > "${home}/run.sh" <<EOF
set -euo pipefail
cd /home/tfhvd-try
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2
bare() {
  for tool in gcc cc c++ g++ clang ld bazel; do ! command -v "\${tool}" >/dev/null || return 1; done
  [[ ! -e /usr/include/stdio.h ]] && ! dpkg-query -W -f '\${Package}\n' | grep -q -- '-dev\$'
}
bare || { echo "[emulated] the root has a compiler, Bazel or a dev package"; exit 1; }
echo "[emulated] as \$(id -un) in ${SUITE} (\$(uname -m), \$(hostname), network: \$(ls /sys/class/net | tr '\n' ' ')), with no compiler, Bazel or dev package"
install() { venv/bin/pip install -q --no-index --find-links /tmp/wheelhouse "\$@"; }
t=\${SECONDS}
python3 -m venv venv
install --upgrade pip
echo "[emulated] venv and pip: \$((SECONDS - t)) s"
t=\${SECONDS}
install tensorflow==${pin}
echo "[emulated] pip install tensorflow==${pin}: \$((SECONDS - t)) s"
t=\${SECONDS}
install "${name}"
echo "[emulated] pip install ${name}: \$((SECONDS - t)) s"
export PATH="\${PWD}/venv/bin:\${PATH}"
t=\${SECONDS}
python -c 'from importlib import metadata; import tensorflow as tf, tf_hvd as hvd; print("[emulated] import: TensorFlow %s, tf_hvd %s, gloo_built %s" % (tf.__version__, metadata.version("tf_hvd"), hvd.gloo_built()))'
echo "[emulated] python -c 'import tensorflow, tf_hvd': \$((SECONDS - t)) s"
t=\${SECONDS}
timeout -k 10 1200 tfhvdrun --gloo -np 2 python allreduce_check.py
echo "[emulated] tfhvdrun --gloo -np 2 python allreduce_check.py: \$((SECONDS - t)) s"
EOF
chown -R 1000:1000 "${home}"

# 4. The run, in namespaces that end with it (tools/trials/run_in_root.sh).
t=${SECONDS}
"${ROOT}/tools/trials/run_in_root.sh" "${root}" "${home}" "${house}" "${SUITE}" 3000
log "the job in ${SUITE} ${deb_arch} (emulated): $((SECONDS - t)) s; all: $((SECONDS - T0)) s"
log "${name}: ok in ${SUITE} ${deb_arch}"
