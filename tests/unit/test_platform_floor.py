"""A release wheel on a system older than its floor (tf_hvd/platform_floor.py): the library's
recorded glibc floor (tf_hvd/_floor.txt, written by the wheel build) is compared with the
running glibc before anything is loaded, and a loader failure on a missing GLIBC_/GLIBCXX_
version becomes one ImportError naming what was wanted and what was found. No old machine
is needed: the glibc reading is replaced, and the loader's failure is a real one, on tiny
libraries linked against stand-ins that define versions no system has (GLIBC_2.99,
GLIBCXX_3.4.99)."""
import json
import os
import shutil

import pytest

from jobrunner import REPO, run, run_python
from tf_hvd import platform_floor

LIBRARY = os.path.join(REPO, "tf_hvd", "_hvd.so")
HELP = ("Install a tf_hvd wheel built for this system, or build tf_hvd from source on it "
        "(docs/install.md lists the systems the wheels support and how to build).")


def _floor_dir(tmp_path, text):
    (tmp_path / "_floor.txt").write_text(text)
    return str(tmp_path / "_hvd.so")


def test_the_floor_file_is_read_and_a_source_build_has_none(tmp_path):
    assert platform_floor.read_floor(str(tmp_path)) == {}
    _floor_dir(tmp_path, "# the wheel build's\nglibc 2.28\n\nGLIBCXX 3.4.25  # GCC 8\nnonsense\n")
    assert platform_floor.read_floor(str(tmp_path)) == {"glibc": "2.28", "glibcxx": "3.4.25"}
    # A library with no record beside it (a source build): no check.
    (tmp_path / "elsewhere").mkdir()
    platform_floor.check_library(str(tmp_path / "elsewhere" / "_hvd.so"), glibc="2.5")


def test_the_running_glibc_is_read():
    version = platform_floor.running_glibc()
    assert version and platform_floor._key(version) >= (2, 17), version
    assert os.confstr("CS_GNU_LIBC_VERSION") == "glibc " + version


def test_a_glibc_older_than_the_floor_is_refused_naming_both(tmp_path):
    path = _floor_dir(tmp_path, "glibc 2.28\n")
    with pytest.raises(platform_floor.SystemTooOldError) as e:
        platform_floor.check_library(path, glibc="2.17")
    assert isinstance(e.value, ImportError)
    assert str(e.value) == (
        "tf_hvd's native library %s needs glibc 2.28 or newer (manylinux_2_28), but this "
        "system has glibc 2.17. %s" % (path, HELP))
    platform_floor.check_library(path, glibc="2.28")
    platform_floor.check_library(path, glibc="2.36")
    platform_floor.check_library(path, glibc="2.100")  # numbers, not strings


def test_the_running_glibc_is_what_the_check_reads(tmp_path, monkeypatch):
    path = _floor_dir(tmp_path, "glibc 2.28\n")
    monkeypatch.setattr(platform_floor, "running_glibc", lambda: "2.27")
    with pytest.raises(platform_floor.SystemTooOldError, match=r"has glibc 2\.27\. "):
        platform_floor.check_library(path)
    monkeypatch.setattr(platform_floor, "running_glibc", lambda: None)  # musl: not checked
    platform_floor.check_library(path)


def test_a_missing_glibc_version_from_the_loader_is_explained():
    error = OSError("/lib64/libc.so.6: version `GLIBC_2.34' not found (required by "
                    "/site/tf_hvd.libs/libgloo-1a2b.so)")
    explained = platform_floor.explain_load_error("/site/tf_hvd/_hvd.so", error, glibc="2.28")
    assert isinstance(explained, platform_floor.SystemTooOldError)
    assert str(explained) == (
        "tf_hvd's native library /site/tf_hvd/_hvd.so cannot be loaded on this system: "
        "/site/tf_hvd.libs/libgloo-1a2b.so needs GLIBC_2.34, which this system's glibc does "
        "not provide (found: glibc 2.28). %s The loader said: /lib64/libc.so.6: version "
        "`GLIBC_2.34' not found (required by /site/tf_hvd.libs/libgloo-1a2b.so)" % HELP)


def test_a_missing_libstdcxx_version_names_the_libstdcxx_found():
    error = ImportError("/lib64/libstdc++.so.6: version `GLIBCXX_3.4.30' not found "
                        "(required by /site/tf_hvd/_hvd.so)")
    explained = platform_floor.explain_load_error(
        "/site/tf_hvd/_hvd.so", error, glibc="2.34",
        libstdcxx=("/lib64/libstdc++.so.6.0.29", "3.4.29"))
    assert str(explained) == (
        "tf_hvd's native library /site/tf_hvd/_hvd.so cannot be loaded on this system: "
        "/site/tf_hvd/_hvd.so needs GLIBCXX_3.4.30, which this system's libstdc++ does not "
        "provide (found: glibc 2.34, libstdc++ up to GLIBCXX_3.4.29 "
        "(/lib64/libstdc++.so.6.0.29)). %s The loader said: /lib64/libstdc++.so.6: version "
        "`GLIBCXX_3.4.30' not found (required by /site/tf_hvd/_hvd.so)" % HELP)
    # No "required by": the library being loaded is named.
    cxxabi = OSError("/x/libstdc++.so.6: version `CXXABI_1.3.13' not found")
    assert "/site/tf_hvd/_hvd.so needs CXXABI_1.3.13, which this system's libstdc++ does " \
           "not provide (found: glibc 2.34, libstdc++ up to GLIBCXX_3.4.29 (/l/libstdc++.so.6))" \
        in str(platform_floor.explain_load_error("/site/tf_hvd/_hvd.so", cxxabi, glibc="2.34",
                                                 libstdcxx=("/l/libstdc++.so.6", "3.4.29")))


