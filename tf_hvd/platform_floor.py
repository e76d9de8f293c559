"""The oldest system the native library runs on, checked before it is loaded, and the
loader's "version not found" said in words.

A release wheel is built for a glibc floor (manylinux_2_28: glibc 2.28 and GCC 8's
libstdc++) and records it beside the library, in ``tf_hvd/_floor.txt``, one
``<name> <version>`` a line (``#`` starts a comment)::

    glibc 2.28

A source build has no such file (it was built on the machine it runs on) and is not
checked. On a system older than the floor (a wheel forced on with ``pip install
--force``, or a copied environment) the check fails first, naming both glibc versions:

    >>> check_library("/site-packages/tf_hvd/_hvd.so", glibc="2.17")   # doctest: +SKIP
    SystemTooOldError: tf_hvd's native library /site-packages/tf_hvd/_hvd.so needs glibc
    2.28 or newer (manylinux_2_28), but this system has glibc 2.17. ...

and a load that still fails on a missing GLIBC_/GLIBCXX_/CXXABI_ version (a library with no
record, or libstdc++ older than glibc's GCC) is re-raised by ``explain_load_error`` with the
version wanted and the glibc and libstdc++ found, instead of the loader's one line.
"""

import os
import platform
import re

FLOOR_FILE = "_floor.txt"
_HELP = ("Install a tf_hvd wheel built for this system, or build tf_hvd from source on it "
         "(docs/install.md lists the systems the wheels support and how to build).")
_NOT_FOUND = re.compile(
    r"version [`']((GLIBC|GLIBCXX|CXXABI)_[0-9.]+)' not found(?: \(required by ([^)]+)\))?")


class SystemTooOldError(ImportError):
    """tf_hvd's native library needs a newer glibc or libstdc++ than this system has."""


def _key(version):
    return tuple(int(x) for x in re.findall(r"\d+", version or ""))


def read_floor(directory):
    """The floor recorded in ``directory``/_floor.txt as a dict ({"glibc": "2.28"}), or {}
    when there is no such file (a source build)."""
    try:
        with open(os.path.join(directory, FLOOR_FILE)) as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return {}
    floor = {}
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and re.match(r"^\d+(\.\d+)*$", words[1]):
            floor[words[0].lower()] = words[1]
    return floor


def running_glibc():
    """This process's glibc version ("2.36"), or None where the C library is not glibc."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        text = ""
    if text.startswith("glibc "):
        return text.split()[1]
    name, version = platform.libc_ver()
    return version if name == "glibc" and version else None


def running_libstdcxx():
    """(path, highest GLIBCXX_ version it provides, e.g. "3.4.30") of the libstdc++ loaded
    in this process (TensorFlow loads it), or None when none is."""
    try:
        with open("/proc/self/maps") as f:
            paths = [line.split(None, 5)[-1].strip() for line in f if "libstdc++.so" in line]
    except OSError:
        return None
    for path in paths:
        try:
            with open(path, "rb") as f:
                versions = set(re.findall(rb"GLIBCXX_(3\.4(?:\.\d+)?)\x00", f.read()))
        except OSError:
            continue
        if versions:
            return path, max((v.decode() for v in versions), key=_key)
    return None


def check_library(path, glibc=None):
    """Raises SystemTooOldError if the library at ``path`` records a glibc floor
    (_floor.txt beside it) above ``glibc`` (default: this process's, running_glibc()).
    Nothing is checked without a record, or where the C library is not glibc."""
    needed = read_floor(os.path.dirname(os.path.abspath(path))).get("glibc")
    found = glibc or running_glibc()
    if not needed or not found or _key(found) >= _key(needed):
        return
    raise SystemTooOldError(
        "tf_hvd's native library %s needs glibc %s or newer (manylinux_%s), but this system "
        "has glibc %s. %s" % (path, needed, needed.replace(".", "_"), found, _HELP))


def explain_load_error(path, error, glibc=None, libstdcxx=None):
    """A SystemTooOldError for ``error`` (what loading the library at ``path`` raised) when
    the loader missed a GLIBC_, GLIBCXX_ or CXXABI_ version, naming the version, the file
    that wanted it and the glibc (and, for a C++ version, libstdc++) found; else None.
    ``glibc``, ``libstdcxx``: as running_glibc() and running_libstdcxx() give them."""
    text = str(error)
    m = _NOT_FOUND.search(text)
    if not m:
        return None
    version, family, wanted_by = m.group(1), m.group(2), m.group(3) or path
    found = "glibc %s" % (glibc or running_glibc() or "?")
    if family != "GLIBC":
        stdcxx = libstdcxx or running_libstdcxx()
        found += ", libstdc++ %s" % ("up to GLIBCXX_%s (%s)" % (stdcxx[1], stdcxx[0])
                                     if stdcxx else "not found")
    what = "glibc" if family == "GLIBC" else "libstdc++"
    return SystemTooOldError(
        "tf_hvd's native library %s cannot be loaded on this system: %s needs %s, which this "
        "system's %s does not provide (found: %s). %s The loader said: %s" % (
            path, wanted_by, version, what, found, _HELP, " ".join(text.split())))
