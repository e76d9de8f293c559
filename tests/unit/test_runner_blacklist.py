"""Elastic runs' host blacklist (tf_hvd/runner/elastic/blacklist.py) with an injected clock, and its
wiring into the launcher's joiner: a host where a rank failed gets no new rank until its
cooldown ends (or never, without --blacklist-cooldown-range)."""

import argparse

import pytest

from tf_hvd.job.rank_env import RankEnv
from tf_hvd.runner.command_line import parser as cli
from tf_hvd.runner.command_line.launch_config import ElasticSettings, LaunchConfig
from tf_hvd.runner.command_line.parser import check_cooldown_range
from tf_hvd.runner.elastic.blacklist import Blacklist
from tf_hvd.runner.elastic.elastic_hosts import ElasticHosts
from tf_hvd.runner.elastic.membership import Membership
from tf_hvd.job.elastic_state import StateHolders
from tf_hvd.runner.modes.gloo_run import GlooJob
from tf_hvd.runner.agent import agent
from tf_hvd.runner.processes.output import log_line


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_without_a_cooldown_range_a_host_stays_blacklisted_for_the_job():
    clock = Clock()
    b = Blacklist(clock=clock)
    assert not b.is_blacklisted("h1")
    assert b.add("h1") is None
    clock.now += 1e6
    assert b.is_blacklisted("h1") and not b.is_blacklisted("h2")
    assert b.returned() == [] and b.count("h1") == 1
    assert b.add("h1") is None and b.count("h1") == 1  # already out for good


def test_the_cooldown_doubles_with_each_blacklisting_and_is_capped_by_max():
    clock = Clock()
    b = Blacklist(cooldown_range=(10, 100), clock=clock, uniform=lambda lo, hi: 0.5)
    expected = [25.0, 45.0, 85.0, 100.0, 100.0]  # 10 * 2**n + 0.5 * 10, within [10, 100]
    for n, delay in enumerate(expected, 1):
        assert b.add("h") == delay
        assert b.count("h") == n
        clock.now += delay - 0.01
        assert b.is_blacklisted("h") and b.returned() == []
        clock.now += 0.01
        assert not b.is_blacklisted("h")
        assert b.returned() == ["h"] and b.returned() == []  # named once


def test_a_failure_during_the_cooldown_does_not_start_a_new_period():
    clock = Clock()
    b = Blacklist(cooldown_range=(10, 100), clock=clock, uniform=lambda lo, hi: 0.0)
    assert b.add("h") == 20.0
    clock.now += 5
    assert b.add("h") == 15.0 and b.count("h") == 1
    clock.now += 15
    assert not b.is_blacklisted("h")
    assert b.add("h") == 40.0 and b.count("h") == 2


def test_random_delays_stay_within_the_range():
    b = Blacklist(cooldown_range=(3, 7), clock=Clock())
    delays = []
    for host in range(200):
        delays.append(b.add("h%d" % host))
    assert all(6 <= d <= 7 for d in delays)  # 3 * 2 + U(0, 3), capped at 7
    assert len(set(delays)) > 1


@pytest.mark.parametrize("argv, fragment", [
    (["--min-np", "1", "--blacklist-cooldown-range", "0", "5"], "1 <= MIN <= MAX <= 3600"),
    (["--min-np", "1", "--blacklist-cooldown-range", "9", "5"], "got 9 5"),
    (["--min-np", "1", "--blacklist-cooldown-range", "1", "3601"], "got 1 3601"),
    (["--blacklist-cooldown-range", "1", "5"], "needs --min-np"),
])
def test_cooldown_range_usage_errors(argv, fragment):
    with pytest.raises(cli.UsageError) as info:
        cli.parse(["-np", "2"] + argv + ["python", "x.py"])
    assert fragment in str(info.value)
    a = cli.parse(["-np", "2", "--min-np", "1", "--blacklist-cooldown-range", "2", "9", "x"])
    assert a.blacklist_cooldown_range == [2, 9]
    assert check_cooldown_range((1, 3600)) is None


# -- wiring: the joiner starts no rank on a blacklisted host ------------------------------

class FakeProc(object):
    def __init__(self, rank, host="localhost", returncode=None):
        self.rank, self.host, self.returncode = rank, host, returncode


class FakeGroup(object):
    """The rank group the agent acts on, its ranks started already (``procs``)."""

    signals = argparse.Namespace(pending=lambda: False)

    def __init__(self, n, hosts=None):
        self.procs = [FakeProc(r, hosts[r] if hosts else "localhost") for r in range(n)]
        self.spawned = []
        self.starts = []
        self.retired = []

    def stop(self, procs, term_in=0.0, kill_in=None):  # the real one SIGTERMs them
        for p in procs:
            self.retired.append(p.rank)
            p.returncode = -15

    def start(self, rank, host, argv, env, cwd=None, output_dir=None, stdin_data=None,
              redact=None):
        self.spawned.append(rank)
        self.starts.append((rank, host, argv, env, stdin_data))
        return FakeProc(rank, host)

    def run(self, answer):
        """Carry out what ``answer`` (a generator of actions) yields, as the agent does."""
        return agent.carry_out(self, answer)


class FakeStore(dict):
    def put(self, key, value):
        self[key] = value


