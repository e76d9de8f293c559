"""horovodrun flags kept for parity: on/off pairs, deprecated spellings, and flags of
Horovod features tf_hvd does not have.

A horovodrun command line runs unchanged under tfhvdrun. A flag (or --config-file key)
that does nothing in tf_hvd is still accepted and passed on as Horovod's variable, and
the launcher says so in one line on stderr (``notices``), e.g.::

    tfhvdrun: note: --num-nccl-streams has no effect in tf_hvd (...)
"""

import argparse

# dest -> why setting it changes nothing here.
NO_EFFECT = {
    "torus_allreduce": "--torus-allreduce / --no-torus-allreduce (config params."
                       "torus_allreduce) have no effect in tf_hvd: it has no NCCL torus "
                       "allreduce (--hierarchical-allreduce is the nearest)",
    "num_nccl_streams": "--num-nccl-streams (config library_options.num_nccl_streams) has "
                        "no effect in tf_hvd: its NCCL operations run on the stream of the "
                        "tensors' device",
}

DEPRECATED = "_deprecated_spellings"  # namespace attribute: [(used, replacement)]


def add_on_off(group, on, off, dest, help_on, help_off=argparse.SUPPRESS):
    """``on`` stores True, ``off`` False (default None: not given); one of the two."""
    pair = group.add_mutually_exclusive_group()
    pair.add_argument(on, dest=dest, action="store_const", const=True, help=help_on)
    pair.add_argument(off, dest=dest, action="store_const", const=False, help=help_off)
    return pair


class DeprecatedSpelling(argparse.Action):
    """An old flag name: stores ``const`` in ``dest`` and remembers that it was used."""

    def __init__(self, option_strings, dest, const=None, replacement=None, **kwargs):
        kwargs.setdefault("help", argparse.SUPPRESS)
        super(DeprecatedSpelling, self).__init__(option_strings, dest, nargs=0, const=const,
                                                 **kwargs)
        self.replacement = replacement

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const)
        used = list(getattr(namespace, DEPRECATED, []))
        used.append((option_string, self.replacement))
        setattr(namespace, DEPRECATED, used)


def notices(args):
    """The one-line notices for ``args`` (each at most once), without the prefix."""
    lines = []
    for used, replacement in getattr(args, DEPRECATED, []):
        line = "warning: %s is deprecated (as in horovodrun), use %s" % (used, replacement)
        if line not in lines:
            lines.append(line)
    for dest, why in sorted(NO_EFFECT.items()):
        if getattr(args, dest, None) is not None:
            lines.append("note: " + why)
    return lines
