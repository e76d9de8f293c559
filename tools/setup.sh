#!/usr/bin/env bash
# Idempotent set-up of a Debian machine for tf_hvd (runs non-interactively; CI runs it as root):
#   1. apt: bazel-bootstrap (Bazel 4.2.3), libgloo-dev, libgtest-dev, libboost-dev,
#      clang-19, lld-19 and debootstrap (the release wheels' floor toolchain),
#      libssl3, python3.11 (+venv), iproute2, openssh-server and iptables (the multi-host
#      tests' namespace cluster), slurmd, slurmctld, slurm-client, munge (the Slurm tests) -- only if missing
#   2. venv ${TF_HVD_VENV:-$HOME/.venvs/tf_hvd} from python3.11 -- only if missing
#   3. pip install -r tools/requirements.txt -- only if a pinned requirement is not satisfied
#   3a. pip install -r tools/requirements-docs.txt (MkDocs + mkdocstrings: the docs site, which
#      tests/unit/test_docs_site.py builds) -- only if a pinned requirement is not satisfied
#   3b. pip install -r tools/requirements-spark.txt (pyspark for tf_hvd.spark; with step 1's
#      openjdk-17-jre-headless, what tests/parallel/test_spark*.py run) -- only if a pin is unmet
#   3c. pip install -r tools/requirements-cuda.txt (NCCL + CUDA runtime wheels, ~330 MiB download,
#      ~475 MiB installed, ~30 s; tests/unit/test_cuda_build.py builds the CUDA variant)
#   4. Bazel build of //:_hvd.so, copied to tf_hvd/_hvd.so (cached: ~2 s when unchanged);
#      with --cuda (or TF_HVD_CUDA=1) the CUDA variant: NCCL for GPU tensors
#   5. editable install of this tree (import tf_hvd anywhere, console script tfhvdrun)
#      -- only if the venv does not already point at this tree with the same setup.py
# Second and later runs with nothing to do take a few seconds.
set -euo pipefail
for arg in "$@"; do
  case "${arg}" in
    --cuda) export TF_HVD_CUDA=1 ;;
    *) echo "usage: tools/setup.sh [--cuda]" >&2; exit 2 ;;
  esac
done
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TF_HVD_VENV:-${HOME:-/root}/.venvs/tf_hvd}"
PY="${VENV}/bin/python"
log() { echo "[setup] $*" >&2; }

