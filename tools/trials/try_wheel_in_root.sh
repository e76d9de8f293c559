#!/usr/bin/env bash
# Installs one release wheel on another distribution, as a user there would, and trains with it:
# in a Debian root filesystem (tools/trials/user_root.sh: debootstrap minbase, cached; no compiler, no
# -dev package, no Bazel), as its non-root user, with the root's own python3 and glibc:
#   python3 -m venv venv; pip install --upgrade pip; pip install tensorflow==<pin> scikit-learn
#   pip install "<wheel>[tensorflow]"
#   tfhvdrun -np 2 python keras_digits.py; pip install mpich; tfhvdrun --mpi -np 2 ...
# (tools/trials/wheel_job.sh), checking each job's test accuracy. The wheel's Python must be the root's
# python3 (bullseye: 3.9, trixie: 3.13).
#
#   tools/trials/try_wheel_in_root.sh --root bullseye dist/tf_hvd-0.1.0+tf2.20-cp39-cp39-manylinux_2_28_x86_64.whl
#   tools/trials/try_wheel_in_root.sh --root trixie WHEEL [--epochs 15] [--min-accuracy 0.95] [--no-mpi] [--tf-dist tensorflow-cpu]
#
# The packages come from a wheelhouse downloaded on this machine for the root's Python and glibc
# (~/.cache/tf_hvd/wheelhouse/<tags>, made once) and bind-mounted read-only; the job runs in
# namespaces of its own (mount: /proc, /dev, /dev/shm, /sys, /tmp and the user's home mounted
# for the run only, the cached root left as it was; network: loopback only; PID: no process
# outlives it; UTS: hostname tfhvd-<suite>). Needs root; the network only for a new root or
# wheelhouse. Prints [try_wheel] lines with the times; exits non-zero on any failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${ROOT}/tools/release/wheel_matrix.sh"
log() { echo "[try_wheel] $*" >&2; }
usage() { sed -n '2,19p' "${BASH_SOURCE[0]}" >&2; exit 2; }
WHEEL="" SUITE="" EPOCHS=15 MIN_ACC=0.95 MPI=1 DIST=tensorflow
while (( $# )); do
  case "$1" in
    --root) SUITE="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --min-accuracy) MIN_ACC="$2"; shift 2 ;;
    --no-mpi) MPI=0; shift ;;
    --tf-dist) DIST="$2"; shift 2 ;;
    -*) usage ;;
    *) WHEEL="$(realpath "$1")"; shift ;;
  esac
done
[[ -f "${WHEEL}" && -n "${SUITE}" ]] || usage
[[ "$(id -u)" == 0 ]] || { log "needs root (debootstrap, namespaces, chroot)"; exit 2; }
name="$(basename "${WHEEL}")"
[[ "${name}" =~ \+tf([0-9]+\.[0-9]+)-cp([0-9])([0-9]+)-[^-]+-([a-z0-9_.]+)\.whl$ ]] \
  || { log "not a release wheel: ${name}"; exit 2; }
tf="${BASH_REMATCH[1]}" py="${BASH_REMATCH[2]}.${BASH_REMATCH[3]}" wheel_plat="${BASH_REMATCH[4]}"
pin="$(tf_pin "${tf}")"
T0=${SECONDS}

# 1. The root, and what it runs: its python3 and glibc.
t=${SECONDS}
root="$("${ROOT}/tools/trials/user_root.sh" "${SUITE}")"
log "root ${root}: ready in $((SECONDS - t)) s"
read -r root_py root_glibc < <(chroot "${root}" /usr/bin/python3 -c \
  'import os, sys; print("%d.%d" % sys.version_info[:2], os.confstr("CS_GNU_LIBC_VERSION").split()[1])')
distro="$(. "${root}/etc/os-release" && echo "${NAME%% *} ${VERSION_ID} ${VERSION_CODENAME}")"
log "glibc ${root_glibc} (${distro}), python3 ${root_py}"
if [[ "${py}" != "${root_py}" ]]; then
  log "${name} is for Python ${py}, but ${SUITE}'s python3 is ${root_py}: build the wheel for" \
      "Python ${root_py} (tools/release/build_wheels.sh --python ${root_py} --tf ${tf})"
  exit 2
fi
if [[ "${wheel_plat}" =~ manylinux_2_([0-9]+)_ ]] && (( BASH_REMATCH[1] > ${root_glibc#2.} )); then
  log "note: ${name} needs glibc >= 2.${BASH_REMATCH[1]}; pip in ${SUITE} (${root_glibc}) is expected to refuse it"
fi

# 2. The wheelhouse: the root's Python and every manylinux tag its glibc admits.
arch="$(uname -m)"
house="${TF_HVD_ROOT_WHEELHOUSE:-${HOME:-/root}/.cache/tf_hvd/wheelhouse}/cp${py/./}-manylinux_${root_glibc/./_}_${arch}-${DIST}${pin}"
"${ROOT}/tools/trials/root_wheelhouse.sh" "${house}" "${py}" "${root_glibc}" "${arch}" \
  "${DIST}==${pin}" scikit-learn cloudpickle mpich==5.0.2 pip

# 3. The user's home for this run (the root stays as cached): the wheel, the example, the job.
work="$(mktemp -d /var/tmp/tf_hvd-root.XXXXXX)"
trap 'rm -rf "${work}"' EXIT
home="${work}/home"
mkdir -p "${home}"
cp "${WHEEL}" "${ROOT}/python/examples/keras_digits.py" "${ROOT}/python/examples/digits_data.py" \
  "${ROOT}/tools/trials/wheel_job.sh" "${home}/"
job_args=(--python /usr/bin/python3 --wheelhouse /tmp/wheelhouse --wheel "/home/tfhvd-try/${name}"
          --dist "${DIST}" --pin "${pin}" --epochs "${EPOCHS}" --min-accuracy "${MIN_ACC}" --upgrade-pip)
(( MPI )) || job_args+=(--no-mpi)
cat > "${home}/run.sh" <<EOF
set -euo pipefail
cd /home/tfhvd-try
bare() {
  for tool in gcc cc c++ g++ clang ld bazel; do ! command -v "\${tool}" >/dev/null || return 1; done
  [[ ! -e /usr/include/stdio.h ]] && ! dpkg-query -W -f '\${Package}\n' | grep -q -- '-dev\$'
}
bare || { echo "[try_wheel] the root has a compiler, Bazel or a dev package"; exit 1; }
echo "[try_wheel] as \$(id -un) in ${SUITE} (\$(hostname), network: \$(ls /sys/class/net | tr '\n' ' ')), with no compiler, Bazel or dev package"
bash wheel_job.sh ${job_args[*]}
EOF
chown -R 1000:1000 "${home}"

# 4. The run, in namespaces that end with it (tools/trials/run_in_root.sh).
t=${SECONDS}
"${ROOT}/tools/trials/run_in_root.sh" "${root}" "${home}" "${house}" "${SUITE}" 2400
log "the job in ${SUITE}: $((SECONDS - t)) s"
t=${SECONDS}
rm -rf "${work}"
log "${name}: ok in ${SUITE} (removing the venv: $((SECONDS - t)) s; all: $((SECONDS - T0)) s)"
