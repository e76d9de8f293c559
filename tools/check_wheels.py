#!/usr/bin/env python3
"""Checks release wheels (tools/build_wheels.sh runs it) or one built library.

    tools/check_wheels.py dist/tf_hvd-*.whl          # a table; exit 1 if any wheel fails
    tools/check_wheels.py --library tf_hvd/_hvd.so   # a development build: no MPI/CUDA linked

For each wheel:
  - auditwheel show: a manylinux tag, and no library needed from the machine beyond glibc,
    libstdc++/libgcc and TensorFlow's own (tf_hvd.libs/ holds the rest);
  - the native library: no MPI, CUDA or NCCL among its needed libraries and no unbound
    MPI_*, cuda* or nccl* call (they are loaded at run time), and the TensorFlow it records is the minor
    that the wheel's version label (+tf2.21) and its extras name;
  - metadata: the extras tensorflow, tensorflow-cpu and and-cuda pin that minor;
  - size: under 25 MB.
Uses pyelftools and auditwheel (the development venv has both: tools/requirements.txt).
"""
import argparse
import email.parser
import os
import re
import subprocess
import sys
import tempfile
import zipfile

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

MAX_BYTES = 25 * 1024 * 1024
# Found on every Linux with TensorFlow: glibc's, the C++ runtime, TensorFlow's own.
ALLOWED_NEEDED = re.compile(
    r"^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|libstdc\+\+|libgcc_s)\.so\.\d+$"
    r"|^libtensorflow_(framework|cc)\.so\.2$")
NEVER_LINKED = re.compile(r"libmpi|libmpich|libcudart|libnccl|libcuda\.")
EXTRAS = ("tensorflow", "tensorflow-cpu", "and-cuda")


