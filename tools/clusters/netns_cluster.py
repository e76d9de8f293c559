#!/usr/bin/env python3
"""A cluster of K "hosts" on one Linux machine: network namespaces with their own sshd.

Each host ``hN`` (N = 1..K) is a network namespace ``<name>-hN`` with

* an interface ``eth0`` (one end of a veth pair; the other end is a port of the bridge
  ``<name>-br`` in the root namespace) with the address ``10.213.0.(N+1)/24``, and ``lo``;
  the root namespace gets no address, so nothing on the machine's own network changes;
* its own host name ``hN`` (a UTS namespace) and ``/etc/hosts`` naming h1..hK
  (``/etc/netns/<ns>/hosts``, which ``ip netns exec`` mounts over ``/etc/hosts``);
* an OpenSSH server listening on its address (ports 22 and 2222), root login by key
  only: a host key per host and one client key are generated for this run in a temp
  dir; ``/etc/ssh`` inside the namespace holds an ``ssh_config`` that knows the hosts'
  keys and uses the client key, so ``ssh h2`` just works from any host;
* optionally a shaped link: ``tbf`` rate limit on both ends of every veth (rate_mbit),
  and ``netem`` delay (delay_ms) where the kernel has netem (``CONFIG_NET_SCH_NETEM``;
  without it the delay is not applied and ``shaping()`` says so).

The hosts share the file system (same venv, same tree at the same paths), as the
launcher assumes for real hosts. The launcher runs *on h1*, like on a head node:
``ClusterNetns.exec_argv('h1', argv)`` (or ``netns_cluster.py exec h1 -- cmd``).

Command line (as root)::

    tools/clusters/netns_cluster.py up 2 [--rate-mbit 1000 --delay-ms 0.2]   # prints how to use it
    tools/clusters/netns_cluster.py exec h1 -- tfhvdrun -np 4 -H h1:2,h2:2 python train.py
    tools/clusters/netns_cluster.py run 2 -- tfhvdrun -np 4 -H h1:2,h2:2 python train.py
    tools/clusters/netns_cluster.py down            # also cleans up after a crashed run

From Python (tests)::

    with Cluster(2, name="tfht") as c:
        subprocess.run(c.exec_argv("h1", ["hostname"]))      # prints h1

``Cluster.available()`` says why a cluster cannot be made here (not root, no ip,
no sshd, no namespaces), or None. Teardown happens on ``down()``, leaving the
``with`` block, interpreter exit (atexit) and SIGINT/SIGTERM/SIGHUP; state is kept in
``/run/tfhvd-netns/<name>.json`` so ``down`` also removes what a killed run left.
"""

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

STATE_DIR = "/run/tfhvd-netns"
NETNS_ETC = "/etc/netns"
SUBNET = "10.213.0"
SSH_PORTS = (22, 2222)
SSHD = "/usr/sbin/sshd"


def _run(argv, check=True):
    """Runs a command, returns its stdout. When it fails: RuntimeError with its stderr
    if ``check``, else None."""
    res = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if res.returncode != 0:
        if check:
            raise RuntimeError("%s failed (exit %d): %s" % (
                " ".join(argv), res.returncode, res.stderr.decode(errors="replace").strip()))
        return None
    return res.stdout.decode(errors="replace")


def _netns_list():
    out = _run(["ip", "netns", "list"], check=False) or ""
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _links():
    out = _run(["ip", "-o", "link", "show"], check=False) or ""
    names = []
    for line in out.splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            names.append(parts[1].strip().split("@", 1)[0])
    return names


def _qdisc_supported(kind):
    """True if the kernel accepts qdisc ``kind`` (tried on a throwaway dummy veth)."""
    probe = "tfhvdq%d" % (os.getpid() % 100000)
    if _run(["ip", "link", "add", probe, "type", "veth", "peer", "name", probe + "p"],
            check=False) is None:
        return False
    try:
        args = {"netem": ["delay", "1ms"], "tbf": ["rate", "1gbit", "burst", "64kb",
                                                   "latency", "10ms"]}[kind]
        return _run(["tc", "qdisc", "add", "dev", probe, "root", kind] + args,
                    check=False) is not None
    finally:
        _run(["ip", "link", "del", probe], check=False)


