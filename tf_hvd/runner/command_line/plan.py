"""The launch plan: everything decided from the command line before a process starts.

Host list (default ``localhost:N``), rank placement, which hosts are this machine and
which are reached over ssh, the address remote ranks reach us at (a bad
--network-interfaces is reported here), that the command runs here, and the ranks' knobs.
"""

import os
import shutil

from ...job import network
from ...job import placement
from ...job import rank_env
from ...job.rank_env import RankEnv
from ...job import host_spec
from ...job import mpi_operator_hostfile as mpi_operator
from ...job import slurm_allocation as slurm
from ..processes import ssh
from . import launch_config
from .parser import UsageError, python_script
from .usage import notice


def check_command_runs_here(command, cwd=None):
    """For ranks started on this machine: the program must exist.

    Raises UsageError for a missing executable or a missing ``python script.py``.
    """
    cwd = cwd or os.getcwd()
    exe = command[0]
    if os.sep in exe:
        path = exe if os.path.isabs(exe) else os.path.join(cwd, exe)
        if not os.path.exists(path):
            raise UsageError("command %r does not exist" % exe)
    elif shutil.which(exe) is None:
        raise UsageError("command %r not found on PATH" % exe)
    script = python_script(command)
    if script is not None:
        path = script if os.path.isabs(script) else os.path.join(cwd, script)
        if not os.path.exists(path):
            raise UsageError("python script %r does not exist (working directory %s)"
                             % (script, cwd))


def host_list(config):
    """(list of HostSlots, how the user gave it, for messages)."""
    if config.hosts is not None:
        return host_spec.parse_hosts(config.hosts), "-H %s" % config.hosts
    if config.hostfile is not None:
        return host_spec.parse_hostfile(config.hostfile), "--hostfile %s" % config.hostfile
    if config.discovered_hosts:  # an elastic job started by its --host-discovery-script alone
        return ([host_spec.HostSlots(h, n) for h, n in config.discovered_hosts],
                "--host-discovery-script %s" % config.elastic.discovery_script)
    allocation = slurm.allocation_hosts(os.environ)  # inside salloc/sbatch
    if allocation is not None:
        return allocation
    operator = mpi_operator.hostfile_hosts(os.environ, host_spec.parse_hostfile)
    if operator is not None:  # an MPI Operator's launcher pod
        return operator
    return [host_spec.HostSlots("localhost", config.num_proc)], "localhost"


