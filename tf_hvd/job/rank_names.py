"""How every launcher names ranks in its lines: one rank with where it ran, and lists.

    >>> who(1, "h2", 4242), who(3)
    ('rank 1 (on h2, pid 4242)', 'rank 3')
    >>> rank_list([2]), rank_list([0, 2]), rank_brackets([0, 2])
    ('rank 2', 'ranks 0, 2', '[0,2]')
    >>> rank_of("rank 1 (on h2, pid 4242) was killed by signal 9 (SIGKILL)")
    1
    >>> with_how("rank 1 (on h2, pid 7) exited with code 1; rank 0 stopped in consequence",
    ...          "raised KeyError: 'k'")
    "rank 1 (on h2, pid 7) raised KeyError: 'k'; rank 0 stopped in consequence"
"""

import re

_WHO = re.compile(r"^rank (\d+)\b")
_LINE = re.compile(r"^(rank \d+(?: \([^)]*\))?) (.*?)((?:; .*)?)$")


def who(rank, host=None, pid=None, label="rank"):
    """'rank R (on HOST, pid P)', leaving out what is not known (label: 'worker' for an
    elastic Ray worker's id)."""
    where = ", ".join(part for part in (
        "on %s" % host if host else "", "pid %d" % pid if pid else "") if part)
    return "%s %d" % (label, rank) + (" (%s)" % where if where else "")


def rank_list(ranks):
    """'rank 2' / 'ranks 0, 2' (in the order given)."""
    ranks = list(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def rank_brackets(ranks):
    """'[0,2]': the compact form of the launcher's warnings."""
    return "[" + ",".join(str(r) for r in ranks) + "]"


def rank_of(line):
    """The rank a launcher's line starts with (as ``who`` writes it), or None."""
    m = _WHO.match(line or "")
    return int(m.group(1)) if m else None


def with_how(line, how):
    """A launcher's line ('rank R (...) <how>; <the others>') with what the rank did
    replaced by ``how`` (a driver that knows more than the launcher: what it raised)."""
    m = _LINE.match(line or "")
    return "%s %s%s" % (m.group(1), how, m.group(3)) if m else line
