"""The prefix every launcher puts before a rank's output lines: ``[rank]<stdout>:``.

    >>> prefix(1, "stdout"), prefixed(0, "stderr", "hello", stamp="Mon 12:00 ")
    ('[1]<stdout>:', 'Mon 12:00 [0]<stderr>:hello\\n')
"""

import time


def stamp():
    """The local time as horovodrun puts it in front (``--prefix-output-with-timestamp``):
    'Mon Nov 23 15:22:20 2026'."""
    return time.strftime("%a %b %d %H:%M:%S %Y")


def prefix(rank, stream_name):
    """'[1]<stdout>:' (stream_name: 'stdout' or 'stderr')."""
    return "[%d]<%s>:" % (rank, stream_name)


def prefixed(rank, stream_name, line, stamp=""):
    """One line as written: an optional timestamp, the prefix, the text, a newline."""
    return "%s%s%s\n" % (stamp, prefix(rank, stream_name), line)