class Plan(object):
    """Everything decided before a process starts, complete when built: hosts, rank
    placement, which hosts are this machine and which are reached over ssh, the address
    the ranks reach the launcher at, the ranks' knobs.

        plan = Plan(launch_config.build(["-np", "2", "python", "train.py"]))
        plan.slots[1].local_rank, plan.launcher_address   # 1, '127.0.0.1'
    """

    def __init__(self, config, is_local=network.is_local_host,
                 check_command=check_command_runs_here):
        """``config``: a launch_config.LaunchConfig; ``check_command(command)`` when a rank
        runs on this machine (None: not checked). Raises UsageError / HostSpecError for
        host lists that cannot work, a command missing here, a bad --network-interfaces."""
        self.config = config
        self.hosts, where = host_list(config)
        # "srun" inside a Slurm allocation whose nodes are the hosts: no ssh (tf_hvd/job/slurm_allocation.py)
        self.remote_launcher = slurm.launcher_for(config.hosts is not None or
                                                  config.hostfile is not None)
        capacity = host_spec.total_slots(self.hosts)
        if config.num_proc > capacity:
            raise UsageError("-np %d is more than the %d slot(s) available in %s"
                             % (config.num_proc, capacity, where))
        self.slots = placement.assign_ranks(self.hosts, self.start_np(config, capacity))
        self.used_hosts = placement.hosts_used(self.slots)
        self._is_local = is_local
        self.local = {h: bool(is_local(h)) for h in self.used_hosts}
        self.all_local = all(self.local.values())
        self.any_local = any(self.local.values())
        if self.any_local and check_command is not None:
            check_command(config.command)
        # The hosts reached over ssh, in order (none when srun starts them).
        self.remote_hosts = [] if self.remote_launcher == "srun" else [
            h for h in self.used_hosts if not self.local[h]]
        # Loopback is enough unless a rank may run elsewhere: a remote host in the list, or
        # an elastic run whose discovery script may add one (given --network-interfaces,
        # which names the address other hosts reach us at; ranks started later cannot
        # change what the running ones bind and publish).
        discovering = config.elastic is not None and config.elastic.discovery_script
        self._reachable = None if not discovering or config.nics or not self.all_local \
            else network.outward_address()
        if self._reachable is not None and self._reachable.startswith("127."):
            self._reachable = None  # this machine has no address other hosts reach
        self.loopback_only = self.all_local and not (
            discovering and (config.nics or self._reachable))
        # The address other hosts reach this machine at (127.0.0.1 when all is local).
        self.launcher_address = self._launcher_address()
        # Where the rendezvous server listens: loopback for a local job, else only the
        # address the ranks are told to use (never every interface).
        self.rendezvous_bind_address = "127.0.0.1" if self.loopback_only \
            else self.launcher_address
        self.knobs = dict(config.knobs)

    @staticmethod
    def start_np(config, capacity):
        """How many ranks start: -np, or for a job placed by its discovery script as many
        as the discovered slots allow, up to --max-np (Horovod's rule)."""
        if not config.discovered_hosts:
            return config.num_proc
        limit = config.elastic.max_np if config.elastic.max_np is not None else capacity
        return max(config.num_proc, min(capacity, limit))

    def _launcher_address(self):
        if self.loopback_only:
            return "127.0.0.1"
        nics = self.config.nics
        if nics:
            problems = []
            for nic in nics:  # the first interface that has an address
                try:
                    return network.interface_address(nic)
                except OSError as e:
                    problems.append("%s (%s)" % (nic, e.strerror or e))
            raise UsageError("--network-interfaces %s: no IPv4 address on %s"
                             % (",".join(nics), ", ".join(problems)))
        remote = [h for h in self.used_hosts if not self.local[h]]
        if not remote:  # an elastic job on this machine so far: hosts it adds may join
            return self._reachable
        return network.address_towards(remote[0])

    def is_local(self, host):
        """Whether ``host`` is this machine (hosts the discovery script adds included)."""
        if host not in self.local:
            self.local[host] = bool(self._is_local(host))
        return self.local[host]

    def rank_hostname(self, slot, launcher_address):
        """HOROVOD_HOSTNAME of a rank: what it binds and publishes for Gloo."""
        if self.is_local(slot.hostname):
            return launcher_address
        return slot.hostname.split("@", 1)[-1]

    def rank_envs(self, rendezvous_addr, rendezvous_port):
        """Every rank's RankEnv in Gloo mode, index == rank (its knobs, topology and
        where to meet; the secret and what a run adds come later)."""
        me = self.launcher_address
        return [RankEnv.for_slot(s, hostname=self.rank_hostname(s, me),
                                 rendezvous_addr=rendezvous_addr,
                                 rendezvous_port=rendezvous_port, controller="gloo",
                                 knobs=self.knobs) for s in self.slots]

    def rank_argv(self, slot, env, cwd, base_env=None, stdin_vars=()):
        """(argv, is_local): how to start ``slot``'s rank from here.

        Local ranks run the command directly (``env`` goes into the process
        environment); remote ranks run it through ssh (ssh.py: under ssh_rank.py here
        and remote_rank.py there) with ``env`` on the command line and the variables
        named in ``stdin_vars`` (secrets) read from ssh's stdin.
        """
        if self.is_local(slot.hostname):
            return list(self.config.command), True
        if self.remote_launcher == "srun":  # srun carries the process environment
            return slurm.srun_argv(slot.hostname, self.config.command, cwd), True
        remote_env = rank_env.forwarded_env(os.environ if base_env is None else base_env, env)
        for name in stdin_vars:
            remote_env.pop(name, None)
        return ssh.rank_command(slot.hostname, ssh.ssh_command(
            slot.hostname, self.config.command, remote_env, cwd, self.config.ssh_port,
            self.config.ssh_identity_file, stdin_vars=stdin_vars)), False

    def rank_process(self, slot, rank, secret, cwd):
        """(argv, environment, stdin bytes or None): how to start ``slot``'s rank, whose
        variables are the RankEnv ``rank``, with the job's ``secret``: in the
        environment of a rank on this machine (or started by srun), on ssh's stdin for
        one started over ssh, never on a command line."""
        argv, local = self.rank_argv(slot, rank.to_environ(with_secret=False), cwd,
                                     stdin_vars=(rank_env.SECRET,))
        if local:
            return argv, rank_env.process_env(
                os.environ, rank.replace(secret=secret).to_environ()), None
        return argv, rank_env.process_env(os.environ, {}), (secret + "\n").encode("ascii")

    def mpi_hosts_arg(self):
        """``host:n,...`` for mpiexec, None when every rank is local."""
        if self.all_local:
            return None
        counts = [(h, sum(1 for s in self.slots if s.hostname == h)) for h in self.used_hosts]
        return ",".join("%s:%d" % hc for hc in counts)


def read_command_line(argv, environ=None):
    """(LaunchConfig, Plan) of the command line ``argv``; the Plan is None for -cb. The
    notices (flags that do nothing here, ignored config keys) are printed once the plan
    stands. Raises UsageError / HostSpecError.

        config, plan = read_command_line(["-np", "2", "python", "train.py"])
    """
    config = launch_config.build(argv, environ)
    plan = None if config.check_build else Plan(config)
    for line in config.notes:
        notice(line)  # once each
    return config, plan
