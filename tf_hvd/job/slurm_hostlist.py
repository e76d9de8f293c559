"""Slurm's compact host list and tasks-per-node syntaxes, expanded in pure Python.

Slurm hands a job step its nodes as ``SLURM_STEP_NODELIST=h[1-3,7],gpu[01-02]-ib`` and
the tasks on each as ``SLURM_STEP_TASKS_PER_NODE=2(x3),1``. ``scontrol show hostnames``
expands the first, but a rank should not need Slurm's tools on its PATH (containers).

    >>> expand_hostlist("h[1-3],gpu[08-10]")
    ['h1', 'h2', 'h3', 'gpu08', 'gpu09', 'gpu10']
    >>> expand_tasks_per_node("2(x2),1")
    [2, 2, 1]
"""

import itertools
import re


class HostlistError(ValueError):
    """Text that is not in Slurm's host list (or tasks-per-node) syntax."""


def _split_top_level(text):
    """Split at commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
            if depth > 1:
                raise HostlistError("nested brackets in host list %r" % text)
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError("unbalanced ']' in host list %r" % text)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise HostlistError("unbalanced '[' in host list %r" % text)
    parts.append(text[start:])
    return parts


def _expand_range(body, text):
    """``01-03,7`` -> ['01', '02', '03', '7'] (zero padding kept per range)."""
    out = []
    for item in body.split(","):
        m = re.match(r"^([0-9]+)(?:-([0-9]+))?$", item)
        if not m:
            raise HostlistError("malformed range %r in host list %r" % (item, text))
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            out.append(lo)
            continue
        if int(hi) < int(lo):
            raise HostlistError("descending range %r in host list %r" % (item, text))
        width = len(lo) if lo.startswith("0") else 0
        out.extend(str(n).zfill(width) for n in range(int(lo), int(hi) + 1))
    return out


def expand_hostlist(text):
    """Every host name of a Slurm host list, in order (duplicates kept, as Slurm does)."""
    text = (text or "").strip()
    if not text:
        raise HostlistError("empty host list")
    hosts = []
    for part in _split_top_level(text):
        if not part:
            raise HostlistError("empty entry in host list %r" % text)
        pieces = re.split(r"(\[[^\]]*\])", part)
        choices = []
        for piece in pieces:
            if piece.startswith("["):
                choices.append(_expand_range(piece[1:-1], text))
            elif piece:
                choices.append([piece])
        hosts.extend("".join(combo) for combo in itertools.product(*choices))
    return hosts


def expand_tasks_per_node(text):
    """``2(x3),1`` -> [2, 2, 2, 1]."""
    counts = []
    for item in (text or "").split(","):
        m = re.match(r"^\s*([0-9]+)(?:\(x([0-9]+)\))?\s*$", item)
        if not m:
            raise HostlistError("malformed tasks-per-node entry %r in %r" % (item, text))
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts
