#!/usr/bin/env bash
# The user's side of trying a release wheel (tools/trials/try_wheel.sh, tools/trials/try_wheel_in_root.sh run
# it as a non-root user, in a folder holding keras_digits.py and digits_data.py): a fresh venv
# of PYTHON, TensorFlow and scikit-learn, then the wheel, from a wheelhouse only (--no-index);
# the versions and the machine's libcrypto; the CUDA-less message of a GPU build; keras_digits
# at np=2 on Gloo, then `pip install mpich` and --mpi; each job's test accuracy checked.
# Prints [try_wheel] lines with the times; exits non-zero on any failure.
#
#   wheel_job.sh --python PY --wheelhouse DIR --wheel WHL --dist tensorflow --pin 2.21.0
#                [--epochs 15] [--min-accuracy 0.95] [--no-mpi] [--upgrade-pip]
#
# --upgrade-pip: first `pip install --upgrade pip` from the wheelhouse, as TensorFlow's install
# guide asks (an old distribution's venv pip may predate the wheels' tags).
set -euo pipefail
PY="" HOUSE="" WHEEL="" DIST=tensorflow PIN="" EPOCHS=15 MIN_ACC=0.95 MPI=1 UPGRADE_PIP=0
while (( $# )); do
  case "$1" in
    --python) PY="$2"; shift 2 ;;
    --wheelhouse) HOUSE="$2"; shift 2 ;;
    --wheel) WHEEL="$2"; shift 2 ;;
    --dist) DIST="$2"; shift 2 ;;
    --pin) PIN="$2"; shift 2 ;;
    --epochs) EPOCHS="$2"; shift 2 ;;
    --min-accuracy) MIN_ACC="$2"; shift 2 ;;
    --no-mpi) MPI=0; shift ;;
    --upgrade-pip) UPGRADE_PIP=1; shift ;;
    *) sed -n '2,13p' "${BASH_SOURCE[0]}" >&2; exit 2 ;;
  esac
done
[[ -n "${PY}" && -d "${HOUSE}" && -f "${WHEEL}" && -n "${PIN}" ]] || { sed -n '2,13p' "${BASH_SOURCE[0]}" >&2; exit 2; }
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 TF_CPP_MIN_LOG_LEVEL=2
install() { venv/bin/pip install -q --no-index --find-links "${HOUSE}" "$@"; }

t=${SECONDS}
"${PY}" -m venv venv
if (( UPGRADE_PIP )); then
  old="$(venv/bin/pip --version | cut -d' ' -f2)"
  install --upgrade pip
  echo "[try_wheel] venv's pip ${old} upgraded to $(venv/bin/pip --version | cut -d' ' -f2)"
fi
install "${DIST}==${PIN}" scikit-learn
echo "[try_wheel] venv + ${DIST} ${PIN}: $((SECONDS - t)) s"
t=${SECONDS}
install "${WHEEL}[${DIST}]"
echo "[try_wheel] pip install of the wheel: $((SECONDS - t)) s"
export PATH="${PWD}/venv/bin:${PATH}"
python - <<'PY'
from importlib import metadata
import tensorflow as tf
import tf_hvd as hvd
print("[try_wheel] TensorFlow %s, tf_hvd %s" % (tf.__version__, metadata.version("tf_hvd")))
print("[try_wheel] mpi_built:", hvd.mpi_built())
import ctypes
for crypto in ("libcrypto.so.3", "libcrypto.so.1.1"):  # the order Gloo's signing loads them in
    try:
        ctypes.CDLL(crypto)
        break
    except OSError:
        crypto = "none"
print("[try_wheel] the machine's OpenSSL libcrypto (Gloo's signing): %s" % crypto)
if hvd.cuda_built():
    from tf_hvd._library import lib
    why = " ".join(lib._gpu_libraries().split())
    assert 'pip install "tensorflow[and-cuda]"' in why, why
    print("[try_wheel] GPU build without the CUDA runtime: %s" % why[:160])
PY
train() {
  local t=${SECONDS} acc
  timeout -k 10 600 tfhvdrun "$@" -np 2 python keras_digits.py --epochs "${EPOCHS}" \
    --checkpoint-dir ckpt > train.log 2>&1 || { cat train.log; exit 1; }
  acc="$(sed -n 's/.*test accuracy: \([0-9.]*\).*/\1/p' train.log | head -1)"
  echo "[try_wheel] tfhvdrun $* -np 2 keras_digits.py: test accuracy ${acc:-none} ($((SECONDS - t)) s)"
  python -c "import sys; sys.exit(0 if float('${acc:-0}') >= ${MIN_ACC} else 1)" || { cat train.log; exit 1; }
}
train
if (( MPI )); then
  install mpich==5.0.2
  python -c 'import tf_hvd as hvd; print("[try_wheel] with the mpich wheel, mpi_built:", hvd.mpi_built())'
  train --mpi
fi
