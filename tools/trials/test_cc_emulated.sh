#!/usr/bin/env bash
# The C++ unit tests (the root BUILD's cc_test targets) cross-built for aarch64 with the release
# wheels' floor toolchain (tools/release/floor/) and run on this x86_64 machine under emulation: in the
# Debian arm64 root of tools/trials/user_root.sh (its glibc and libstdc++; every program run by
# qemu-user), in namespaces of their own (mount: /proc, /dev/shm, /tmp; network: loopback only;
# PID). Shows that the core's portable paths (the reduction kernels, copies and waits that
# stand in for the x86 ones) give the same results on aarch64. Prints one line per test with
# its time; exits non-zero when any fails.
#
#   tools/trials/test_cc_emulated.sh                      # aarch64, bookworm root, the tests below
#   tools/trials/test_cc_emulated.sh core_test shm_collectives_test
#
# GoogleTest for arm64 is bullseye's libgtest-dev (the sysroot's GCC 10), downloaded once into
# ~/.cache/tf_hvd/floor/gtest-arm64. Bazel's output base is the aarch64 wheels' (under
# ~/.cache/tf_hvd/wheel-build/bazel/bazel-floor-aarch64), so the libraries compiled for them
# are reused. Needs root, qemu-user-static and binfmt-support (see tools/trials/user_root.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ARCH=aarch64 DEB_ARCH=arm64 SUITE="${TF_HVD_EMULATED_SUITE:-bookworm}"
log() { echo "[test_cc_emulated] $*" >&2; }
TESTS=("$@")
# Not socket_links_test: it links the layers as shared libraries, and the floor's Gloo is a
# static library whose symbols are kept out of them (it links into _hvd.so only). Not
# crypto_library_test: it loads TensorFlow's library.
(( ${#TESTS[@]} )) || TESTS=(core_test algorithms_test shm_collectives_test autotune_test
  entry_checks_test cpu_binding_test subset_transport_test fault_reporter_test
  process_set_table_test background_loop_test transport_choice_test)
[[ "$(id -u)" == 0 ]] || { log "needs root (namespaces, chroot)"; exit 2; }
FLOOR_CACHE="${TF_HVD_FLOOR_CACHE:-${HOME:-/root}/.cache/tf_hvd/floor}"
WHEEL_CACHE="${TF_HVD_WHEEL_CACHE:-${HOME:-/root}/.cache/tf_hvd/wheel-build}"
MIRROR="${TF_HVD_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

tools="$("${ROOT}/tools/release/floor/toolchain.sh" "${ARCH}")"
gloo="$("${ROOT}/tools/release/floor/gloo.sh" "${ARCH}")"
sysroot="$("${ROOT}/tools/release/floor/sysroot.sh" "${ARCH}")"
root="$("${ROOT}/tools/trials/user_root.sh" "${SUITE}" "${DEB_ARCH}")"

# GoogleTest built for the sysroot's arm64 (the bullseye package the sysroot's index names).
gtest="${FLOOR_CACHE}/gtest-${DEB_ARCH}"
if [[ ! -f "${gtest}/usr/lib/${ARCH}-linux-gnu/libgtest_main.a" ]]; then
  index="$(ls "${sysroot}"/var/lib/apt/lists/*_binary-"${DEB_ARCH}"_Packages)"
  deb="$(awk '/^Package: /{p=$2} p=="libgtest-dev" && /^Filename: /{print $2; exit}' "${index}")"
  [[ -n "${deb}" ]] || { log "libgtest-dev not in ${index}"; exit 1; }
  log "downloading ${deb##*/}"
  rm -rf "${gtest}.tmp"
  mkdir -p "${gtest}.tmp"
  curl -sSfL -o "${gtest}.tmp/gtest.deb" "${MIRROR}/${deb}"
  dpkg-deb -x "${gtest}.tmp/gtest.deb" "${gtest}.tmp"
  rm -f "${gtest}.tmp/gtest.deb"
  rm -rf "${gtest}"
  mv "${gtest}.tmp" "${gtest}"
fi

# Bazel as tools/release/build_wheel.sh --arch aarch64 runs it (the same repositories and flags), with
# GoogleTest added. The tests link no Python and no TensorFlow: any x86_64 build venv serves
# the repository rules.
py=""
for cand in "${WHEEL_CACHE}"/venvs/cp3*-tf*/bin/python; do [[ -x "${cand}" ]] && { py="${cand}"; break; }; done
[[ -n "${py}" ]] || { log "no build venv under ${WHEEL_CACHE}/venvs (tools/release/build_wheels.sh --venvs-only)"; exit 2; }
out="${WHEEL_CACHE}/bazel/bazel-floor-${ARCH}"
mkdir -p "${out}/disk"
t=${SECONDS}
targets=()
for test in "${TESTS[@]}"; do targets+=("//:${test}"); done
(cd "${ROOT}" && env CC="${tools}/cc" GLOO_INCLUDE_DIR="${gloo}/include" GLOO_LIB_DIR="${gloo}/lib" \
  BOOST_INCLUDE_DIR="${sysroot}/usr/include" PYTHON_BIN_PATH="${py}" \
  GTEST_INCLUDE_DIR="${gtest}/usr/include" GTEST_LIB_DIR="${gtest}/usr/lib/${ARCH}-linux-gnu" \
  "${BAZEL:-bazel}" --output_base="${out}/output_base" build --disk_cache="${out}/disk" \
  --symlink_prefix=/ --keep_going "${targets[@]}") || log "some tests did not build (above)"
bin="$(cd "${ROOT}" && "${BAZEL:-bazel}" --output_base="${out}/output_base" info --symlink_prefix=/ bazel-bin 2>/dev/null)"
log "built ${#TESTS[@]} tests for ${ARCH} in $((SECONDS - t)) s"

# The run: the output base mounted at its own path inside the root (the tests find their
# libraries through Bazel's _solib links, which are absolute), read-only.
obase="${out}/output_base"
timeout -k 20 1800 unshare --mount --propagation private --net --pid --fork bash -euo pipefail -c '
  root="$1" obase="$2" bin="$3"; shift 3
  mounted=()
  cleanup() { for (( i = ${#mounted[@]} - 1; i >= 0; i-- )); do umount -l "${mounted[i]}" || true; done; }
  trap cleanup EXIT
  m() { mount "$@"; mounted+=("${@: -1}"); }
  ip link set lo up
  m -t proc proc "${root}/proc"
  m --bind /dev "${root}/dev"
  m -t tmpfs -o mode=1777,nosuid,nodev tmpfs "${root}/dev/shm"
  m -t tmpfs -o mode=1777 tmpfs "${root}/tmp"
  m -t tmpfs -o mode=0755 tmpfs "${root}/root"
  mkdir -p "${root}${obase}"
  m --bind -o ro "${obase}" "${root}${obase}"
  failed=0
  for test in "$@"; do
    t=${SECONDS}
    if chroot "${root}" env -i PATH=/usr/bin:/bin TMPDIR=/tmp "${bin}/${test}" > "/tmp/tf_hvd-${test}-aarch64.log" 2>&1; then
      verdict="$(grep -E "^\[  PASSED  \]" "/tmp/tf_hvd-${test}-aarch64.log" | tail -1 || true)"
    else
      failed=1
      verdict="FAILED: $(grep -E "^\[  FAILED  \] [A-Za-z]" "/tmp/tf_hvd-${test}-aarch64.log" | sort -u | tr "\n" " " | head -c 600 || true)"
      [[ -n "${verdict#FAILED: }" ]] || verdict="FAILED: $(tail -3 "/tmp/tf_hvd-${test}-aarch64.log" | tr "\n" " " || true)"
    fi
    echo "[test_cc_emulated] ${test} (aarch64, emulated): ${verdict} ($((SECONDS - t)) s; /tmp/tf_hvd-${test}-aarch64.log)"
  done
  exit "${failed}"
' _ "${root}" "${obase}" "${bin}" "${TESTS[@]}"
