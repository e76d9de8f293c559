"""Parsing of the host list given to tfhvdrun.

Two sources, same meaning as horovodrun:

* ``-H host1:2,host2:4`` (``--hosts``): comma-separated ``host[:slots]``; a host
  without ``:slots`` has one slot.
* ``--hostfile FILE``: one host per line, ``host slots=N`` (``host`` alone means one
  slot, ``host:N`` is accepted too); blank lines and ``#`` comments are ignored.

Both give an ordered list of :class:`HostSlots`. Ranks fill hosts in that order
(see ``placement.py``). Malformed input raises :class:`HostSpecError` whose message is
one line fit for ``tfhvdrun: error: ...``.
"""

import collections
import re

HostSlots = collections.namedtuple("HostSlots", ["name", "slots"])

# Host names, IPv4 addresses and user@host forms. Colons are the slot separator, so
# IPv6 literals are not accepted here.
_HOST_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-@]+$")
_SLOTS_RE = re.compile(r"^[0-9]+$")


class HostSpecError(ValueError):
    """A host list or host file that cannot be understood."""


def _check_name(name, where):
    if not name:
        raise HostSpecError("empty host name in %s" % where)
    if not _HOST_NAME_RE.match(name):
        raise HostSpecError("malformed host name %r in %s" % (name, where))
    return name


def _check_slots(text, where):
    if not _SLOTS_RE.match(text or ""):
        raise HostSpecError(
            "malformed slot count %r in %s (expected a positive integer)" % (text, where))
    slots = int(text)
    if slots < 1:
        raise HostSpecError("slot count must be at least 1 in %s (got %d)" % (where, slots))
    return slots


def _check_unique(hosts, where):
    seen = set()
    for host in hosts:
        if host.name in seen:
            raise HostSpecError("host %r is listed more than once in %s" % (host.name, where))
        seen.add(host.name)
    return hosts


def parse_hosts(text):
    """Parse ``-H`` text like ``"h1:2,h2:2"`` into a list of HostSlots."""
    if text is None or not text.strip():
        raise HostSpecError("empty host list given to -H")
    hosts = []
    for raw in text.split(","):
        entry = raw.strip()
        where = "-H entry %r" % raw
        if not entry:
            raise HostSpecError("empty entry in -H %r" % text)
        if entry.count(":") > 1:
            raise HostSpecError("malformed %s (expected host:slots)" % where)
        if ":" in entry:
            name, slots_text = entry.split(":", 1)
            slots = _check_slots(slots_text.strip(), where)
        else:
            name, slots = entry, 1
        hosts.append(HostSlots(_check_name(name.strip(), where), slots))
    return _check_unique(hosts, "-H")


def parse_hostfile_text(text, filename="<hostfile>"):
    """Parse the contents of a host file (see module docstring)."""
    hosts = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = "%s line %d" % (filename, lineno)
        fields = line.split()
        name = fields[0]
        slots = 1
        if ":" in name:
            if len(fields) != 1 or name.count(":") != 1:
                raise HostSpecError("malformed %s: %r (expected 'host slots=N')" % (where, raw))
            name, slots_text = name.split(":", 1)
            slots = _check_slots(slots_text, where)
        elif len(fields) == 2:
            key, sep, value = fields[1].partition("=")
            if key not in ("slots", "max_slots") or not sep:
                raise HostSpecError("malformed %s: %r (expected 'host slots=N')" % (where, raw))
            slots = _check_slots(value, where)
        elif len(fields) > 2:
            raise HostSpecError("malformed %s: %r (expected 'host slots=N')" % (where, raw))
        hosts.append(HostSlots(_check_name(name, where), slots))
    if not hosts:
        raise HostSpecError("host file %s lists no hosts" % filename)
    return _check_unique(hosts, filename)


def parse_hostfile(path):
    """Read and parse a host file; a missing or unreadable file is a HostSpecError."""
    try:
        with open(path, "r") as f:
            text = f.read()
    except OSError as e:
        raise HostSpecError("cannot read host file %s: %s" % (path, e.strerror or e))
    return parse_hostfile_text(text, path)


def total_slots(hosts):
    return sum(h.slots for h in hosts)


def format_hosts(hosts):
    """The inverse of parse_hosts: ``[HostSlots('a', 2)] -> 'a:2'``."""
    return ",".join("%s:%d" % (h.name, h.slots) for h in hosts)
