#!/usr/bin/env bash
# Installs one release wheel the way a user gets it and trains with it, on a machine that
# looks bare: a fresh venv of the wheel's Python, created and filled by a non-root user, in a
# mount namespace that hides the build machine's compilers, headers, Bazel and the libraries
# a development build uses (Debian's Gloo and what it needs: hiredis, ibverbs, libnl; Boost's
# headers under /usr/include; OpenSSL's libcrypto stays: the wheel loads the system's at run
# time, as MPI's). Then
#   pip install tensorflow==<the wheel's> scikit-learn; pip install "<wheel>[tensorflow]"
#   (a GPU build: the CUDA runtime and NCCL are absent, and saying so is checked)
#   tfhvdrun -np 2 python keras_digits.py               (Gloo; no MPI on the machine)
#   pip install mpich; tfhvdrun --mpi -np 2 python keras_digits.py
# and checks each job's test accuracy (the user's side: tools/trials/wheel_job.sh). Another
# distribution's root instead of this machine: tools/trials/try_wheel_in_root.sh.
#
#   tools/trials/try_wheel.sh dist/tf_hvd-0.1.0+tf2.21-cp311-cp311-manylinux_2_35_x86_64.whl
#   tools/trials/try_wheel.sh WHEEL --epochs 5 --min-accuracy 0.9 --no-mpi
#   tools/trials/try_wheel.sh WHEEL --tf-dist tensorflow-cpu  # with tensorflow-cpu and [tensorflow-cpu]
#
# Needs root (the namespace and the user, tfhvd-try, made if missing) and the network once per
# (Python, TensorFlow): TensorFlow and the rest are downloaded into a wheelhouse under
# ${TF_HVD_WHEELHOUSE:-/var/cache/tf_hvd/wheelhouse} that later runs reuse; the user's pip
# installs from there with --no-index. Prints the install times; exits non-zero on any failure.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "${ROOT}/tools/release/wheel_matrix.sh"
log() { echo "[try_wheel] $*" >&2; }
WHEEL="" EPOCHS=15 MIN_ACC=0.95 MPI=1 DIST=tensorflow
while (( $# )); do
  case "$1" in
    --epochs) EPOCHS="$2"; shift 2 ;;
    --min-accuracy) MIN_ACC="$2"; shift 2 ;;
    --no-mpi) MPI=0; shift ;;
    --tf-dist) DIST="$2"; shift 2 ;;
    -*) sed -n '2,19p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
    *) WHEEL="$(realpath "$1")"; shift ;;
  esac
done
[[ -f "${WHEEL}" ]] || { log "no wheel given"; exit 2; }
[[ "$(id -u)" == 0 ]] || { log "needs root (mount namespace, test user)"; exit 2; }
name="$(basename "${WHEEL}")"
[[ "${name}" =~ \+tf([0-9]+\.[0-9]+)-cp([0-9])([0-9]+)- ]] || { log "not a release wheel: ${name}"; exit 2; }
tf="${BASH_REMATCH[1]}" py="${BASH_REMATCH[2]}.${BASH_REMATCH[3]}"
pin="$(tf_pin "${tf}")"
python="$(find_python "${py}")"
# The interpreter's installation. pyenv's lives in /root, which the namespace replaces with an
# empty folder (root's venvs and caches out of sight) holding just that installation, at its
# own path: its rpath to libpython still works, and the user can reach it.
pyhome="$(cd "$(dirname "${python}")/.." && pwd)"

user="${TF_HVD_TRY_USER:-tfhvd-try}"
if ! id "${user}" >/dev/null 2>&1; then
  useradd --system --create-home --home-dir "/var/lib/${user}" --shell /bin/bash "${user}"
fi

house="${TF_HVD_WHEELHOUSE:-/var/cache/tf_hvd/wheelhouse}/cp${py/./}-${DIST}${tf}"
if [[ ! -f "${house}/.complete" ]]; then
  log "downloading ${DIST} ${pin} and the example's packages into ${house}"
  mkdir -p "${house}"
  "${python}" -m pip download -q -d "${house}" "${DIST}==${pin}" scikit-learn cloudpickle \
    mpich==5.0.2 >&2
  touch "${house}/.complete"
fi
chmod -R a+rX "$(dirname "${house}")"

work="$(mktemp -d /var/tmp/tf_hvd-try.XXXXXX)"
trap 'rm -rf "${work}"' EXIT
mkdir "${work}/python" "${work}/job"
cp "${WHEEL}" "${work}/"
cp "${ROOT}/python/examples/keras_digits.py" "${ROOT}/python/examples/digits_data.py" \
  "${ROOT}/tools/trials/wheel_job.sh" "${work}/job/"
mpi_flag=""
(( MPI )) || mpi_flag=--no-mpi
chmod 755 "${work}"
chown -R "${user}:" "${work}/job" "${work}/${name}"

# What the namespace hides: every file of these packages (the user never sees them).
hidden_packages=(libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
                 libssl-dev libgtest-dev bazel-bootstrap)
hidden_files="${work}/hidden.txt"
for p in "${hidden_packages[@]}"; do
  dpkg -L "${p}" 2>/dev/null | while read -r f; do
    if [[ -f "${f}" && ! -L "${f}" && "${f}" != /usr/share/* ]]; then echo "${f}"; fi
  done
done > "${hidden_files}"
log "hiding $(wc -l < "${hidden_files}") files of ${#hidden_packages[@]} packages, /usr/include, /usr/lib/gcc and a system CUDA"

cat > "${work}/job/run.sh" <<EOF
set -euo pipefail
cd "${work}/job"
export HOME="${work}/job" PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2
py="${pyhome}/bin/python${py}"
echo "[try_wheel] as \$(id -un), with no compiler, Bazel, dev headers or the build's libraries"
hidden_ok() {
  ! echo 'int main(void) { return 0; }' | gcc -x c - -o /dev/null 2>/dev/null &&
    ! bazel --version >/dev/null 2>&1 && [[ ! -e /usr/include/gloo/config.h ]] &&
    ! "\${py}" -c "import ctypes; ctypes.CDLL('libgloo.so.0')" 2>/dev/null &&
    ! "\${py}" -c "import ctypes; ctypes.CDLL('libcudart.so.13')" 2>/dev/null
}
hidden_ok || { echo "[try_wheel] the namespace does not hide the build machine's tools"; exit 1; }
bash wheel_job.sh --python "\${py}" --wheelhouse "${house}" --wheel "${work}/${name}" \\
  --dist "${DIST}" --pin "${pin}" --epochs "${EPOCHS}" --min-accuracy "${MIN_ACC}" ${mpi_flag}
EOF
chown "${user}:" "${work}/job/run.sh"

unshare --mount --propagation private bash -euo pipefail -c '
  mount --bind -o ro "$1" "$2/python"
  mount -t tmpfs -o mode=755 tmpfs /root
  if [[ "$1" == /root/* ]]; then mkdir -p "$1"; mount --bind -o ro "$2/python" "$1"; fi
  mount -t tmpfs -o ro tmpfs /usr/include
  mount -t tmpfs -o ro tmpfs /usr/lib/gcc
  for d in /usr/local/cuda*; do
    if [[ -d "$d" && ! -L "$d" ]]; then mount -t tmpfs -o ro tmpfs "$d"; fi
  done
  while read -r f; do if [[ -e "$f" ]]; then mount --bind /dev/null "$f"; fi; done < "$3"
  exec runuser -u "$4" -- bash "$2/job/run.sh"' _ "${pyhome}" "${work}" "${hidden_files}" "${user}"
log "${name}: ok"