def _joiner(cooldown_range, clock, loopback_only=True, group=None, max_np=3):
    slots = [argparse.Namespace(rank=r, hostname="localhost") for r in range(3)]
    config = LaunchConfig(num_proc=3, command=("true",), elastic=ElasticSettings(
        min_np=2, max_np=max_np, timeout=5, discovery_script="/bin/true",
        cooldown_range=cooldown_range))
    plan = argparse.Namespace(
        config=config, slots=slots, loopback_only=loopback_only,
        is_local=lambda h: h == "localhost",
        launcher_address="127.0.0.1" if loopback_only else "10.0.0.1",
        rank_envs=lambda addr, port: [RankEnv(size=3)],
        rank_process=lambda slot, rank, secret, cwd: (
            ["ssh", slot.hostname, "HOROVOD_RANK=%s" % rank.to_environ()["HOROVOD_RANK"]],
            {}, (secret + "\n").encode()))
    job = GlooJob(plan)  # as its prepare() leaves it
    job.server, job.secret = argparse.Namespace(port=1, store=FakeStore()), "s3cret"
    members = Membership(range(3), StateHolders(job.server.store, range(3)),
                         Blacklist(cooldown_range, clock=clock, uniform=lambda lo, hi: 0.0))
    for proc in group.procs:
        members.started(proc)
    joiner = ElasticHosts(job, members)
    joiner.discovery = argparse.Namespace(poll=lambda: [("localhost", 3)])
    return joiner


@pytest.mark.parametrize("cooldown_range", [None, (2, 8)])
def test_the_joiner_skips_a_blacklisted_host_until_its_cooldown_ends(cooldown_range, capsys):
    # Hosts keyed by the name given: rank 0 on 127.0.0.1, ranks 1 and 2 on localhost.
    # Rank 1 fails: localhost is blacklisted and its other rank (2) stopped.
    clock = Clock()
    sup = FakeGroup(3, hosts=["127.0.0.1", "localhost", "localhost"])
    joiner = _joiner(cooldown_range, clock, group=sup)
    joiner.discovery = argparse.Namespace(poll=lambda: [("localhost", 2), ("127.0.0.1", 1)])
    joiner.job.plan.is_local = lambda h: h in ("localhost", "127.0.0.1")
    sup.procs[1].returncode = -9
    for line in sup.run(joiner.rank_lost(sup.procs[1])):
        log_line(line)
    assert sup.retired == [2]
    assert joiner.server.store["tf_hvd/elastic/ids"] == b"0"
    sup.run(joiner.tick())
    assert sup.spawned == []
    clock.now += 3.99
    sup.run(joiner.tick())
    assert sup.spawned == []
    clock.now += 0.01
    sup.run(joiner.tick())
    err = capsys.readouterr().err.splitlines()
    if cooldown_range is None:
        assert sup.spawned == []
        assert err == ["tfhvdrun: blacklisting localhost after rank 1's failure: no rank "
                       "starts on it for the rest of the job (--blacklist-cooldown-range MIN "
                       "MAX lets it come back); stopping its other rank(s) 2"], err
    else:
        assert sup.spawned == [3, 4]  # --max-np 3: two more beside rank 0
        assert [s[1] for s in sup.starts] == ["localhost", "localhost"]
        assert err == [
            "tfhvdrun: blacklisting localhost after rank 1's failure (failure 1 of this "
            "host): no rank starts on it for 4.0 s (--blacklist-cooldown-range 2 8); "
            "stopping its other rank(s) 2",
            "tfhvdrun: localhost's blacklist cooldown is over: ranks may start on it again",
            "tfhvdrun: host discovery: 2 slot(s) on localhost; started rank(s) 3, 4, which "
            "the running ranks wait for at their next commit (at most 5 s, "
            "--elastic-timeout) to hand them the committed state"], err
        assert joiner.server.store["tf_hvd/elastic/ids"] == b"0,3,4"


def test_the_joiner_counts_ranks_per_host_and_starts_remote_ones_over_ssh(capsys):
    # localhost:3 is full (3 running); h2 offers 2 slots but --max-np 4 leaves room for
    # one: it starts over ssh with the secret on stdin only. A loopback-only job says
    # why it cannot use h2 and starts nothing there.
    for loopback_only in (False, True):
        sup = FakeGroup(3)
        joiner = _joiner(None, Clock(), loopback_only=loopback_only, group=sup, max_np=4)
        joiner.discovery = argparse.Namespace(poll=lambda: [("localhost", 3), ("h2", 2)])
        sup.run(joiner.tick())
        sup.run(joiner.tick())
        err = capsys.readouterr().err.splitlines()
        if loopback_only:
            assert sup.starts == []
            assert err == ["tfhvdrun: host discovery: h2 is not this machine, but this "
                           "job's ranks listen on loopback only (this machine has no other "
                           "address); start the job with --network-interfaces so ranks on "
                           "other hosts can join"], err
            continue
        assert err == ["tfhvdrun: host discovery: 2 slot(s) on h2; started rank(s) 3, "
                       "which the running ranks wait for at their next commit (at most 5 s, --elastic-timeout) to hand them the committed state"], err
        [(rank, host, argv, env, stdin)] = sup.starts
        assert (rank, host, argv) == (3, "h2", ["ssh", "h2", "HOROVOD_RANK=3"])
        assert stdin == b"s3cret\n" and "s3cret" not in " ".join(argv)
        assert "HOROVOD_GLOO_RENDEZVOUS_SECRET" not in env
        assert joiner.server.store["tf_hvd/elastic/ids"] == b"0,1,2,3"