def library_problems(path, bundled=None):
    """What is wrong with the shared library at ``path`` (an empty list when nothing);
    ``bundled``: the libraries beside it in the wheel, None for a development build (which
    may need the machine's Gloo and cpp-httplib)."""
    problems = []
    with open(path, "rb") as f:
        elf = ELFFile(f)
        needed = [t.needed for s in elf.iter_sections() if isinstance(s, DynamicSection)
                  for t in s.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        unbound = sorted({
            sym.name for s in elf.iter_sections() if s.name == ".dynsym"
            for sym in s.iter_symbols()
            if re.match(r"(P?MPI_|cuda[A-Z]|nccl[A-Z])", sym.name)
            and sym["st_shndx"] == "SHN_UNDEF"})
        std_from_tf = _std_symbols_bound_to_tensorflow(elf)
    for lib in needed:
        if NEVER_LINKED.search(lib):
            problems.append("links %s (MPI, CUDA and NCCL are loaded at run time)" % lib)
        elif bundled is not None and not ALLOWED_NEEDED.match(lib) and lib not in bundled:
            problems.append("needs %s from the machine" % lib)
    if std_from_tf:
        problems.append("binds C++ standard library symbols to TensorFlow's exports (another "
                        "TensorFlow build, e.g. tensorflow-cpu, may lack them): " +
                        ", ".join(std_from_tf[:5]))
    if unbound:
        problems.append("unbound MPI/CUDA/NCCL calls (add them to cc/common/mpi/mpi_symbols.h, "
                        "cc/common/gpu/cuda_symbols.h or cc/common/nccl/nccl_symbols.h): " +
                        ", ".join(unbound))
    return problems


def _std_symbols_bound_to_tensorflow(elf):
    """Undefined std:: symbols whose required version is TensorFlow's ("tensorflow")."""
    versym = elf.get_section_by_name(".gnu.version")
    dynsym = elf.get_section_by_name(".dynsym")
    verneed = elf.get_section_by_name(".gnu.version_r")
    if versym is None or dynsym is None or verneed is None:
        return []
    names = {}
    for _, auxes in verneed.iter_versions():
        for aux in auxes:
            names[aux["vna_other"]] = aux.name
    found = []
    for i, sym in enumerate(dynsym.iter_symbols()):
        if sym["st_shndx"] != "SHN_UNDEF" or not sym.name.startswith(("_ZNSt", "_ZNKSt", "_ZSt")):
            continue
        index = versym.get_symbol(i)["ndx"]
        if isinstance(index, int) and names.get(index & 0x7FFF) == "tensorflow":
            found.append(sym.name)
    return sorted(found)


def _recorded_tensorflow(path):
    data = open(path, "rb").read()
    m = re.search(rb"tf_hvd-build-info:tensorflow=([^;]+);", data)
    return m.group(1).decode() if m else None


def _minor(version):
    m = re.match(r"(\d+)\.(\d+)", version or "")
    return "%s.%s" % m.groups() if m else None


def check_wheel(path, auditwheel):
    """(row of facts, problems) for one wheel."""
    problems = []
    row = {"wheel": os.path.basename(path), "MB": "%.1f" % (os.path.getsize(path) / 2**20)}
    if os.path.getsize(path) > MAX_BYTES:
        problems.append("larger than %d MB" % (MAX_BYTES // 2**20))
    show = subprocess.run([auditwheel, "show", path], capture_output=True, text=True)
    text = " ".join((show.stdout + show.stderr).split())
    tag = re.search(r'constrains the platform tag to "(manylinux_\d+_\d+_x86_64)"', text)
    row["tag"] = tag.group(1) if tag else "?"
    if show.returncode != 0 or not tag:
        problems.append("auditwheel show: %s" % text[-400:])
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as z:
        z.extractall(tmp)
        bundled = set(os.listdir(os.path.join(tmp, "tf_hvd.libs"))) if os.path.isdir(
            os.path.join(tmp, "tf_hvd.libs")) else set()
        row["bundled"] = len(bundled)
        lib = os.path.join(tmp, "tf_hvd", "_hvd.so")
        if not os.path.isfile(lib):
            return row, problems + ["no tf_hvd/_hvd.so"]
        problems += library_problems(lib, bundled)
        recorded = _recorded_tensorflow(lib)
        row["built against"] = recorded or "?"
        row["GPU"] = "yes" if b"ncclCommInitRankConfig" in open(lib, "rb").read() else "no"
        meta_name = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
    label = re.search(r"\+tf(\d+\.\d+)$", meta["Version"] or "")
    if not label or label.group(1) != _minor(recorded):
        problems.append("version %s does not name the TensorFlow minor it was built "
                        "against (%s)" % (meta["Version"], recorded))
    requires = meta.get_all("Requires-Dist") or []
    for extra in EXTRAS:
        pins = [r for r in requires if 'extra == "%s"' % extra in r]
        want = "<%s.%d" % (_minor(recorded).split(".")[0], int(_minor(recorded).split(".")[1]) + 1)
        if not pins or want not in pins[0]:
            problems.append("extra [%s] does not pin TensorFlow %s: %s" % (
                extra, _minor(recorded), pins))
    return row, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="*")
    parser.add_argument("--library", help="check only this built library")
    args = parser.parse_args()
    if args.library:
        problems = library_problems(args.library)
        for p in problems:
            print("%s: %s" % (args.library, p))
        print("%s: %s" % (args.library, "FAILED" if problems else "ok"))
        return 1 if problems else 0
    auditwheel = os.path.join(os.path.dirname(sys.executable), "auditwheel")
    failed = 0
    rows = []
    for wheel in args.wheels:
        row, problems = check_wheel(wheel, auditwheel)
        row["verdict"] = "ok" if not problems else "FAILED"
        rows.append(row)
        for p in problems:
            print("%s: %s" % (row["wheel"], p), file=sys.stderr)
        failed += bool(problems)
    if rows:
        cols = ["wheel", "tag", "built against", "GPU", "bundled", "MB", "verdict"]
        widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
        print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
        for r in rows:
            print("  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths)))
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
