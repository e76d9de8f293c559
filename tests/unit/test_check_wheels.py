"""tools/release/check_wheels.py's floor: every ELF file of a wheel requires (.gnu.version_r) no
glibc and no libstdc++ version above the floor (default glibc 2.28 with GCC 8's
GLIBCXX_3.4.25/CXXABI_1.3.11), auditwheel's tag is at or below it and is the file name's
tag, and the files are built for the file name's architecture. The ELF files are tiny
shared objects built here with the host's gcc (Debian 12: glibc 2.36, GCC 12), so each
test takes well under a second."""
import base64
import hashlib
import os
import shutil
import sys
import zipfile

import pytest

from jobrunner import PYTHON, REPO, run

sys.path.insert(0, os.path.join(REPO, "tools", "release"))
import check_wheels  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                                reason="gcc/g++ is not installed")

CHECK = os.path.join(REPO, "tools", "release", "check_wheels.py")
AUDITWHEEL = os.path.join(os.path.dirname(PYTHON), "auditwheel")
BUILD_INFO = ('const char tf_hvd_build_info[] __attribute__((used)) = '
              '"tf_hvd-build-info:tensorflow=2.21.0;cxx11_abi=1;compiler=12;end";\n')
# strlen@GLIBC_2.2.5 (x86_64's first version): under every floor.
OLD_C = BUILD_INFO + "#include <string.h>\nint f(const char *s) { return (int)strlen(s); }\n"
# exp@GLIBC_2.29 (libm's new exp, the default since glibc 2.29).
EXP_C = BUILD_INFO + "#include <math.h>\ndouble f(double x) { return exp(x); }\n"
# std::condition_variable::wait@GLIBCXX_3.4.30 (GCC 12's libstdc++).
WAIT_CC = BUILD_INFO.replace("const char", 'extern "C" const char') + """
#include <condition_variable>
#include <mutex>
std::mutex m;
std::condition_variable cv;
void f() { std::unique_lock<std::mutex> lock(m); cv.wait(lock); }
"""
WAIT = "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE"


def _build(tmp_path, name, source, soname=None, link=()):
    src = tmp_path / (name + (".cc" if "#include <mutex>" in source else ".c"))
    src.write_text(source)
    out = tmp_path / (soname or name + ".so")
    cmd = ["g++" if src.suffix == ".cc" else "gcc", "-shared", "-fPIC", "-O0", "-o", str(out),
           str(src), "-lm"] + (["-Wl,-soname," + soname] if soname else []) + list(link)
    res = run(cmd, 60)
    assert res.ok, res.describe()
    return str(out)


def _wheel(tmp_path, library, platform, libs=None, floor_file=""):
    """A wheel holding ``library`` as tf_hvd/_hvd.so (and ``libs`` under tf_hvd.libs/, and
    ``floor_file`` as tf_hvd/_floor.txt unless None; by default the glibc of ``platform``'s
    tag, as the release build writes it), whose metadata passes the other checks (the
    TensorFlow minor 2.21 in the label and the extras), named for ``platform``."""
    if floor_file == "":
        glibc = check_wheels.parse_tag(platform.split(".")[0])[0]
        floor_file = "glibc %d.%d\n" % glibc
    info = "tf_hvd-0.1.0+tf2.21.dist-info"
    meta = "Metadata-Version: 2.1\nName: tf_hvd\nVersion: 0.1.0+tf2.21\n" + "".join(
        'Requires-Dist: %s<2.22,>=2.21; extra == "%s"\n' % (req, extra) for req, extra in [
            ("tensorflow", "tensorflow"), ("tensorflow-cpu", "tensorflow-cpu"),
            ("tensorflow[and-cuda]", "and-cuda")])
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n" + "".join(
        "Tag: cp311-cp311-%s\n" % tag for tag in platform.split("."))
    files = {"tf_hvd/_hvd.so": open(library, "rb").read(),
             info + "/METADATA": meta.encode(), info + "/WHEEL": wheel.encode()}
    if floor_file is not None:
        files["tf_hvd/_floor.txt"] = floor_file.encode()
    for path in libs or []:
        files["tf_hvd.libs/" + os.path.basename(path)] = open(path, "rb").read()
    path = tmp_path / ("tf_hvd-0.1.0+tf2.21-cp311-cp311-%s.whl" % platform)
    with zipfile.ZipFile(str(path), "w") as z:
        record = []
        for name, data in files.items():
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))
        z.writestr(info + "/RECORD", "\n".join(record + [info + "/RECORD,,"]) + "\n")
    return str(path)


