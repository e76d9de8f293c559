"""Which TensorFlow the native library was built against, and the check that the one
this process imported is the same, done before ``tf.load_op_library`` touches the file.

A TensorFlow op library only works with the TensorFlow minor it was compiled against (C++
ABI, internal symbols; patch releases of one minor keep them, as tensorflow-text's wheels
rely on). Loading it into another one fails deep inside the dynamic loader
(``undefined symbol: _ZN10tensorflow...``); this check fails first, naming both versions:

    >>> check_library("/path/to/tf_hvd/_hvd.so")   # doctest: +SKIP
    TensorFlowVersionMismatchError: tf_hvd's native library ... was built against
    TensorFlow 2.21.0 (C++11 ABI 1), but this process imported TensorFlow 2.20.0 ...

The library carries the facts itself (cc/tensorflow/build_info.cc): one string
``tf_hvd-build-info:tensorflow=<version>;cxx11_abi=<0|1>;compiler=<...>;end``.
"""

import mmap
import re

MARKER = b"tf_hvd-build-info:"
_END = b";end"


class TensorFlowVersionMismatchError(ImportError):
    """tf_hvd's native library was built against another TensorFlow than the one imported."""


def read_library_info(path):
    """The build facts recorded in the library at ``path`` as a dict (``tensorflow``,
    ``cxx11_abi``, ``compiler``), or None for a library that records none."""
    with open(path, "rb") as f:
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # empty file
            return None
        with data:
            start = data.find(MARKER)
            if start < 0:
                return None
            end = data.find(_END, start, start + 4096)
            if end < 0:
                return None
            text = data[start + len(MARKER):end].decode("ascii", "replace")
    return dict(item.partition("=")[::2] for item in text.split(";") if item)


def _version_key(version):
    """(major, minor, patch, suffix) with the suffix's punctuation dropped, so that the
    C header's "2.21.0-rc1" and Python's "2.21.0rc1" compare equal."""
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)(.*)$", version or "")
    if not m:
        return (version,)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)),
            re.sub(r"[^0-9a-z]", "", m.group(4).lower()))


def running_tensorflow():
    """(version, C++11 ABI flag as "0"/"1" or None, location) of the imported TensorFlow."""
    import tensorflow as tf
    abi = None
    for flag in tf.sysconfig.get_compile_flags():
        if flag.startswith("-D_GLIBCXX_USE_CXX11_ABI="):
            abi = flag.split("=", 1)[1]
    return tf.__version__, abi, getattr(tf, "__file__", "?")


def check_library(path, running=None):
    """Raises TensorFlowVersionMismatchError if the library at ``path`` was built against
    another TensorFlow (version or C++11 ABI) than ``running`` (default: the imported
    one, see running_tensorflow()). A library that records nothing is not checked."""
    info = read_library_info(path)
    if not info or "tensorflow" not in info:
        return
    version, abi, where = running or running_tensorflow()
    built_abi = info.get("cxx11_abi")
    same_version = _version_key(info["tensorflow"])[:2] == _version_key(version)[:2]
    same_abi = abi is None or built_abi in (None, "") or built_abi == abi
    if same_version and same_abi:
        return
    raise TensorFlowVersionMismatchError(
        "tf_hvd's native library %s was built against TensorFlow %s (C++11 ABI %s), but "
        "this process imported TensorFlow %s (C++11 ABI %s, from %s). Install the tf_hvd "
        "wheel for TensorFlow %s (%s), or rebuild tf_hvd against this TensorFlow "
        "(`pip install .` or tools/build/build_lib.sh in the source tree), or use "
        "TensorFlow %s." % (
            path, info["tensorflow"], built_abi or "?", version, abi or "?", where,
            _minor(version), wheel_for(version), _minor(info["tensorflow"])))


def _minor(version):
    key = _version_key(version)
    return "%s.%s" % key[:2] if len(key) > 1 else version


def wheel_for(tensorflow_version):
    """The pip requirement of the tf_hvd wheel built for ``tensorflow_version``'s minor:

        >>> wheel_for("2.20.0")   # doctest: +SKIP
        'pip install "tf_hvd==0.1.0+tf2.20" --find-links <the directory of the wheels>'
    """
    try:
        from importlib import metadata
        base = metadata.version("tf_hvd").split("+", 1)[0]
    except Exception:  # a source tree that was never installed
        base = "0.1.0"
    return 'pip install "tf_hvd==%s+tf%s" --find-links <the directory of the wheels>' % (
        base, _minor(tensorflow_version))
