"""The launcher's arguments as one frozen value with declared fields, built in one place.

:func:`build` is the only way from a command line to a LaunchConfig: the parser (flags,
the --config-file, LSF job defaults, Horovod's notices and the checks), the start-up
timeout by the knob table's rules (--start-timeout / HOROVOD_START_TIMEOUT), the ranks'
knobs (knob_flags.py, and the variables that hide TensorFlow's start-up lines), the
elastic settings as their own value and the hosts a --host-discovery-script job starts
on. After that nothing changes it: the Plan and every mode read it.

    >>> config = freeze(cli.parse(["-np", "2", "python", "train.py"]), environ={})
    >>> config.num_proc, config.command, config.start_timeout, config.elastic
    (2, ('python', 'train.py'), 30.0, None)
    >>> config.replace(num_proc=3).num_proc
    3
"""

import dataclasses
import os
import types
from typing import Mapping, Optional, Tuple

from ...job import knob_rules
from ...job import rank_env
from . import parser as cli
from .knob_flags import knob_env
from ..elastic.discovery import HostDiscovery, wait_for_slots

START_TIMEOUT_ENV, START_TIMEOUT_DEFAULT = "HOROVOD_START_TIMEOUT", 30.0  # horovodrun's


@dataclasses.dataclass(frozen=True)
class ElasticSettings(object):
    """An elastic job's settings (--min-np, or --host-discovery-script alone)."""

    min_np: int                             # the job goes on while this many ranks are left
    max_np: Optional[int] = None            # ranks at most (discovered slots)
    timeout: float = 600.0                  # --elastic-timeout, seconds
    reset_limit: Optional[int] = None       # resets at most (None: no limit)
    discovery_script: Optional[str] = None  # --host-discovery-script
    slots_per_host: int = 1                 # for hosts the script lists without slots
    cooldown_range: Optional[Tuple[int, int]] = None  # --blacklist-cooldown-range


@dataclasses.dataclass(frozen=True)
class LaunchConfig(object):
    """What the launcher itself reads of one launch (the ranks' knobs already turned into
    their variables: ``knobs``)."""

    num_proc: int = 1
    command: Tuple[str, ...] = ()
    mode: str = "gloo"                      # "gloo", "mpi" or "jsrun"
    hosts: Optional[str] = None             # -H
    hostfile: Optional[str] = None
    check_build: bool = False
    verbose: bool = False
    output_filename: Optional[str] = None
    prefix_output_with_timestamp: bool = False
    ssh_port: Optional[int] = None
    ssh_identity_file: Optional[str] = None
    nics: Tuple[str, ...] = ()              # --network-interfaces
    rendezvous_port: int = 0
    start_timeout: float = START_TIMEOUT_DEFAULT  # seconds the ranks may take to start
    max_restarts: int = 0
    mpi_args: Optional[str] = None
    binding_args: Optional[str] = None
    disable_cache: bool = False
    knobs: Mapping[str, str] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))
    notes: Tuple[str, ...] = ()             # notices printed once
    elastic: Optional[ElasticSettings] = None
    discovered_hosts: Optional[Tuple[Tuple[str, int], ...]] = None

    def replace(self, **changes):
        """A copy with ``changes`` (tests build configs this way)."""
        return dataclasses.replace(self, **changes)


def start_timeout(flag, environ):
    """The launcher's start-up timeout in seconds: --start-timeout, else
    $HOROVOD_START_TIMEOUT (0: the default), else 30 (horovodrun's default). Raises
    UsageError with the knob table's message."""
    if flag is not None:
        return float(flag)
    try:
        return knob_rules.seconds_knob(environ, START_TIMEOUT_ENV, START_TIMEOUT_DEFAULT)
    except ValueError as e:
        raise cli.UsageError(str(e))


def _elastic(args):
    if args.min_np is None:
        return None
    cooldown = args.blacklist_cooldown_range
    return ElasticSettings(args.min_np, args.max_np, float(args.elastic_timeout),
                           args.reset_limit, args.host_discovery_script, args.slots_per_host,
                           tuple(cooldown) if cooldown is not None else None)


def freeze(args, environ, discovered_hosts=None):
    """The LaunchConfig of parsed ``args`` (cli.parse) in ``environ``. Raises UsageError
    for a malformed timeout knob."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(LaunchConfig)
              if f.name not in ("knobs", "elastic", "start_timeout", "discovered_hosts")}
    values.update(command=tuple(args.command), nics=tuple(args.nics or ()),
                  notes=tuple(args.notes), elastic=_elastic(args))
    if not args.check_build:
        knobs = knob_env(args)
        knobs.update(rank_env.quiet_env(args.verbose, environ))  # TensorFlow's start-up
        values.update(start_timeout=start_timeout(args.start_timeout, environ),
                      knobs=types.MappingProxyType(knobs))
    if discovered_hosts:
        values["discovered_hosts"] = tuple(tuple(h) for h in discovered_hosts)
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
