#!/usr/bin/env python3
"""Checks release wheels (tools/release/build_wheels.sh runs it) or one built library.

    tools/release/check_wheels.py dist/tf_hvd-*.whl              # a table; exit 1 if any wheel fails
    tools/release/check_wheels.py --floor 2.31 dist/*.whl        # another glibc floor (FLOORS below)
    tools/release/check_wheels.py --library tf_hvd/_hvd.so       # a development build: no MPI/CUDA linked

For each wheel (x86_64 or aarch64):
  - the floor: every ELF file in it (tf_hvd/_hvd.so, tf_hvd.libs/*) requires (.gnu.version_r)
    no GLIBC_ version above the glibc floor (default 2.28) and no GLIBCXX_/CXXABI_ version
    above the libstdc++ of that glibc's GCC (2.28: GCC 8, GLIBCXX_3.4.25, CXXABI_1.3.11);
    versions the wheel's own libraries provide do not count;
  - auditwheel show: a manylinux tag no higher than the floor, the wheel's file name tagged
    between auditwheel's tag and the floor (the build tags with the floor; a tag below what
    the files need, a rename, does not count), and no library needed from
    the machine beyond glibc, libstdc++/libgcc and TensorFlow's own (tf_hvd.libs/ holds the
    rest); every ELF file built for the file name's architecture;
  - the native library: no MPI, CUDA or NCCL among its needed libraries and no unbound
    MPI_*, cuda* or nccl* call (they are loaded at run time), and the TensorFlow it records is the minor
    that the wheel's version label (+tf2.21) and its extras name;
  - metadata: the extras tensorflow, tensorflow-cpu and and-cuda pin that minor;
  - tf_hvd/_floor.txt (the glibc floor `import tf_hvd` checks): the file name tag's glibc;
  - size: under 25 MB.
The table's glibc, GLIBCXX and CXXABI columns are the highest versions the wheel's files
require. --library reports them for one library and fails on them only with --floor.
Uses pyelftools and auditwheel (the development venv has both: tools/requirements.txt).
"""
import argparse
import email.parser
import json
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
    r"^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64|ld-linux-aarch64|libstdc\+\+|libgcc_s)"
    r"\.so\.\d+$"
    r"|^libtensorflow_(framework|cc)\.so\.2$")
NEVER_LINKED = re.compile(r"libmpi|libmpich|libcudart|libnccl|libcuda\.")
EXTRAS = ("tensorflow", "tensorflow-cpu", "and-cuda")

# A glibc floor -> the libstdc++ of the GCC that distributions with that glibc ship
# (GLIBCXX_, CXXABI_): CentOS 7 (GCC 4.8), RHEL 8 (GCC 8), Ubuntu 20.04/Debian 11 (GCC 9/10's
# runtime is 3.4.28), RHEL 9 (GCC 11), Ubuntu 22.04 (GCC 12).
FLOORS = {
    "2.17": ("3.4.19", "1.3.7"),
    "2.28": ("3.4.25", "1.3.11"),
    "2.31": ("3.4.28", "1.3.12"),
    "2.34": ("3.4.29", "1.3.13"),
    "2.35": ("3.4.30", "1.3.13"),
}
DEFAULT_FLOOR = "2.28"
FLOOR_FILE = "_floor.txt"  # in a wheel's tf_hvd/: "glibc 2.28", written by the wheel build
# Version nodes of glibc whose name is not a release: the release that brought them.
GLIBC_NAMED = {"GLIBC_ABI_DT_RELR": (2, 36)}
SYMBOLS_NAMED = 5  # symbols named per version found above the floor
# The wheel file name's architecture -> the ELF e_machine its files must have.
MACHINES = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64"}
# Legacy manylinux tags (PEP 599/571/513) and the glibc they stand for.
LEGACY_TAGS = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}


def _vtuple(text):
    return tuple(int(x) for x in text.split("."))


def _vtext(version):
    return ".".join(str(x) for x in version) if version else "-"