def _check(path, floor=None):
    row, problems = check_wheels.check_wheel(
        path, AUDITWHEEL, check_wheels.Floor(floor) if floor else None)
    return row, [" ".join(p.split()) for p in problems]


def test_the_floor_table():
    floor = check_wheels.Floor("2.28")
    assert floor.limits == {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 25), "CXXABI": (1, 3, 11)}
    assert str(floor) == "glibc 2.28, GLIBCXX_3.4.25, CXXABI_1.3.11"
    assert check_wheels.Floor("2.17").limits["GLIBCXX"] == (3, 4, 19)
    assert check_wheels.Floor("2.31").limits["CXXABI"] == (1, 3, 12)
    assert check_wheels.Floor("2.34").limits["GLIBCXX"] == (3, 4, 29)
    assert check_wheels.Floor("2.35").limits["GLIBCXX"] == (3, 4, 30)
    with pytest.raises(ValueError, match="no floor 2.30 .known: 2.17, 2.28, 2.31, 2.34, 2.35"):
        check_wheels.Floor("2.30")


def test_required_versions_name_the_symbols(tmp_path):
    found = check_wheels.required_versions(_build(tmp_path, "exp", EXP_C))
    assert found["machine"] == check_wheels.MACHINES[os.uname().machine]
    assert found["GLIBC"][(2, 29)] == ["exp"]
    assert check_wheels.highest(found, "GLIBC") == (2, 29)
    assert check_wheels.highest(found, "GLIBCXX") is None
    # A requirement on a library the wheel bundles is the wheel's own affair.
    assert check_wheels.required_versions(
        _build(tmp_path, "exp2", EXP_C), provided={"libm.so.6"})["GLIBC"].get((2, 29)) is None


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_a_wheel_of_old_symbols_passes_at_2_28(tmp_path):
    wheel = _wheel(tmp_path, _build(tmp_path, "old", OLD_C), "manylinux_2_5_x86_64")
    row, problems = _check(wheel)
    assert problems == []
    assert (row["tag"], row["glibc"], row["GLIBCXX"], row["CXXABI"], row["built against"]) == (
        "manylinux_2_5_x86_64", "2.2.5", "-", "-", "2.21.0")
    # The command: the table's columns, exit 0.
    res = run([PYTHON, CHECK, wheel], 60)
    assert res.ok, res.describe()
    lines = res.output.splitlines()
    assert "floor: glibc 2.28, GLIBCXX_3.4.25, CXXABI_1.3.11" in lines, res.output
    header = [line for line in lines if line.startswith("wheel ")][0].split()
    assert header == ["wheel", "tag", "glibc", "GLIBCXX", "CXXABI", "built", "against", "GPU",
                      "bundled", "MB", "verdict"], res.output
    assert lines[-1].split()[-1] == "ok", res.output


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_a_glibc_2_29_symbol_fails_naming_file_version_and_symbol(tmp_path):
    wheel = _wheel(tmp_path, _build(tmp_path, "exp", EXP_C), "manylinux_2_31_x86_64")
    row, problems = _check(wheel)
    assert "tf_hvd/_hvd.so requires GLIBC_2.29, above the floor GLIBC_2.28: exp" in problems
    assert "auditwheel's tag manylinux_2_31_x86_64 is above the floor manylinux_2_28" \
        in problems
    assert row["glibc"] == "2.29"
    res = run([PYTHON, CHECK, wheel], 60)
    assert res.returncode == 1 and "GLIBC_2.29" in res.output, res.describe()
    # At the 2.31 floor (and recording it) the same library passes.
    wheel = _wheel(tmp_path, _build(tmp_path, "exp", EXP_C), "manylinux_2_31_x86_64",
                   floor_file="glibc 2.31\n")
    assert _check(wheel, "2.31")[1] == []
    assert run([PYTHON, CHECK, "--floor", "2.31", wheel], 60).ok


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_a_bundled_library_is_held_to_the_floor_too(tmp_path):
    bundled = _build(tmp_path, "libbundled-1a2b3c4d", EXP_C)
    wheel = _wheel(tmp_path, _build(tmp_path, "old", OLD_C), "manylinux_2_31_x86_64",
                   libs=[bundled])
    row, problems = _check(wheel)
    assert "tf_hvd.libs/libbundled-1a2b3c4d.so requires GLIBC_2.29, above the floor " \
           "GLIBC_2.28: exp" in problems, problems
    assert not any(p.startswith("tf_hvd/_hvd.so requires") for p in problems), problems
    assert (row["glibc"], row["bundled"]) == ("2.29", 1)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_a_glibcxx_3_4_30_symbol_fails_the_3_4_25_limit(tmp_path):
    library = _build(tmp_path, "wait", WAIT_CC)
    found = check_wheels.required_versions(library)
    assert check_wheels.highest(found, "GLIBCXX") == (3, 4, 30)
    wheel = _wheel(tmp_path, library, "manylinux_2_5_x86_64")
    row, problems = _check(wheel)
    assert "tf_hvd/_hvd.so requires GLIBCXX_3.4.30, above the floor GLIBCXX_3.4.25: " \
           + WAIT in problems, problems
    assert row["GLIBCXX"] == "3.4.30"
    # GCC 12's runtime: the 2.35 floor (Ubuntu 22.04) takes it.
    assert not [p for p in _check(wheel, "2.35")[1] if "GLIBCXX" in p]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_a_relabelled_tag_does_not_count(tmp_path):
    """A wheel whose files need glibc 2.29 renamed to manylinux_2_28 fails; one tagged with
    the floor while its files would allow less (what the release build does) passes, and
    one tagged above the floor fails."""
    wheel = _wheel(tmp_path, _build(tmp_path, "exp", EXP_C), "manylinux_2_28_x86_64")
    problems = _check(wheel)[1]
    assert "the file name's tag manylinux_2_28_x86_64 is below auditwheel's " \
           "manylinux_2_31_x86_64 (a tag must come from the files, not a rename)" in problems
    old = _wheel(tmp_path, _build(tmp_path, "old", OLD_C), "manylinux_2_28_x86_64")
    assert not [p for p in _check(old)[1] if "tag" in p], _check(old)[1]
    assert check_wheels.tag_problems(
        "tf_hvd-0.1.0+tf2.21-cp311-cp311-manylinux_2_31_x86_64.whl",
        "manylinux_2_5_x86_64", check_wheels.Floor("2.28"))[1] == [
        "the file name's tag manylinux_2_31_x86_64 is above the floor manylinux_2_28"]
    # The legacy alias auditwheel adds (manylinux_2_17_x86_64.manylinux2014_x86_64) is one tag.
    assert check_wheels.tag_problems(
        "tf_hvd-0.1.0+tf2.21-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "manylinux_2_17_x86_64", check_wheels.Floor("2.28")) == ("x86_64", [])


def test_aarch64_wheels_are_accepted_and_the_machine_must_match(tmp_path):
    floor = check_wheels.Floor("2.28")
    assert check_wheels.parse_tag("manylinux_2_28_aarch64") == ((2, 28), "aarch64")
    assert check_wheels.parse_tag("manylinux2014_aarch64") == ((2, 17), "aarch64")
    assert check_wheels.parse_tag("linux_aarch64") is None
    assert check_wheels.tag_problems(
        "tf_hvd-0.1.0+tf2.21-cp312-cp312-manylinux_2_28_aarch64.whl",
        "manylinux_2_28_aarch64", floor) == ("aarch64", [])
    assert check_wheels.tag_problems(
        "tf_hvd-0.1.0+tf2.21-cp312-cp312-manylinux_2_28_aarch64.whl",
        "manylinux_2_34_aarch64", floor)[1] == [
        "the file name's tag manylinux_2_28_aarch64 is below auditwheel's manylinux_2_34_aarch64 "
        "(a tag must come from the files, not a rename)",
        "auditwheel's tag manylinux_2_34_aarch64 is above the floor manylinux_2_28"]
    assert check_wheels.ALLOWED_NEEDED.match("ld-linux-aarch64.so.1")
    assert check_wheels.ALLOWED_NEEDED.match("ld-linux-x86-64.so.2")
    # A wheel named for the other architecture than its files.
    other = "aarch64" if os.uname().machine == "x86_64" else "x86_64"
    wheel = _wheel(tmp_path, _build(tmp_path, "old", OLD_C), "manylinux_2_17_%s" % other)
    problems = _check(wheel)[1]
    assert "tf_hvd/_hvd.so is built for %s, but the file name says %s" % (
        check_wheels.MACHINES[os.uname().machine], other) in problems, problems


def test_the_library_mode_reports_and_fails_on_the_floor_only_when_asked(tmp_path):
    library = _build(tmp_path, "exp", EXP_C)
    res = run([PYTHON, CHECK, "--library", library], 60)
    assert res.ok, res.describe()
    assert "%s: requires glibc 2.29, GLIBCXX -, CXXABI -" % library in res.output
    assert res.output.strip().endswith(": ok"), res.output
    res = run([PYTHON, CHECK, "--library", library, "--floor", "2.28"], 60)
    assert res.returncode == 1, res.describe()
    assert "%s: requires GLIBC_2.29, above the floor GLIBC_2.28: exp" % library in res.output
    assert res.output.strip().endswith(": FAILED"), res.output


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_the_wheel_records_its_floor_for_import(tmp_path):
    """tf_hvd/_floor.txt (what `import tf_hvd` compares with the running glibc): present,
    not below auditwheel's tag, not above the floor, the file name tag's glibc."""
    library = _build(tmp_path, "exp", EXP_C)  # manylinux_2_31
    wheel = _wheel(tmp_path, library, "manylinux_2_31_x86_64", floor_file=None)
    assert "no tf_hvd/_floor.txt (the glibc floor import tf_hvd checks)" in _check(wheel)[1]
    wheel = _wheel(tmp_path, library, "manylinux_2_31_x86_64", floor_file="glibc 2.28\n")
    assert "tf_hvd/_floor.txt records glibc 2.28, below auditwheel's manylinux_2_31_x86_64" \
        in _check(wheel, "2.31")[1]
    wheel = _wheel(tmp_path, library, "manylinux_2_31_x86_64", floor_file="glibc 2.34\n")
    assert _check(wheel, "2.31")[1] == [
        "tf_hvd/_floor.txt records glibc 2.34, above the floor 2.31",
        "tf_hvd/_floor.txt records glibc 2.34, but the file name's tag says 2.31"]
    wheel = _wheel(tmp_path, library, "manylinux_2_31_x86_64", floor_file="glibc 2.31\n")
    assert _check(wheel, "2.31")[1] == []
    wheel = _wheel(tmp_path, library, "manylinux_2_31_x86_64", floor_file="2.31\n")
    assert "tf_hvd/_floor.txt records no glibc floor ('glibc 2.28')" in _check(wheel, "2.31")[1]


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the wheels here are x86_64")
def test_tensorflows_library_is_left_to_tensorflow_and_others_must_be_bundled(tmp_path):
    """As in a release wheel, _hvd.so needs libtensorflow_framework.so.2, which the wheel
    does not carry: auditwheel's overall tag is then linux_x86_64 (show knows nothing of
    repair's --exclude), and the tag that counts is the one its symbols give. A library
    neither bundled nor allowed is named."""
    tf = _build(tmp_path, "tf", "int tf_stub(void) { return 1; }\n",
                soname="libtensorflow_framework.so.2")
    gloo = _build(tmp_path, "gloo", "int gloo_stub(void) { return 1; }\n",
                  soname="libnot_bundled_stub.so.1")  # a name no system has
    source = OLD_C + "extern int tf_stub(void);\nint g(void) { return tf_stub(); }\n"
    wheel = _wheel(tmp_path, _build(tmp_path, "uses_tf", source, link=[tf]),
                   "manylinux_2_5_x86_64")
    row, problems = _check(wheel)
    assert (problems, row["tag"]) == ([], "manylinux_2_5_x86_64")
    source += "extern int gloo_stub(void);\nint h(void) { return gloo_stub(); }\n"
    wheel = _wheel(tmp_path, _build(tmp_path, "uses_gloo", source, link=[tf, gloo]),
                   "manylinux_2_5_x86_64")
    assert _check(wheel)[1] == ["needs libnot_bundled_stub.so.1 from the machine"]


def _cross_clang():
    for name in ("clang", "clang-19", "clang-18", "clang-17", "clang-16"):
        if shutil.which(name) and shutil.which("ld.lld" + name[len("clang"):]):
            return name
    return None


@pytest.mark.skipif(_cross_clang() is None, reason="no clang and lld to build an aarch64 object")
def test_an_aarch64_wheel_passes(tmp_path):
    """An aarch64 object (clang --target=aarch64-linux-gnu, no libc: it only has to be an
    aarch64 ELF file) in a manylinux_2_17_aarch64 wheel: auditwheel reads it on this machine,
    and the check passes it."""
    clang = _cross_clang()
    src = tmp_path / "a64.c"
    src.write_text(BUILD_INFO + "int f(int x) { return x + 1; }\n")
    out = str(tmp_path / "a64.so")
    res = run([clang, "--target=aarch64-linux-gnu", "-fuse-ld=lld" + clang[len("clang"):],
               "-nostdlib", "-shared", "-fPIC", "-o", out, str(src)], 60)
    assert res.ok, res.describe()
    assert check_wheels.required_versions(out)["machine"] == "EM_AARCH64"
    row, problems = _check(_wheel(tmp_path, out, "manylinux_2_17_aarch64"))
    assert (problems, row["tag"]) == ([], "manylinux_2_17_aarch64")
