"""Who is in an elastic job (tf_hvd/runner/elastic/membership.py), without processes:
the membership's lists are read as tuples and frozensets, and one lost rank walked
through an elastic job (the elastic policy, ElasticHosts, the Membership, a fake group
and store) changes each object's fields only from that object's own methods."""

import argparse
import doctest
import sys

import pytest

from tf_hvd.job.elastic_state import IDS_KEY, SYNCED_KEY, StateHolders
from tf_hvd.runner.agent import agent
from tf_hvd.runner.agent.elastic_policy import ElasticPolicy
from tf_hvd.runner.command_line.launch_config import ElasticSettings, LaunchConfig
from tf_hvd.runner.elastic import membership
from tf_hvd.runner.elastic.blacklist import Blacklist
from tf_hvd.runner.elastic.elastic_hosts import ElasticHosts
from tf_hvd.runner.elastic.membership import Membership
from tf_hvd.runner.processes import failures
from tf_hvd.runner.processes.events import RankExited, Tick


class Proc(object):
    def __init__(self, rank, host):
        self.rank, self.host, self.returncode = rank, host, None

    def outcome(self):
        return failures.Outcome(self.rank, self.host, self.returncode, None, None)

    def __repr__(self):
        return "Proc(%d)" % self.rank


class Store(dict):
    def put(self, key, value):
        self[key] = value


class Group(object):
    """What the agent acts on: starts Procs, records the stops (the policy decides)."""

    signals = argparse.Namespace(pending=lambda: False)

    def __init__(self):
        self.procs, self.stopped = [], []

    def start(self, rank, host, *rest):
        self.procs.append(Proc(rank, host))
        return self.procs[-1]

    def stop(self, procs, term_in=0.0, kill_in=None):
        self.stopped.append(sorted(p.rank for p in procs))

    def outcomes(self):
        return [p.outcome() for p in self.procs if p.returncode is not None]


class Job(object):
    """The mode's side of an elastic run (static_policy.py), with a store and no
    rendezvous: ranks 0, 1 on h1 and 2, 3 on h2, the script listing both."""

    launcher = start_timeout = None
    size = 4

    def __init__(self):
        self.config = LaunchConfig(num_proc=4, command=("true",), elastic=ElasticSettings(
            min_np=2, max_np=4, timeout=600, discovery_script="/bin/true"))
        self.server = argparse.Namespace(store=Store())

    def prepare(self, restart):
        return None

    def starts(self, restart):
        return iter([self.new_rank(i, "h1" if i < 2 else "h2") for i in range(self.size)])

    def new_rank(self, new_id, host):
        return agent.Start(new_id, host, ["true"], {}, None, None, None, None)

    def can_join(self, host):
        return True

    def fault_records(self):
        return {}

    def ended(self, outcome):
        pass

    def close(self):
        pass


def test_the_membership_docstring_runs():
    assert doctest.testmod(membership).failed == 0


def test_its_lists_are_read_only_copies():
    members = Membership(range(2))
    a = Proc(0, "h1")
    members.started(a)
    for name, kind in (("ranks", tuple), ("retired", frozenset), ("lost", tuple),
                       ("ids", tuple), ("pending", tuple)):
        assert isinstance(getattr(members, name), kind), name
        with pytest.raises(AttributeError):
            setattr(members, name, kind())
    members.ranks + (Proc(1, "h1"),)  # a new tuple: the membership's list is untouched
    assert members.ranks == (a,) and members.retire([a]) == [a]
    assert members.retired == frozenset([a])


def test_the_last_holders_are_kept_and_their_loss_is_named_with_the_commit():
    store = Store({"tf_hvd/elastic/commit": b"3"})
    members = Membership(range(2), StateHolders(store, range(2)), Blacklist())
    old = [Proc(0, "h1"), Proc(1, "h1")]
    for p in old:
        members.started(p)
    new = Proc(members.next_id(), "h2")
    members.added(new, new.rank)
    members.wait_for([new.rank])
    # h1 is dropped before the newcomer has the state: its ranks stay, pending
    assert members.keep_last_holders(old, "h1, which is no longer listed") == old
    assert members.pending == tuple(old) and members.without_state() == [2]
    old[0].returncode = old[1].returncode = -9
    members.lose(old[0])
    members.lose(old[1])
    assert members.pending_holders() is None  # they ended: no longer pending
    assert members.state_lost() == (
        "the job failed: its committed state was lost at commit 3: the rank(s) that held it "
        "are gone (rank 0 (on h1) was killed by signal 9 (SIGKILL); rank 1 (on h1) was "
        "killed by signal 9 (SIGKILL)), and rank(s) 2, which joined later, had not received "
        "it; tf_hvd does not start a job over from nothing: restart it from a checkpoint "
        "of your own")
    store[SYNCED_KEY % 2] = b"1"  # had it reached rank 2, the state would live on
    members.refresh()
    assert members.state_lost() is None


