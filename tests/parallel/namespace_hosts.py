"""The namespace cluster for multi-host tests: hosts h1..hK that are network namespaces
with their own sshd (tools/clusters/netns_cluster.py), made and torn down once per test module.

Most modules take the ``cluster`` fixture (tests/parallel/conftest.py: two hosts, or
``CLUSTER_HOSTS = 3`` in the module); a module that builds more on the hosts (Slurm's
daemons, Ray's nodes, a pod's files) opens its own with :func:`namespace_cluster`::

    @pytest.fixture(scope="module")
    def slurm():
        with namespace_cluster(2, __name__) as c, slurm_cluster.SlurmCluster(c) as s:
            yield s

Without root, ip or sshd the test is skipped, with the reason.
"""

import contextlib
import os
import sys
import zlib

import psutil
import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "tools", "clusters")
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)

import netns_cluster  # noqa: E402


def cluster_name(owner):
    """At most 8 characters (netns_cluster's limit), different for each test module and
    each pytest process, so that two runs on one machine never meet:
    ``cluster_name("test_multihost")`` is ``"t"`` + 3 digits of the module + 4 of the pid."""
    return "t%03d%04d" % (zlib.crc32(owner.encode()) % 1000, os.getpid() % 10000)


@contextlib.contextmanager
def namespace_cluster(k, owner):
    """A running ``netns_cluster.Cluster`` of ``k`` hosts for ``owner`` (a module name),
    torn down on leaving; skips the calling test when this machine cannot make one."""
    reason = netns_cluster.Cluster.available()
    if reason:
        pytest.skip("no namespace cluster: %s" % reason)
    with netns_cluster.Cluster(k, name=cluster_name(owner)) as c:
        yield c


def leftovers(cluster, since_pids=()):
    """What is still running in the cluster's namespaces, other than its sshd listeners
    (and the pids in ``since_pids``): one "host: pid command line" line each."""
    sshd = set(cluster.sshd_pids.values())
    left = []
    for host in cluster.hosts:
        for pid in cluster.processes_in(host):
            if pid in sshd or pid in since_pids:
                continue
            try:
                p = psutil.Process(pid)
                if p.ppid() in sshd and "sshd" in p.name():
                    continue  # a session sshd being torn down
                left.append("%s: %d %s" % (host, pid, " ".join(p.cmdline())[:120]))
            except psutil.NoSuchProcess:
                pass
    return left