class Cluster(object):
    """K network-namespace hosts h1..hK with sshd each (see the module docstring)."""

    def __init__(self, k=2, name="tfhc", rate_mbit=None, delay_ms=None, verbose=False):
        if not 1 <= k <= 200:
            raise ValueError("k must be between 1 and 200 (got %d)" % k)
        if len(name) > 8 or not name.replace("-", "").isalnum():
            raise ValueError("cluster name must be at most 8 letters/digits: %r" % name)
        self.k = k
        self.name = name
        self.rate_mbit = rate_mbit
        self.delay_ms = delay_ms
        self.verbose = verbose
        self.hosts = ["h%d" % i for i in range(1, k + 1)]
        self.dir = None
        self.sshd_pids = {}
        self._shaping = {}
        self._up = False
        self._old_handlers = {}

    # -- names and paths ------------------------------------------------------------------
    def netns(self, host):
        return "%s-%s" % (self.name, host)

    def address(self, host):
        return "%s.%d" % (SUBNET, self.hosts.index(host) + 2)

    @property
    def bridge(self):
        return "%s-br" % self.name

    def _veth(self, host):
        return "%s-%s" % (self.name, host)  # root-namespace end; "eth0" inside

    @property
    def client_key(self):
        return os.path.join(self.dir, "id_ed25519")

    @property
    def ssh_config(self):
        """An ssh_config usable with ``ssh -F`` from inside any host (also /etc/ssh)."""
        return os.path.join(self.dir, "etc-ssh", "ssh_config")

    @property
    def state_path(self):
        return os.path.join(STATE_DIR, "%s.json" % self.name)

    def shaping(self):
        """What link shaping was applied: {'rate_mbit':..., 'delay_ms':..., 'notes': [...]}."""
        return dict(self._shaping)

    def hostfile(self, slots):
        """Path of a hostfile ``hN slots=S`` for ``slots`` = list of slots per host."""
        path = os.path.join(self.dir, "hostfile-%s" % "-".join(str(s) for s in slots))
        with open(path, "w") as f:
            for host, s in zip(self.hosts, slots):
                f.write("%s slots=%d\n" % (host, s))
        return path

    # -- checks ---------------------------------------------------------------------------
    @staticmethod
    def available():
        """None if a cluster can be made here, else the reason why not (for pytest.skip)."""
        if os.geteuid() != 0:
            return "needs root (network namespaces, sshd)"
        for tool in ("ip", "tc", "ssh", "ssh-keygen", "unshare"):
            if shutil.which(tool) is None:
                return "%s not found on PATH" % tool
        if not os.access(SSHD, os.X_OK):
            return "%s not found (Debian: apt-get install openssh-server)" % SSHD
        probe = "tfhvdp%d" % (os.getpid() % 100000)
        if _run(["ip", "netns", "add", probe], check=False) is None:
            return "cannot create network namespaces (ip netns add failed)"
        _run(["ip", "netns", "del", probe], check=False)
        return None

    # -- bringing it up -------------------------------------------------------------------
    def up(self):
        """Creates the hosts and starts their sshd; tears down again if anything fails."""
        reason = self.available()
        if reason:
            raise RuntimeError("cannot make a namespace cluster: %s" % reason)
        if os.path.exists(self.state_path) or self.netns("h1") in _netns_list():
            raise RuntimeError("a cluster named %r exists already (tools/clusters/netns_cluster.py "
                               "down --name %s removes it)" % (self.name, self.name))
        self._install_handlers()
        try:
            self.dir = tempfile.mkdtemp(prefix="tfhvd-netns-%s-" % self.name)
            os.chmod(self.dir, 0o755)
            self._save_state()
            self._make_keys()
            self._make_network()
            self._write_etc()
            self._shape()
            self._start_sshd()
            self._up = True
        except BaseException:
            self.down()
            raise
        return self

    def _log(self, msg):
        if self.verbose:
            sys.stderr.write("netns_cluster: %s\n" % msg)

    def _save_state(self):
        os.makedirs(STATE_DIR, exist_ok=True)
        state = {"name": self.name, "k": self.k, "dir": self.dir,
                 "netns": [self.netns(h) for h in self.hosts],
                 "links": [self.bridge] + [self._veth(h) for h in self.hosts],
                 "sshd_pids": self.sshd_pids, "owner_pid": os.getpid()}
        with open(self.state_path, "w") as f:
            json.dump(state, f)

    def _make_keys(self):
        keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
        _run(keygen + ["-C", "tfhvd-netns-client", "-f", self.client_key])
        shutil.copy(self.client_key + ".pub", os.path.join(self.dir, "authorized_keys"))
        known = []
        for host in self.hosts:
            key = os.path.join(self.dir, "host_%s" % host)
            _run(keygen + ["-C", host, "-f", key])
            with open(key + ".pub") as f:
                pub = " ".join(f.read().split()[:2])
            names = [host, self.address(host)]
            names += ["[%s]:%d" % (n, p) for n in (host, self.address(host))
                      for p in SSH_PORTS if p != 22]
            known.append("%s %s" % (",".join(names), pub))
        with open(os.path.join(self.dir, "known_hosts"), "w") as f:
            f.write("\n".join(known) + "\n")

    def _make_network(self):
        _run(["ip", "link", "add", self.bridge, "type", "bridge"])
        _run(["ip", "link", "set", self.bridge, "up"])
        for host in self.hosts:
            ns, veth = self.netns(host), self._veth(host)
            _run(["ip", "netns", "add", ns])
            _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "p"])
            _run(["ip", "link", "set", veth + "p", "netns", ns])
            _run(["ip", "link", "set", veth, "master", self.bridge])
            _run(["ip", "link", "set", veth, "up"])
            inside = ["ip", "netns", "exec", ns]
            _run(inside + ["ip", "link", "set", veth + "p", "name", "eth0"])
            _run(inside + ["ip", "addr", "add", "%s/24" % self.address(host), "dev", "eth0"])
            _run(inside + ["ip", "link", "set", "eth0", "up"])
            _run(inside + ["ip", "link", "set", "lo", "up"])
            self._log("%s: namespace %s, address %s" % (host, ns, self.address(host)))

    def _write_etc(self):
        """/etc/netns/<ns>/{hosts,ssh/}: what ``ip netns exec`` mounts over /etc."""
        hosts = "127.0.0.1 localhost\n" + "".join(
            "%s %s\n" % (self.address(h), h) for h in self.hosts)
        ssh_dir = os.path.join(self.dir, "etc-ssh")
        os.makedirs(ssh_dir)
        lines = []
        for host in self.hosts:
            lines += ["Host %s" % host, "    HostName %s" % self.address(host)]
        lines += ["Host *",
                  "    User root",
                  "    IdentityFile %s" % self.client_key,
                  "    IdentitiesOnly yes",
                  "    UserKnownHostsFile %s" % os.path.join(self.dir, "known_hosts"),
                  "    GlobalKnownHostsFile /dev/null",
                  "    StrictHostKeyChecking yes",
                  "    CheckHostIP no",
                  "    ConnectTimeout 10",
                  "    LogLevel ERROR", ""]
        with open(os.path.join(ssh_dir, "ssh_config"), "w") as f:
            f.write("\n".join(lines))
        for host in self.hosts:
            etc = os.path.join(NETNS_ETC, self.netns(host))
            os.makedirs(etc, exist_ok=True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write(hosts)
            # ip netns exec bind-mounts this directory over /etc/ssh in the namespace.
            shutil.copytree(ssh_dir, os.path.join(etc, "ssh"))

    def _shape(self):
        notes = []
        applied = {"rate_mbit": None, "delay_ms": None, "notes": notes}
        if self.delay_ms:
            if _qdisc_supported("netem"):
                applied["delay_ms"] = self.delay_ms
            else:
                notes.append("delay not applied: this kernel has no netem qdisc "
                             "(CONFIG_NET_SCH_NETEM)")
        if self.rate_mbit:
            applied["rate_mbit"] = self.rate_mbit
        for host in self.hosts:
            # Both directions: the bridge end shapes what reaches the host, eth0 what
            # leaves it. Each end: netem (delay) as root, tbf (rate) below it.
            ends = [[], ["ip", "netns", "exec", self.netns(host)]]
            for prefix, dev in zip(ends, (self._veth(host), "eth0")):
                parent = ["root"]
                if applied["delay_ms"]:
                    # half the delay each way: a round trip takes delay_ms * ... (see notes)
                    _run(prefix + ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:",
                                   "netem", "delay", "%gms" % (applied["delay_ms"] / 2.0)])
                    parent = ["parent", "1:1"]
                if applied["rate_mbit"]:
                    rate_bytes = applied["rate_mbit"] * 1e6 / 8
                    burst = max(64 * 1024, int(rate_bytes * 0.001))  # >= 1 ms of traffic
                    _run(prefix + ["tc", "qdisc", "add", "dev", dev] + parent +
                         ["tbf", "rate", "%gmbit" % applied["rate_mbit"],
                          "burst", str(burst), "latency", "20ms"])
        if applied["delay_ms"]:
            notes.append("netem delay %g ms each way on each end: one-way host-to-host "
                         "delay %g ms" % (applied["delay_ms"] / 2.0, applied["delay_ms"]))
        self._shaping = applied

    def _start_sshd(self):
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        for host in self.hosts:
            cfg = os.path.join(self.dir, "sshd_%s.conf" % host)
            pidfile = os.path.join(self.dir, "sshd_%s.pid" % host)
            lines = ["Port %d" % p for p in SSH_PORTS] + [
                "ListenAddress %s" % self.address(host),
                "HostKey %s" % os.path.join(self.dir, "host_%s" % host),
                "PidFile %s" % pidfile,
                "AuthorizedKeysFile %s" % os.path.join(self.dir, "authorized_keys"),
                "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "UseDNS no",
                "PrintMotd no",
                "PrintLastLog no",
                "X11Forwarding no",
                # every rank of a job opens a session at once
                "MaxStartups 200:30:400",
                "MaxSessions 200",
                "LogLevel ERROR", ""]
            with open(cfg, "w") as f:
                f.write("\n".join(lines))
            log = open(os.path.join(self.dir, "sshd_%s.log" % host), "wb")
            argv = self.exec_argv(host, [SSHD, "-D", "-e", "-f", cfg])
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True)
            log.close()
            self.sshd_pids[host] = proc.pid
            self._save_state()
        for host in self.hosts:
            self._wait_port(host, 22, 20.0)
        self._log("sshd running on %s" % ", ".join(self.hosts))

    def _wait_port(self, host, port, within):
        deadline = time.monotonic() + within
        probe = ("import socket,sys\ntry:\n socket.create_connection((%r,%d),1).close()\n"
                 "except OSError:\n sys.exit(1)\n" % (self.address(host), port))
        while time.monotonic() < deadline:
            if subprocess.run(["ip", "netns", "exec", self.netns(host), sys.executable, "-c",
                               probe]).returncode == 0:
                return
            pid = self.sshd_pids.get(host)
            if pid and not _alive(pid):
                with open(os.path.join(self.dir, "sshd_%s.log" % host), "rb") as f:
                    raise RuntimeError("sshd on %s exited: %s" % (
                        host, f.read().decode(errors="replace").strip()))
            time.sleep(0.1)
        raise RuntimeError("sshd on %s did not listen on port %d within %gs"
                           % (host, port, within))

    # -- using it -------------------------------------------------------------------------
    def exec_argv(self, host, argv):
        """argv that runs ``argv`` on ``host``: in its network namespace, with its
        /etc/hosts and /etc/ssh, and its host name."""
        return ["ip", "netns", "exec", self.netns(host), "unshare", "--uts", "sh", "-c",
                'hostname "$0" && exec "$@"', host] + list(argv)

    def ssh_argv(self, host, command):
        """argv that runs shell ``command`` on ``host`` over ssh from h1."""
        return self.exec_argv("h1", ["ssh", "-o", "BatchMode=yes", host, command])

    def processes_in(self, host):
        """pids of the processes in ``host``'s network namespace."""
        out = _run(["ip", "netns", "pids", self.netns(host)], check=False) or ""
        return [int(p) for p in out.split()]

    def usage(self):
        h1 = "tools/clusters/netns_cluster.py exec h1 --"
        return "\n".join([
            "cluster %r: %s (addresses %s)" % (
                self.name, ", ".join(self.hosts),
                ", ".join(self.address(h) for h in self.hosts)),
            "link shaping: %s" % json.dumps(self.shaping()),
            "client key: %s   ssh config: %s" % (self.client_key, self.ssh_config),
            "examples (the launcher runs on h1):",
            "  %s ssh h2 hostname" % h1,
            "  %s tfhvdrun -np 4 -H h1:2,h2:2 python train.py" % h1,
            "  %s tfhvdrun -np 4 -H h1:2,h2:2 -p 2222 -i %s python train.py"
            % (h1, self.client_key),
            "  %s mpiexec -n 4 -hosts h1:2,h2:2 python train.py" % h1,
            "tear down: tools/clusters/netns_cluster.py down%s"
            % ("" if self.name == "tfhc" else " --name %s" % self.name)])

    # -- tearing it down ------------------------------------------------------------------
    def down(self):
        """Stops everything in the hosts and removes them; safe to call twice."""
        self._up = False
        teardown(self.name, self.verbose)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        self._restore_handlers()

    def _install_handlers(self):
        atexit.register(self._atexit)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            try:
                old = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
                self._old_handlers[sig] = old
            except ValueError:  # not the main thread: atexit and __exit__ still apply
                pass

    def _restore_handlers(self):
        for sig, old in self._old_handlers.items():
            try:
                signal.signal(sig, old if old is not None else signal.SIG_DFL)
            except ValueError:
                pass
        self._old_handlers = {}

    def _on_signal(self, signum, frame):
        old = self._old_handlers.get(signum)
        self.down()
        if callable(old):
            old(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt
        else:
            sys.exit(128 + signum)

    def _atexit(self):
        if self._up or self.dir:
            self.down()

    def __enter__(self):
        if not self._up:
            self.up()
        return self

    def __exit__(self, *exc):
        self.down()
        return False


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _kill_all(pids, grace=2.0):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def teardown(name="tfhc", verbose=False):
    """Removes cluster ``name``: processes in its namespaces, namespaces, links,
    /etc/netns entries, its temp dir. Works from the state file or, if that is gone,
    from the names alone. Returns a list of what was removed."""
    removed = []
    state = {}
    path = os.path.join(STATE_DIR, "%s.json" % name)
    try:
        with open(path) as f:
            state = json.load(f)
    except (OSError, ValueError):
        pass
    prefix = "%s-h" % name
    namespaces = set(state.get("netns", [])) | set(
        n for n in _netns_list() if n.startswith(prefix) and n[len(prefix):].isdigit())
    pids = [int(p) for p in state.get("sshd_pids", {}).values()]
    for ns in sorted(namespaces):
        out = _run(["ip", "netns", "pids", ns], check=False) or ""
        pids += [int(p) for p in out.split()]
    pids = [p for p in set(pids) if p != os.getpid()]
    _kill_all(pids)
    for ns in sorted(namespaces):
        if _run(["ip", "netns", "del", ns], check=False) is not None:
            removed.append("netns " + ns)
        shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
    links = set(state.get("links", [])) | set(
        l for l in _links() if l == "%s-br" % name or (l.startswith(prefix)))
    for link in sorted(links, key=lambda l: l.endswith("-br")):
        if link in _links() and _run(["ip", "link", "del", link], check=False) is not None:
            removed.append("link " + link)
    if state.get("dir"):
        shutil.rmtree(state["dir"], ignore_errors=True)
    try:
        os.remove(path)
    except OSError:
        pass
    try:
        if not os.listdir(NETNS_ETC):
            os.rmdir(NETNS_ETC)
    except OSError:
        pass
    if verbose and removed:
        sys.stderr.write("netns_cluster: removed %s\n" % ", ".join(removed))
    return removed


def _find_cluster(name):
    """A Cluster object for the running cluster ``name`` (from its state file)."""
    with open(os.path.join(STATE_DIR, "%s.json" % name)) as f:
        state = json.load(f)
    c = Cluster(state["k"], name=name)
    c.dir = state["dir"]
    c.sshd_pids = state.get("sshd_pids", {})
    return c


def main(argv=None):
    p = argparse.ArgumentParser(prog="netns_cluster.py",
                                description="hosts h1..hK as network namespaces with sshd")
    p.add_argument("--name", default="tfhc", help="cluster name (prefix of its namespaces)")
    sub = p.add_subparsers(dest="cmd", required=True)
    for cmd in ("up", "run"):
        s = sub.add_parser(cmd, help="create K hosts" + (" (and stay up)" if cmd == "up" else
                                                          ", run a command on h1, tear down"))
        s.add_argument("k", type=int)
        s.add_argument("--rate-mbit", type=float, help="tbf rate limit of every link")
        s.add_argument("--delay-ms", type=float, help="netem one-way delay between hosts")
        if cmd == "run":
            s.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("down", help="remove the cluster (also leftovers of a crashed run)")
    e = sub.add_parser("exec", help="run a command on a host of a running cluster")
    e.add_argument("host")
    e.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    if args.cmd == "down":
        removed = teardown(args.name)
        print("removed: %s" % (", ".join(removed) or "nothing"))
        return 0
    if args.cmd == "exec":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        c = _find_cluster(args.name)
        return subprocess.call(c.exec_argv(args.host, command or ["sh"]))
    c = Cluster(args.k, name=args.name, rate_mbit=args.rate_mbit, delay_ms=args.delay_ms,
                verbose=True)
    if args.cmd == "up":
        c.up()
        # stays up after this process exits: `down` removes it
        atexit.unregister(c._atexit)
        c._restore_handlers()
        print(c.usage())
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    with c:
        sys.stderr.write(c.usage() + "\n")
        return subprocess.call(c.exec_argv("h1", command or ["sh"]))


if __name__ == "__main__":
    sys.exit(main())
