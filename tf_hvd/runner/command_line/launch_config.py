"""The launcher's arguments as one frozen value, built in one place.

:func:`build` is the only way from a command line to a LaunchConfig: the parser (flags,
the --config-file, LSF job defaults, Horovod's notices and the checks), both timeouts
read through the knob table's rules (--start-timeout / HOROVOD_START_TIMEOUT,
--elastic-timeout / HOROVOD_ELASTIC_TIMEOUT), whether TensorFlow's start-up lines are
hidden, and the hosts a --host-discovery-script job starts on. After that nothing
changes it: the Plan and every mode read it.

    >>> config = freeze(cli.parse(["-np", "2", "python", "train.py"]), environ={})
    >>> config.num_proc, config.command, config.start_timeout_s
    (2, ('python', 'train.py'), 30.0)
    >>> config.num_proc = 3
    Traceback (most recent call last):
    ...
    AttributeError: a LaunchConfig is frozen (num_proc)
"""

import os
import types

from ...job import rank_env
from . import parser as cli
from ..elastic.discovery import HostDiscovery, wait_for_slots


class LaunchConfig(types.SimpleNamespace):
    """Every argument of one launch (the parser's names, lists as tuples), plus what
    :func:`freeze` resolved: ``start_timeout_s`` (the launcher's start-up timeout),
    ``quiet_env`` (variables that hide TensorFlow's start-up lines, or none) and
    ``discovered_hosts`` ((host, slots) pairs, or None)."""

    def __setattr__(self, name, value):
        raise AttributeError("a LaunchConfig is frozen (%s)" % name)

    def __delattr__(self, name):
        raise AttributeError("a LaunchConfig is frozen (%s)" % name)

    def replace(self, **changes):
        """A copy with ``changes`` (for tests and the horovod.run API)."""
        values = dict(vars(self))
        values.update(changes)
        return LaunchConfig(**values)


def _frozen(value):
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def freeze(args, environ, discovered_hosts=None):
    """The LaunchConfig of parsed ``args`` (cli.parse) in ``environ``. Raises UsageError
    for a malformed timeout knob."""
    values = {name: _frozen(value) for name, value in vars(args).items()}
    if not args.check_build:
        values["start_timeout_s"] = cli.start_timeout(args, environ)
        values["quiet_env"] = types.MappingProxyType(
            rank_env.quiet_env(args.verbose, environ))
    values["discovered_hosts"] = _frozen(list(discovered_hosts)) if discovered_hosts else None
    return LaunchConfig(**values)


def build(argv, environ=None):
    """The LaunchConfig of the command line ``argv`` (without the program name). A job
    placed by its --host-discovery-script alone waits here (up to --elastic-timeout)
    for -np slots, as Horovod's does. Raises UsageError / HostSpecError."""
    environ = os.environ if environ is None else environ
    args = cli.parse(argv)
    discovered = None
    if (not args.check_build and args.host_discovery_script and args.hosts is None
            and args.hostfile is None):
        discovered = wait_for_slots(HostDiscovery(args.host_discovery_script,
                                                  args.slots_per_host),
                                    args.num_proc, args.elastic_timeout)
    return freeze(args, environ, discovered)
