"""The launch plan: everything decided from the command line before a process starts.

Host list (default ``localhost:N``), rank placement, which hosts are this machine,
the address remote ranks reach us at, and the environment knobs.
"""

import os

from ...job import network
from ...job import placement
from ...job import rank_env
from ...job.rank_env import RankEnv
from ...job import host_spec
from ..modes import mpi_operator
from ..modes import slurm
from ..processes import ssh
from .parser import UsageError
from .knob_flags import knob_env


def host_list(args):
    """(list of HostSlots, how the user gave it, for messages)."""
    if args.hosts is not None:
        return host_spec.parse_hosts(args.hosts), "-H %s" % args.hosts
    if args.hostfile is not None:
        return host_spec.parse_hostfile(args.hostfile), "--hostfile %s" % args.hostfile
    discovered = args.discovered_hosts
    if discovered:  # an elastic job started by its --host-discovery-script alone
        return ([host_spec.HostSlots(h, n) for h, n in discovered],
                "--host-discovery-script %s" % args.host_discovery_script)
    allocation = slurm.allocation_hosts(os.environ)  # inside salloc/sbatch
    if allocation is not None:
        return allocation
    operator = mpi_operator.hostfile_hosts(os.environ, host_spec.parse_hostfile)
    if operator is not None:  # an MPI Operator's launcher pod
        return operator
    return [host_spec.HostSlots("localhost", args.num_proc)], "localhost"


class Plan(object):
    """Everything decided before a process starts, complete when built: hosts, rank
    placement, which hosts are this machine, the ranks' knobs, the start-up timeout.

        plan = Plan(launch_config.build(["-np", "2", "python", "train.py"]))
        plan.slots[1].local_rank   # 1
    """

    def __init__(self, args, is_local=network.is_local_host):
        """``args``: a launch_config.LaunchConfig. Raises UsageError / HostSpecError for
        host lists that cannot work."""
        self.args = args
        self.hosts, where = host_list(args)
        # "srun" inside a Slurm allocation whose nodes are the hosts: no ssh (slurm.py)
        self.remote_launcher = slurm.launcher_for(args.hosts is not None or
                                                  args.hostfile is not None)
        capacity = host_spec.total_slots(self.hosts)
        if args.num_proc > capacity:
            raise UsageError("-np %d is more than the %d slot(s) available in %s"
                             % (args.num_proc, capacity, where))
        self.slots = placement.assign_ranks(self.hosts, self.start_np(args, capacity))
        self.used_hosts = placement.hosts_used(self.slots)
        self._is_local = is_local
        self.local = {h: bool(is_local(h)) for h in self.used_hosts}
        self.all_local = all(self.local.values())
        self.any_local = any(self.local.values())
        # Loopback is enough unless a rank may run elsewhere: a remote host in the list, or
        # an elastic run whose discovery script may add one (given --network-interfaces,
        # which names the address other hosts reach us at; ranks started later cannot
        # change what the running ones bind and publish).
        self.loopback_only = self.all_local and not (
            getattr(args, "host_discovery_script", None) and
            (getattr(args, "nics", None) or self._reachable_address()))
        self.knobs = knob_env(args)
        self.knobs.update(args.quiet_env)  # TensorFlow's start-up lines
        # The launcher's start-up timeout in seconds (--start-timeout /
        # HOROVOD_START_TIMEOUT, else 30).
        self.start_timeout = args.start_timeout_s

    @staticmethod
    def start_np(args, capacity):
        """How many ranks start: -np, or for a job placed by its discovery script as many
        as the discovered slots allow, up to --max-np (Horovod's rule)."""
        if not args.discovered_hosts:
            return args.num_proc
        limit = args.max_np if args.max_np is not None else capacity
        return max(args.num_proc, min(capacity, limit))

    def _reachable_address(self):
        """An elastic job whose discovered hosts are all this machine so far: the
        address other hosts reach us at, so that hosts the script adds later can
        join (None when this machine has no non-loopback address)."""
        if not hasattr(self, "_reachable"):
            address = network.outward_address()
            self._reachable = None if address.startswith("127.") else address
        return self._reachable

    def launcher_address(self):
        """Address other hosts reach this machine at (127.0.0.1 when all is local)."""
        if self.loopback_only:
            return "127.0.0.1"
        nics = getattr(self.args, "nics", None) or []
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
        if not remote:  # an elastic job on this machine so far (_reachable_address)
            return self._reachable_address()
        return network.address_towards(remote[0])

    def rendezvous_bind_address(self):
        """Where the rendezvous server listens: loopback for a local job, else only the
        address the ranks are told to use (never every interface)."""
        return "127.0.0.1" if self.loopback_only else self.launcher_address()

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
        me = self.launcher_address()
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
            return list(self.args.command), True
        if self.remote_launcher == "srun":  # srun carries the process environment
            return slurm.srun_argv(slot.hostname, self.args.command, cwd), True
        remote_env = rank_env.forwarded_env(os.environ if base_env is None else base_env, env)
        for name in stdin_vars:
            remote_env.pop(name, None)
        return ssh.rank_command(slot.hostname, ssh.ssh_command(
            slot.hostname, self.args.command, remote_env, cwd, self.args.ssh_port,
            self.args.ssh_identity_file, stdin_vars=stdin_vars)), False

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

    def remote_hosts(self):
        """The hosts reached over ssh, in order (none when srun starts them)."""
        if self.remote_launcher == "srun":
            return []
        return [h for h in self.used_hosts if not self.local[h]]

    def mpi_hosts_arg(self):
        """``host:n,...`` for mpiexec, None when every rank is local."""
        if self.all_local:
            return None
        counts = [(h, sum(1 for s in self.slots if s.hostname == h)) for h in self.used_hosts]
        return ",".join("%s:%d" % hc for hc in counts)