class Floor(object):
    """The highest GLIBC_, GLIBCXX_ and CXXABI_ versions a file may require."""

    def __init__(self, glibc):
        if glibc not in FLOORS:
            raise ValueError("no floor %s (known: %s)" % (glibc, ", ".join(sorted(
                FLOORS, key=_vtuple))))
        self.glibc = _vtuple(glibc)
        self.limits = {"GLIBC": self.glibc, "GLIBCXX": _vtuple(FLOORS[glibc][0]),
                       "CXXABI": _vtuple(FLOORS[glibc][1])}

    def __str__(self):
        return "glibc %s, GLIBCXX_%s, CXXABI_%s" % tuple(
            _vtext(self.limits[k]) for k in ("GLIBC", "GLIBCXX", "CXXABI"))


def required_versions(path, provided=()):
    """What the ELF file at ``path`` requires of glibc and libstdc++ (its .gnu.version_r):
    a dict with "machine" (e_machine), "GLIBC", "GLIBCXX", "CXXABI" (each a dict
    {version tuple: sorted undefined symbols bound to that version, [] when no symbol names
    it}) and "other" ({name: symbols} for glibc version nodes that are no release, such as
    GLIBC_PRIVATE). Requirements on a library in ``provided`` (sonames the wheel bundles)
    are left out: the wheel brings that version itself. Weak requirements are left out too
    (the loader accepts their absence)."""
    found = {"GLIBC": {}, "GLIBCXX": {}, "CXXABI": {}, "other": {}}
    with open(path, "rb") as f:
        elf = ELFFile(f)
        found["machine"] = elf["e_machine"]
        verneed = elf.get_section_by_name(".gnu.version_r")
        if verneed is None:
            return found
        wanted = {}  # vna_other -> (family, version key)
        for entry, auxes in verneed.iter_versions():
            if entry.name in provided:
                continue
            for aux in auxes:
                if aux["vna_flags"] & 0x2:  # VER_FLG_WEAK
                    continue
                m = re.match(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$", aux.name)
                if m:
                    key = (m.group(1), _vtuple(m.group(2)))
                elif aux.name in GLIBC_NAMED:
                    key = ("GLIBC", GLIBC_NAMED[aux.name])
                elif aux.name.startswith("GLIBC_"):
                    key = ("other", aux.name)
                else:
                    continue
                found[key[0]].setdefault(key[1], [])
                wanted[aux["vna_other"]] = key
        versym = elf.get_section_by_name(".gnu.version")
        dynsym = elf.get_section_by_name(".dynsym")
        if versym is None or dynsym is None:
            return found
        for i, sym in enumerate(dynsym.iter_symbols()):
            if sym["st_shndx"] != "SHN_UNDEF" or not sym.name:
                continue
            index = versym.get_symbol(i)["ndx"]
            key = wanted.get(index & 0x7FFF) if isinstance(index, int) else None
            if key:
                found[key[0]][key[1]].append(sym.name)
    for family in ("GLIBC", "GLIBCXX", "CXXABI", "other"):
        for symbols in found[family].values():
            symbols.sort()
    return found


def highest(found, family):
    """The highest version of ``family`` (GLIBC, GLIBCXX, CXXABI) in one or more
    required_versions() results, or None."""
    results = found if isinstance(found, list) else [found]
    versions = [v for r in results for v in r[family]]
    return max(versions) if versions else None


def floor_problems(found, floor):
    """What ``found`` (required_versions() of one file) requires above ``floor``: one line
    a version ("requires GLIBC_2.34, above the floor GLIBC_2.28: dlopen, ..."), for the
    caller to prefix with the file's name."""
    problems = []
    for family in ("GLIBC", "GLIBCXX", "CXXABI"):
        limit = floor.limits[family]
        for version in sorted(v for v in found[family] if v > limit):
            what = "%s_%s" % (family, _vtext(version))
            if family == "GLIBC" and version in GLIBC_NAMED.values():
                what = [n for n, v in GLIBC_NAMED.items() if v == version][0] + \
                    " (glibc %s)" % _vtext(version)
            problems.append("requires %s, above the floor %s_%s: %s" % (
                what, family, _vtext(limit), _name_symbols(found[family][version])))
    for node, symbols in sorted(found["other"].items()):
        problems.append("requires %s, which no other glibc build provides: %s" % (
            node, _name_symbols(symbols)))
    return problems


def _name_symbols(symbols):
    if not symbols:
        return "(no symbol; the version is needed by its own entry in .gnu.version_r)"
    text = ", ".join(symbols[:SYMBOLS_NAMED])
    if len(symbols) > SYMBOLS_NAMED:
        text += " and %d more" % (len(symbols) - SYMBOLS_NAMED)
    return text


def parse_tag(tag):
    """"manylinux_2_28_x86_64" (or a legacy "manylinux2014_x86_64") -> ((2, 28), "x86_64"),
    or None for a tag that is no manylinux tag."""
    m = re.match(r"^manylinux_(\d+)_(\d+)_(x86_64|aarch64)$", tag)
    if m:
        return (int(m.group(1)), int(m.group(2))), m.group(3)
    m = re.match(r"^(manylinux2014|manylinux2010|manylinux1)_(x86_64|aarch64)$", tag)
    if m:
        return LEGACY_TAGS[m.group(1)], m.group(2)
    return None


def filename_tags(path):
    """The platform tags in a wheel's file name (several for a compressed tag set)."""
    name = os.path.basename(path)
    if not name.endswith(".whl") or name.count("-") < 4:
        return []
    return name[:-len(".whl")].split("-")[-1].split(".")


def tag_problems(path, auditwheel_tag, floor):
    """Whether the wheel's file name carries a tag between the one auditwheel found
    (``auditwheel_tag``: "manylinux_2_27_x86_64", the lowest the files allow) and ``floor``:
    the release build tags every wheel with the floor itself (auditwheel repair --plat), one
    promise for the whole matrix; a tag below what the files need is a rename.
    Returns (architecture of the file name or None, problems)."""
    problems = []
    tags = filename_tags(path)
    parsed = [parse_tag(t) for t in tags]
    if not tags or None in parsed:
        return None, ["the file name's platform tag %s is not a manylinux tag for x86_64 or "
                      "aarch64" % ".".join(tags)]
    arches = {arch for _, arch in parsed}
    if len(arches) > 1:
        problems.append("the file name names several architectures: %s" % ".".join(tags))
    arch = sorted(arches)[0]
    claimed = min(glibc for glibc, _ in parsed)
    audited = parse_tag(auditwheel_tag) if auditwheel_tag else None
    if audited is None:
        return arch, problems
    if audited[1] != arch:
        problems.append("auditwheel says %s, but the file name is for %s" % (
            auditwheel_tag, arch))
    if claimed < audited[0]:
        problems.append("the file name's tag %s is below auditwheel's %s (a tag must come from "
                        "the files, not a rename)" % (".".join(tags), auditwheel_tag))
    if audited[0] > floor.glibc:
        problems.append("auditwheel's tag %s is above the floor manylinux_%d_%d" % (
            auditwheel_tag, floor.glibc[0], floor.glibc[1]))
    elif claimed > floor.glibc:
        problems.append("the file name's tag %s is above the floor manylinux_%d_%d" % (
            ".".join(tags), floor.glibc[0], floor.glibc[1]))
    return arch, problems


def library_problems(path, bundled=None):
    """What is wrong with the shared library at ``path`` (an empty list when nothing);
    ``bundled``: the libraries beside it in the wheel, None for a development build (which
    may need the machine's Gloo)."""
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


def recorded_floor_problems(path, auditwheel_tag, floor, claimed=None):
    """The glibc floor the wheel records for ``import tf_hvd`` (tf_hvd/_floor.txt, "glibc
    2.28"; tf_hvd/platform_floor.py reads it) must be there, no lower than what auditwheel
    found (else an older system gets the loader's failure), no higher than ``floor`` and
    equal to the file name's tag ``claimed`` (glibc, e.g. (2, 28)): pip admits by the tag, so
    import must refuse exactly below it."""
    try:
        with open(path) as f:
            words = [line.split("#", 1)[0].split() for line in f]
    except OSError:
        return ["no tf_hvd/%s (the glibc floor import tf_hvd checks)" % FLOOR_FILE]
    recorded = [w[1] for w in words if len(w) == 2 and w[0] == "glibc"
                and re.match(r"^\d+\.\d+$", w[1])]
    if not recorded:
        return ["tf_hvd/%s records no glibc floor ('glibc 2.28')" % FLOOR_FILE]
    problems = []
    audited = parse_tag(auditwheel_tag or "")
    if audited and _vtuple(recorded[0]) < audited[0]:
        problems.append("tf_hvd/%s records glibc %s, below auditwheel's %s" % (
            FLOOR_FILE, recorded[0], auditwheel_tag))
    if _vtuple(recorded[0]) > floor.glibc:
        problems.append("tf_hvd/%s records glibc %s, above the floor %s" % (
            FLOOR_FILE, recorded[0], _vtext(floor.glibc)))
    if claimed is not None and _vtuple(recorded[0]) != claimed:
        problems.append("tf_hvd/%s records glibc %s, but the file name's tag says %s" % (
            FLOOR_FILE, recorded[0], _vtext(claimed)))
    return problems


def auditwheel_tag(auditwheel, path):
    """(the tag auditwheel's reading of the versioned symbols gives the wheel, what it said).

    That is `auditwheel show`'s "constrains the platform tag to" (``sym_tag`` in its JSON):
    the tag `auditwheel repair` writes. Its overall tag is no use here: `show` knows nothing
    of repair's --exclude, so TensorFlow's libraries, which the wheel leaves to the installed
    TensorFlow, make that linux_x86_64 (what the wheel needs from the machine is checked
    from its files instead: library_problems)."""
    show = subprocess.run([auditwheel, "show", "--json", path], capture_output=True, text=True)
    try:
        report = json.loads(show.stdout)
    except ValueError:  # an auditwheel without --json (before 6.3): its sentences
        show = subprocess.run([auditwheel, "show", path], capture_output=True, text=True)
        text = " ".join((show.stdout + show.stderr).split())
        constrained = re.search(r'constrains the platform tag to "([^"]+)"', text)
        overall = re.search(r'is consistent with the following platform tag: "([^"]+)"', text)
        # Left unsaid when the symbols allow auditwheel's oldest policy.
        tag = constrained.group(1) if constrained else overall.group(1) if overall and \
            parse_tag(overall.group(1)) else None
        return (tag if show.returncode == 0 else None), text
    text = " ".join((report.get("error") or show.stderr or "").split())
    return (report.get("sym_tag") if show.returncode == 0 else None), text


def wheel_elf_files(root):
    """The ELF files under an unpacked wheel at ``root``, as their paths inside the wheel."""
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            full = os.path.join(folder, name)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            with open(full, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    found.append(os.path.relpath(full, root).replace(os.sep, "/"))
    return sorted(found)


def check_wheel(path, auditwheel, floor=None):
    """(row of facts, problems) for one wheel, held to ``floor`` (a Floor; default 2.28's)."""
    floor = floor or Floor(DEFAULT_FLOOR)
    problems = []
    row = {"wheel": os.path.basename(path), "MB": "%.1f" % (os.path.getsize(path) / 2**20),
           "tag": "?", "glibc": "?", "GLIBCXX": "?", "CXXABI": "?", "built against": "?",
           "GPU": "?", "bundled": 0}
    if os.path.getsize(path) > MAX_BYTES:
        problems.append("larger than %d MB" % (MAX_BYTES // 2**20))
    tag, said = auditwheel_tag(auditwheel, path)
    if not tag or not parse_tag(tag):
        problems.append("auditwheel show: %s" % (said[-400:] or "no manylinux tag"))
        tag = None
    else:
        row["tag"] = tag
    arch, tag_found = tag_problems(path, tag, floor)
    problems += tag_found
    with tempfile.TemporaryDirectory() as tmp, zipfile.ZipFile(path) as z:
        z.extractall(tmp)
        bundled = set(os.listdir(os.path.join(tmp, "tf_hvd.libs"))) if os.path.isdir(
            os.path.join(tmp, "tf_hvd.libs")) else set()
        row["bundled"] = len(bundled)
        found = []
        for name in wheel_elf_files(tmp):
            versions = required_versions(os.path.join(tmp, name), provided=bundled)
            found.append(versions)
            problems += ["%s %s" % (name, p) for p in floor_problems(versions, floor)]
            if arch and versions["machine"] != MACHINES[arch]:
                problems.append("%s is built for %s, but the file name says %s" % (
                    name, versions["machine"], arch))
        for family in ("GLIBC", "GLIBCXX", "CXXABI"):
            row["glibc" if family == "GLIBC" else family] = _vtext(highest(found, family))
        claimed = [parse_tag(t) for t in filename_tags(path)]
        claimed = min(c[0] for c in claimed) if claimed and None not in claimed else None
        problems += recorded_floor_problems(os.path.join(tmp, "tf_hvd", FLOOR_FILE), tag, floor,
                                            claimed)
        meta_name = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")][0]
        meta = email.parser.Parser().parsestr(z.read(meta_name).decode())
        declared = []
        for name in z.namelist():
            if name.endswith(".dist-info/WHEEL"):
                wheel_file = email.parser.Parser().parsestr(z.read(name).decode())
                declared = wheel_file.get_all("Tag") or []
        lib = os.path.join(tmp, "tf_hvd", "_hvd.so")
        if not os.path.isfile(lib):
            return row, problems + ["no tf_hvd/_hvd.so"]
        problems += library_problems(lib, bundled)
        recorded = _recorded_tensorflow(lib)
        row["built against"] = recorded or "?"
        row["GPU"] = "yes" if b"ncclCommInitRankConfig" in open(lib, "rb").read() else "no"
    platforms = sorted({t.rsplit("-", 1)[-1] for t in declared})
    if platforms != sorted(filename_tags(path)):
        problems.append("the WHEEL file's tags (%s) are not the file name's (%s)" % (
            ", ".join(platforms), ".".join(filename_tags(path))))
    label = re.search(r"\+tf(\d+\.\d+)$", meta["Version"] or "")
    if not label or label.group(1) != _minor(recorded):
        problems.append("version %s does not name the TensorFlow minor it was built "
                        "against (%s)" % (meta["Version"], recorded))
    requires = meta.get_all("Requires-Dist") or []
    minor = _minor(recorded)
    for extra in EXTRAS:
        pins = [r for r in requires if 'extra == "%s"' % extra in r]
        want = "<%s.%d" % (minor.split(".")[0], int(minor.split(".")[1]) + 1) if minor else None
        if not pins or not want or want not in pins[0]:
            problems.append("extra [%s] does not pin TensorFlow %s: %s" % (
                extra, minor, pins))
    return row, problems


def check_library(path, floor=None):
    """(lines to print, problems) for one development build; the floor only when given."""
    problems = library_problems(path)
    found = required_versions(path)
    lines = ["%s: requires glibc %s, GLIBCXX %s, CXXABI %s" % (
        path, _vtext(highest(found, "GLIBC")), _vtext(highest(found, "GLIBCXX")),
        _vtext(highest(found, "CXXABI")))]
    if floor is not None:
        problems += floor_problems(found, floor)
    return lines, problems


COLUMNS = ["wheel", "tag", "glibc", "GLIBCXX", "CXXABI", "built against", "GPU", "bundled",
           "MB", "verdict"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheels", nargs="*")
    parser.add_argument("--library", help="check only this built library")
    parser.add_argument("--floor", choices=sorted(FLOORS, key=_vtuple),
                        help="the glibc floor (default %s for wheels; none for --library); "
                             "the GLIBCXX_/CXXABI_ limits follow from it" % DEFAULT_FLOOR)
    args = parser.parse_args(argv)
    if args.library:
        lines, problems = check_library(args.library, Floor(args.floor) if args.floor else None)
        for line in lines:
            print(line)
        for p in problems:
            print("%s: %s" % (args.library, p))
        print("%s: %s" % (args.library, "FAILED" if problems else "ok"))
        return 1 if problems else 0
    floor = Floor(args.floor or DEFAULT_FLOOR)
    auditwheel = os.path.join(os.path.dirname(sys.executable), "auditwheel")
    failed = 0
    rows = []
    for wheel in args.wheels:
        row, problems = check_wheel(wheel, auditwheel, floor)
        row["verdict"] = "ok" if not problems else "FAILED"
        rows.append(row)
        for p in problems:
            print("%s: %s" % (row["wheel"], p), file=sys.stderr)
        failed += bool(problems)
    if rows:
        print("floor: %s" % floor)
        widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in COLUMNS]
        print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)))
        for r in rows:
            print("  ".join(str(r[c]).ljust(w) for c, w in zip(COLUMNS, widths)))
    return 1 if failed or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
