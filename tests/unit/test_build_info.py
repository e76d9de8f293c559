"""The TensorFlow version check done before the native library is loaded
(tf_hvd/build_info.py, cc/tensorflow/build_info.cc)."""
import os

import pytest

from jobrunner import REPO, run_python

LIBRARY = os.path.join(REPO, "tf_hvd", "_hvd.so")


def _fake_library(tmp_path, tf_version, abi="1"):
    path = tmp_path / "_hvd.so"
    path.write_bytes(b"\x7fELF" + b"\0" * 100 + (
        "tf_hvd-build-info:tensorflow=%s;tensorflow_git=v%s;cxx11_abi=%s;compiler=12;end"
        % (tf_version, tf_version, abi)).encode() + b"\0" * 100)
    return str(path)


def test_the_built_library_records_the_tensorflow_it_was_built_against():
    import tensorflow as tf
    from tf_hvd import build_info
    info = build_info.read_library_info(LIBRARY)
    assert info["tensorflow"] == tf.__version__
    assert info["cxx11_abi"] in ("0", "1")
    build_info.check_library(LIBRARY)  # the running TensorFlow: no error


def test_other_tensorflow_version_is_refused_naming_both(tmp_path):
    from tf_hvd import build_info
    path = _fake_library(tmp_path, "2.99.0")
    with pytest.raises(build_info.TensorFlowVersionMismatchError) as e:
        build_info.check_library(path, running=("2.21.0", "1", "/site-packages/tensorflow"))
    assert isinstance(e.value, ImportError)
    msg = str(e.value)
    assert "built against TensorFlow 2.99.0" in msg, msg
    assert "imported TensorFlow 2.21.0" in msg, msg
    assert 'pip install "tf_hvd==' in msg and '+tf2.21"' in msg, msg
    assert path in msg


def test_a_patch_release_of_the_same_minor_is_accepted(tmp_path):
    """Wheels are built per TensorFlow minor (2.22.0rc0 for 2.22 until it is final)."""
    from tf_hvd import build_info
    build_info.check_library(_fake_library(tmp_path, "2.21.0"), running=("2.21.3", "1", "tf"))
    build_info.check_library(_fake_library(tmp_path, "2.22.0-rc0"),
                             running=("2.22.0", "1", "tf"))


def test_cxx11_abi_mismatch_is_refused(tmp_path):
    from tf_hvd import build_info
    path = _fake_library(tmp_path, "2.21.0", abi="0")
    with pytest.raises(build_info.TensorFlowVersionMismatchError, match=r"C\+\+11 ABI 0.*ABI 1"):
        build_info.check_library(path, running=("2.21.0", "1", "tf"))


def test_version_spellings_of_python_and_cpp_agree(tmp_path):
    from tf_hvd import build_info
    build_info.check_library(_fake_library(tmp_path, "2.22.0-rc1"),
                             running=("2.22.0rc1", "1", "tf"))
    with pytest.raises(build_info.TensorFlowVersionMismatchError):
        build_info.check_library(_fake_library(tmp_path, "2.2.10"), running=("2.21.0", "1", "tf"))


def test_library_without_a_record_is_not_checked(tmp_path):
    from tf_hvd import build_info
    path = tmp_path / "old.so"
    path.write_bytes(b"\x7fELF no record here")
    assert build_info.read_library_info(str(path)) is None
    build_info.check_library(str(path), running=("0.0.1", "1", "tf"))


def test_import_fails_with_both_versions_not_an_undefined_symbol(tmp_path):
    """tf_hvd's first use (hvd.init: the library is loaded lazily) with a library built
    for another TensorFlow (TF_HVD_LIBRARY points at it): the check runs before
    tf.load_op_library."""
    path = _fake_library(tmp_path, "2.99.0")
    out = run_python("""
        import tensorflow as tf
        import tf_hvd as hvd
        try:
            hvd.init()
        except ImportError as e:
            print("TYPE", type(e).__name__)
            print("MESSAGE", e)
            print("RUNNING", tf.__version__)
        else:
            print("imported")
        """, timeout=180, env={"TF_HVD_LIBRARY": path})
    assert "TYPE TensorFlowVersionMismatchError" in out, out
    running = [l for l in out.splitlines() if l.startswith("RUNNING ")][0].split()[1]
    message = [l for l in out.splitlines() if l.startswith("MESSAGE ")][0]
    assert "TensorFlow 2.99.0" in message and "TensorFlow %s" % running in message, message
    assert "undefined symbol" not in out
