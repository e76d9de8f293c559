#!/usr/bin/env python3
"""A real Slurm on the namespace cluster (tools/clusters/netns_cluster.py): for tests and trials.

On a running netns ``Cluster`` (hosts h1..hK), ``SlurmCluster`` starts

* one ``munged`` with a fresh key made for this run (its Unix socket lives on the shared
  file system, so the daemons of every namespace reach it);
* ``slurmctld`` on h1 and one ``slurmd`` per host, from a ``slurm.conf`` written for
  this run (partition ``debug`` with every host, ``CPUs`` as this machine has, no
  cgroups: proctrack/linuxproc, task/none), all state under one temp dir;

and stops all of them (and any job step left) on ``down()``. Slurm's clients find the
configuration through ``SLURM_CONF``: run them with ``env()``.

    with netns_cluster.Cluster(2, name="tfsl") as c, SlurmCluster(c) as slurm:
        subprocess.run(c.exec_argv("h1", ["srun", "-N", "2", "hostname"]), env=slurm.env())

Command line (as root): ``tools/clusters/slurm_cluster.py run 2 -- srun -N 2 -n 4 hostname``.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netns_cluster  # noqa: E402

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
CLIENTS = ("srun", "sinfo", "scontrol", "munge")


def available():
    """Why Slurm cannot run here (a string), or None."""
    reason = netns_cluster.Cluster.available()
    if reason:
        return reason
    missing = [p for p in DAEMONS if not os.access(p, os.X_OK)]
    missing += [c for c in CLIENTS if shutil.which(c) is None]
    if missing:
        return "Slurm/munge not installed (%s): tools/setup.sh installs them" % ", ".join(missing)
    return None


_CONF = """\
ClusterName=tfhvd
SlurmctldHost=h1({h1})
AuthType=auth/munge
AuthInfo=socket={socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/ctld
SlurmdSpoolDir={dir}/spool-%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=5
{nodes}
PartitionName=debug Nodes={hosts} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
"""


def _cgroup_mounts():
    """Shell commands that mount this machine's cgroup file systems again under /sys/fs/
    cgroup (mounting a v1 hierarchy twice shares it; a bind across mount namespaces
    is refused)."""
    cmds = []
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, point, kind, opts = line.split()[:4]
            if not point.startswith("/sys/fs/cgroup"):
                continue
            if kind == "tmpfs" and point == "/sys/fs/cgroup":
                cmds.append("mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup")
            elif kind in ("cgroup", "cgroup2"):
                keep = ",".join(o for o in opts.split(",") if o not in ("rw", "relatime"))
                cmds.append("mkdir -p %s && mount -t %s %s%s %s" % (
                    point, kind, "-o %s " % keep if keep else "", kind, point))
    return "".join(c + " && " for c in cmds)


class SlurmCluster(object):
    """slurmctld + a slurmd per host of ``cluster`` (a running netns_cluster.Cluster)."""

    def __init__(self, cluster, cpus=4, ctld_port=6817, slurmd_port=6818):
        self.cluster = cluster
        self.cpus = cpus
        self.ctld_port, self.slurmd_port = ctld_port, slurmd_port
        self.dir = None
        self.procs = []
        self.munged_pid = None

    @property
    def conf(self):
        return os.path.join(self.dir, "slurm.conf")

    @property
    def munge_socket(self):
        return os.path.join(self.dir, "munge", "munge.socket")

    def env(self, base=None):
        """Environment for Slurm's clients and the jobs they start."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf
        env["MUNGE_SOCKET"] = self.munge_socket  # not read by munge(1); --socket is
        return env

    def up(self):
        self.dir = tempfile.mkdtemp(prefix="tfhvd-slurm-")
        os.chmod(self.dir, 0o755)
        for sub in ("munge", "ctld"):
            os.makedirs(os.path.join(self.dir, sub), mode=0o700)
        self._start_munge()
        nodes = "\n".join(
            "NodeName=%s NodeAddr=%s CPUs=%d RealMemory=1000 State=UNKNOWN"
            % (h, self.cluster.address(h), self.cpus) for h in self.cluster.hosts)
        with open(self.conf, "w") as f:
            f.write(_CONF.format(h1=self.cluster.address("h1"), socket=self.munge_socket,
                                 dir=self.dir, ctld_port=self.ctld_port,
                                 slurmd_port=self.slurmd_port, nodes=nodes,
                                 hosts=",".join(self.cluster.hosts)))
        self._start("h1", ["/usr/sbin/slurmctld", "-D", "-i", "-f", self.conf], "ctld")
        with open(os.path.join(self.dir, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\n")
        for host in self.cluster.hosts:
            os.makedirs(os.path.join(self.dir, "spool-" + host), mode=0o755)
            # `ip netns exec` mounts a fresh /sys, without the cgroup file systems that
            # slurmd insists on: bind the machine's (in that private mount namespace).
            self._start(host, ["sh", "-c", _cgroup_mounts() + 'exec "$@"', "slurmd",
                               "/usr/sbin/slurmd", "-D", "-f", self.conf, "-N", host],
                        "slurmd-" + host)
        self._wait_idle(60)
        return self

    def _start_munge(self):
        key = os.path.join(self.dir, "munge", "munge.key")
        subprocess.run(["/usr/sbin/mungekey", "--create", "--keyfile", key], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        subprocess.run(
            ["/usr/sbin/munged", "--key-file", key, "--socket", self.munge_socket,
             "--pid-file", os.path.join(self.dir, "munge", "munged.pid"),
             "--log-file", os.path.join(self.dir, "munge", "munged.log"),
             "--seed-file", os.path.join(self.dir, "munge", "munged.seed"), "--force"],
            check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with open(os.path.join(self.dir, "munge", "munged.pid")) as f:
            self.munged_pid = int(f.read().strip())

    def _start(self, host, argv, log):
        out = open(os.path.join(self.dir, log + ".out"), "wb")
        proc = subprocess.Popen(self.cluster.exec_argv(host, argv), env=self.env(),
                                stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        out.close()
        self.procs.append(proc)

    def sinfo(self):
        res = subprocess.run(self.cluster.exec_argv("h1", ["sinfo", "-h", "-N", "-o", "%N %t"]),
                             env=self.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return res.stdout.decode(errors="replace")

    def _wait_idle(self, within):
        deadline = time.time() + within
        states = ""
        while time.time() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError("a Slurm daemon exited (%s): %s" % (
                        proc.args[-3:], self.logs()))
            states = self.sinfo()
            lines = [l.split() for l in states.splitlines() if l.strip()]
            if len(lines) == len(self.cluster.hosts) and all(
                    s[1].startswith("idle") for s in lines):
                return
            time.sleep(0.5)
        raise RuntimeError("Slurm nodes not idle within %gs: %r\n%s" % (within, states,
                                                                       self.logs()))

    def logs(self, tail=3000):
        text = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith((".log", ".out")):
                with open(os.path.join(self.dir, name), errors="replace") as f:
                    text.append("== %s ==\n%s" % (name, f.read()[-tail:]))
        return "\n".join(text)

    def down(self):
        """Stops the daemons (slurmd ends its job steps' processes first) and munged."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except OSError:
                    pass
        deadline = time.time() + 10
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                proc.wait(5)
        self.procs = []
        if self.munged_pid:
            try:
                os.kill(self.munged_pid, signal.SIGTERM)
            except OSError:
                pass
            # munged writes its seed file as it exits: wait, or it recreates the dir below
            deadline = time.time() + 10
            while time.time() < deadline and os.path.exists("/proc/%d" % self.munged_pid):
                time.sleep(0.05)
            self.munged_pid = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc):
        self.down()
        return False


def main(argv):
    if len(argv) < 3 or argv[0] != "run" or "--" not in argv:
        sys.stderr.write("usage: slurm_cluster.py run K -- command...\n")
        return 2
    k = int(argv[1])
    cmd = argv[argv.index("--") + 1:]
    with netns_cluster.Cluster(k, name="tfslm") as c, SlurmCluster(c) as slurm:
        return subprocess.call(c.exec_argv("h1", cmd), env=slurm.env())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