SUDO=""
if [[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
export DEBIAN_FRONTEND=noninteractive

apt_install() {  # apt_install pkg...: apt-get update only when a package has no candidate
  local need_update=0 p
  if ! compgen -G "/var/lib/apt/lists/*_Packages*" >/dev/null; then need_update=1; fi
  for p in "$@"; do
    if ! apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [^(]'; then need_update=1; fi
  done
  if (( need_update )); then
    log "apt-get update"
    ${SUDO} apt-get update -q
  fi
  log "apt-get install -y $*"
  ${SUDO} apt-get install -y -q --no-install-recommends "$@"
}

# 1. System packages ------------------------------------------------------------------------
pkgs=()
command -v bazel >/dev/null 2>&1 || pkgs+=(bazel-bootstrap)
[[ -f /usr/include/gloo/config.h && -e /usr/lib/libgloo.so ]] || pkgs+=(libgloo-dev)
# GoogleTest for the C++ unit tests (bazel test //...; @local_gtest in tools/build/local_deps.bzl).
[[ -f /usr/include/gtest/gtest.h ]] && compgen -G "/usr/lib/*/libgtest.a" >/dev/null || pkgs+=(libgtest-dev)
# Boost's headers: Beast + Asio, header-only, are the rendezvous client (@local_boost).
[[ -f /usr/include/boost/beast.hpp ]] || pkgs+=(libboost-dev)
# OpenSSL's libcrypto (signing, nonces) is not built against: _hvd.so loads the system's
# libcrypto.so.3 at run time (cc/common/gloo/crypto_library.h). Debian has it already.
compgen -G "/usr/lib/*/libcrypto.so.3" >/dev/null || pkgs+=(libssl3)
# The release wheels' floor toolchain (tools/release/floor/: clang on a debootstrapped Debian 11
# sysroot; tests/parallel/test_wheel.py builds one) and the roots the wheels are tried in.
command -v clang-19 >/dev/null 2>&1 && command -v ld.lld-19 >/dev/null 2>&1 || pkgs+=(clang-19 lld-19)
command -v debootstrap >/dev/null 2>&1 || pkgs+=(debootstrap)
# The multi-host tests' namespace cluster (tools/clusters/netns_cluster.py): ip/tc, ssh and sshd.
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || pkgs+=(iproute2)
[[ -x /usr/sbin/sshd ]] && command -v ssh >/dev/null 2>&1 || pkgs+=(openssh-server openssh-client)
# iptables: the liveness tests cut a namespace host off the network (DROP inside it).
[[ -x /usr/sbin/iptables ]] || pkgs+=(iptables)
# Slurm (tests/parallel/test_slurm.py runs slurmctld + a slurmd per namespace host, munge).
[[ -x /usr/sbin/slurmd && -x /usr/sbin/slurmctld ]] && command -v srun >/dev/null 2>&1 || \
  pkgs+=(slurmd slurmctld slurm-client)
[[ -x /usr/sbin/munged ]] && command -v munge >/dev/null 2>&1 || pkgs+=(munge)
# Java 17 for Spark 4 (tf_hvd.spark; tests/parallel/test_spark*.py).
command -v java >/dev/null 2>&1 || pkgs+=(openjdk-17-jre-headless)
if [[ ! -x "${PY}" ]]; then
  command -v python3.11 >/dev/null 2>&1 || pkgs+=(python3.11 python3.11-venv)
fi
if (( ${#pkgs[@]} )); then apt_install "${pkgs[@]}"; fi

# 2. Virtual environment --------------------------------------------------------------------
if [[ ! -x "${PY}" ]]; then
  log "creating venv ${VENV} (python3.11)"
  mkdir -p "$(dirname "${VENV}")"
  if ! python3.11 -m venv "${VENV}"; then
    rm -rf "${VENV}"
    apt_install python3.11-venv
    python3.11 -m venv "${VENV}"
  fi
fi

# 3. Python requirements (fast path: compare installed versions with the pins) ---------------
requirements_missing() {  # requirements_missing FILE: true when a pin is not satisfied
  ! "${PY}" - "$1" <<'PYEOF'
import re, sys
from importlib import metadata
bad = []
for line in open(sys.argv[1]):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    m = re.match(r"^([A-Za-z0-9_.\-]+)\s*(?:==\s*([^\s;]+))?", line)
    name, want = m.group(1), m.group(2)
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        bad.append(f"{name} (missing)")
        continue
    if want and have != want:
        bad.append(f"{name} {have} != {want}")
if bad:
    print("[setup] requirements to install: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
PYEOF
}
if requirements_missing "${ROOT}/tools/requirements.txt"; then
  log "pip install -r tools/requirements.txt"
  "${PY}" -m pip install -q -r "${ROOT}/tools/requirements.txt"
fi
if requirements_missing "${ROOT}/tools/requirements-docs.txt"; then
  log "pip install -r tools/requirements-docs.txt"
  "${PY}" -m pip install -q -r "${ROOT}/tools/requirements-docs.txt"
fi
if requirements_missing "${ROOT}/tools/requirements-spark.txt"; then
  log "pip install -r tools/requirements-spark.txt"
  "${PY}" -m pip install -q -r "${ROOT}/tools/requirements-spark.txt"
fi
# The CUDA variant's wheels (headers and libraries only: no GPU needed); always, so that
# tests/unit/test_cuda_build.py can build that variant.
if requirements_missing "${ROOT}/tools/requirements-cuda.txt"; then
  log "pip install -r tools/requirements-cuda.txt"
  "${PY}" -m pip install -q --no-deps -r "${ROOT}/tools/requirements-cuda.txt"
fi

# 4. Build the library ------------------------------------------------------------------------
"${ROOT}/tools/build/build_lib.sh"

# 5. Editable install (import tf_hvd from anywhere, tfhvdrun on PATH) -------------------------
stamp="${VENV}/.tf_hvd_install_stamp"
want_stamp="${ROOT} $(sha1sum "${ROOT}/setup.py" | cut -d' ' -f1)"
have_origin="$(cd / && "${PY}" -c 'import importlib.util as u, os
s = u.find_spec("tf_hvd"); print(os.path.realpath(os.path.dirname(s.origin)) if s and s.origin else "")' 2>/dev/null || true)"
if [[ -f "${ROOT}/tf_hvd/__init__.py" ]] && {
     [[ ! -x "${VENV}/bin/tfhvdrun" ]] || [[ "${have_origin}" != "$(realpath "${ROOT}")/tf_hvd" ]] ||
     [[ "$(cat "${stamp}" 2>/dev/null)" != "${want_stamp}" ]]; }; then
  log "pip install -e ${ROOT}"
  "${PY}" -m pip install -q --no-build-isolation --no-deps -e "${ROOT}"
  echo "${want_stamp}" > "${stamp}"
elif [[ ! -f "${ROOT}/tf_hvd/__init__.py" ]]; then
  log "tf_hvd/__init__.py does not exist yet: skipping the editable install"
fi
log "ready: venv ${VENV}, library ${ROOT}/tf_hvd/_hvd.so"
