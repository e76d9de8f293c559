"""The launcher's usage error and its one-line notices (the bottom of tf_hvd.runner: it
imports nothing of the package, so every other module may import it)."""

import sys

PROG = "tfhvdrun"


class UsageError(Exception):
    """Bad command line; str(e) is the one-line message (without the prefix)."""


def notice(message, stream=None):
    """One line ``tfhvdrun: <message>`` on stderr (warnings and "has no effect here")."""
    stream = sys.stderr if stream is None else stream
    stream.write("%s: %s\n" % (PROG, message))
    stream.flush()