def test_other_load_errors_are_left_alone():
    for error in (OSError("/x/_hvd.so: undefined symbol: _ZN10tensorflow8OpKernelD2Ev"),
                  OSError("libfoo.so.1: cannot open shared object file"),
                  OSError("version `OPENSSL_3.0.0' not found")):
        assert platform_floor.explain_load_error("/x/_hvd.so", error) is None


def _stand_in(tmp_path, soname, node, symbol):
    """A library linked against a stand-in for ``soname`` that defines ``symbol`` at
    version ``node``; at run time the real ``soname`` is loaded, which lacks it."""
    (tmp_path / "stub.c").write_text("int %s(void) { return 0; }\n" % symbol)
    (tmp_path / "stub.map").write_text("%s { global: %s; local: *; };\n" % (node, symbol))
    (tmp_path / "probe.c").write_text(
        "extern int %s(void);\nint probe(void) { return %s(); }\n" % (symbol, symbol))
    stub, probe = str(tmp_path / ("stub-%s.so" % node)), str(tmp_path / ("probe-%s.so" % node))
    for cmd in (["gcc", "-shared", "-fPIC", "-nostdlib", "-o", stub, str(tmp_path / "stub.c"),
                 "-Wl,-soname," + soname, "-Wl,--version-script," + str(tmp_path / "stub.map")],
                ["gcc", "-shared", "-fPIC", "-o", probe, str(tmp_path / "probe.c"), stub]):
        res = run(cmd, 60)
        assert res.ok, res.describe()
    return probe


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
@pytest.mark.skipif(not os.path.exists(LIBRARY), reason="tf_hvd/_hvd.so is not built")
def test_first_use_fails_with_one_import_error_not_a_loader_failure(tmp_path):
    """Through tf_hvd's loading (TF_HVD_LIBRARY names each library), with this system's
    glibc read as 2.27: the release library's floor (_floor.txt beside it) refuses it
    before the loader runs; a library whose loader failure is real (GLIBC_2.99, or
    GLIBCXX_3.4.99, not found) is explained."""
    floored = tmp_path / "wheel"
    floored.mkdir()
    os.symlink(LIBRARY, str(floored / "_hvd.so"))
    (floored / "_floor.txt").write_text("glibc 2.28\n")
    cases = [str(floored / "_hvd.so"),
             _stand_in(tmp_path, "libc.so.6", "GLIBC_2.99", "tf_hvd_floor_probe"),
             _stand_in(tmp_path, "libstdc++.so.6", "GLIBCXX_3.4.99", "tf_hvd_floor_probe_cxx")]
    out = run_python("""
        import json, os, sys
        import tensorflow as tf
        from tf_hvd import platform_floor
        platform_floor.running_glibc = lambda: "2.27"
        for path in %r:
            os.environ["TF_HVD_LIBRARY"] = path
            try:
                import tf_hvd as hvd
                hvd.init()
            except ImportError as e:
                print("RESULT", json.dumps([type(e).__name__, str(e)]))
            else:
                print("RESULT loaded")
            sys.modules.pop("tf_hvd._library", None)
        print("LIBSTDCXX", json.dumps(platform_floor.running_libstdcxx()))
        """ % (cases,), timeout=180)
    results = [json.loads(line[len("RESULT "):]) for line in out.splitlines()
               if line.startswith("RESULT ")]
    assert len(results) == 3, out
    assert results[0] == ["SystemTooOldError", (
        "tf_hvd's native library %s needs glibc 2.28 or newer (manylinux_2_28), but this "
        "system has glibc 2.27. %s" % (cases[0], HELP))], out
    libc = results[1][1].split("The loader said: ")[1].split(":")[0]
    assert results[1] == ["SystemTooOldError", (
        "tf_hvd's native library {0} cannot be loaded on this system: {0} needs GLIBC_2.99, "
        "which this system's glibc does not provide (found: glibc 2.27). {1} The loader "
        "said: {2}: version `GLIBC_2.99' not found (required by {0})".format(
            cases[1], HELP, libc))], out
    stdcxx = json.loads([line for line in out.splitlines() if line.startswith("LIBSTDCXX ")][0]
                        [len("LIBSTDCXX "):])
    assert results[2][0] == "SystemTooOldError", out
    assert results[2][1].startswith(
        "tf_hvd's native library {0} cannot be loaded on this system: {0} needs "
        "GLIBCXX_3.4.99, which this system's libstdc++ does not provide (found: glibc 2.27, "
        "libstdc++ up to GLIBCXX_{1} ({2})). {3} The loader said: ".format(
            cases[2], stdcxx[1], stdcxx[0], HELP)), out
    assert "version `GLIBCXX_3.4.99' not found (required by %s)" % cases[2] in results[2][1]