def _watch_writes(monkeypatch, classes):
    """Record (writer, object, field) for every attribute set on ``classes``' objects;
    the writer is the ``self`` of the method that set it (the test itself: "test")."""
    writes = []

    def setattr_(self, name, value):
        frame = sys._getframe(1)
        writer = frame.f_locals.get("self")
        if frame.f_code.co_name.startswith("test_"):
            writer = "test"
        writes.append((writer, self, name))
        object.__setattr__(self, name, value)

    for cls in classes:
        monkeypatch.setattr(cls, "__setattr__", setattr_, raising=False)
    return writes


def _containers(obj):
    """ids of the lists, sets and dicts ``obj`` holds in its fields."""
    return set(id(v) for v in vars(obj).values() if isinstance(v, (list, set, dict)))


def test_one_lost_rank_walked_through_an_elastic_job_writes_no_other_object_s_fields(
        monkeypatch):
    writes = _watch_writes(monkeypatch, [ElasticPolicy, ElasticHosts, Membership,
                                         StateHolders, Blacklist])
    logged = []
    job, group = Job(), Group()
    policy = ElasticPolicy(job, log=logged.append)
    assert agent.carry_out(group, policy.begin(None)) is None
    hosts, members = policy.hosts, policy.members
    hosts.discovery = argparse.Namespace(poll=lambda: [("h1", 2), ("h2", 2)])
    r0, r1, r2, r3 = group.procs
    assert members.ranks == (r0, r1, r2, r3)
    agent.carry_out(group, policy.answer(Tick()))
    assert group.procs == [r0, r1, r2, r3]  # full: nobody starts

    # rank 0 on h1 raises: the policy tells the membership, ElasticHosts blacklists h1
    # and retires rank 1 there, the policy decides the job goes on
    r0.returncode = 1
    agent.carry_out(group, policy.answer(RankExited(r0)))
    assert logged == [
        "rank 0 (on h1) exited with code 1; the job goes on with the 2 rank(s) left "
        "(elastic reset 1)",
        "blacklisting h1 after rank 0's failure: no rank starts on it for the rest of the "
        "job (--blacklist-cooldown-range MIN MAX lets it come back); stopping its other "
        "rank(s) 1"]
    assert group.stopped == [[1]]
    assert (members.lost, members.retired, members.taking_part()) == (
        (r0,), frozenset([r1]), [r2, r3])
    assert job.server.store[IDS_KEY] == b"2,3"
    r1.returncode = -15  # retired: its exit is no failure
    agent.carry_out(group, policy.answer(RankExited(r1)))
    agent.carry_out(group, policy.answer(Tick()))
    assert group.procs == [r0, r1, r2, r3]  # h1 is blacklisted: nobody starts there
    assert len(logged) == 2 and policy.failed is None

    r2.returncode = r3.returncode = 0
    for p in (r2, r3):
        agent.carry_out(group, policy.answer(RankExited(p)))
    assert policy.end(group.outcomes()).code == 0

    foreign = [(type(w).__name__, type(o).__name__, name) for w, o, name in writes
               if w is not o and w != "test"]
    assert foreign == [], foreign
    assert set(type(o).__name__ for _, o, _ in writes) == set(
        ["ElasticPolicy", "ElasticHosts", "Membership", "StateHolders", "Blacklist"])
    # and no object holds another's lists: they are shared as copies only
    owners = [policy, hosts, members]
    for i, a in enumerate(owners):
        for b in owners[i + 1:]:
            assert not _containers(a) & _containers(b), (a, b)
    assert all(members._holders is not v for v in vars(hosts).values())
    # ElasticHosts reaches the policy's fields through no reference, the membership
    # neither the policy's nor the hosts': what they change of it goes through its methods
    assert not [v for v in vars(hosts).values() if v is policy]
    assert not [v for v in vars(members).values() if v is policy or v is hosts]
