"""tf_hvd.elastic re-forming a job after a failure (tf_hvd.elastic.reform), against an
in-memory store standing in for the launcher's rendezvous store.

The launcher lists a failed process until it sees it exit, and only then stops the other
ranks of the failed host (blacklisted) and lists the survivors. A round decided while the
list still names the failed process took in a rank that was about to be stopped, and the
new job then waited for it until its start timeout (a CI failure of
test_elastic_hosts.py: "rank(s) [0] of 3 did not check in").
"""

import threading
import time

import pytest

import tf_hvd.elastic as elastic
from tf_hvd.elastic import reform, store as elastic_store

PREFIX = "tf_hvd/elastic/"


class FakeStore(object):
    def __init__(self, values):
        self.values = dict((k, v.encode()) for k, v in values.items())
        self.lock = threading.Lock()

    def get(self, key):
        with self.lock:
            return self.values.get(key)

    def put(self, key, value):
        with self.lock:
            self.values[key] = value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def store(monkeypatch):
    s = FakeStore({PREFIX + "ids": "0,1,2,3"})
    monkeypatch.setattr(elastic_store, "client", lambda: s)
    monkeypatch.setattr(reform, "SETTLE_SECONDS", 0.2)
    monkeypatch.setenv(elastic.HOST_ENV, "h2")
    monkeypatch.setenv("TF_HVD_ELASTIC_TIMEOUT", "20")
    return s


def test_the_round_waits_for_the_launcher_to_drop_a_failed_host(store):
    # id 0 failed (it never comes); id 1 shares its host and comes before the launcher
    # stops it; ids 2 and 3 survive on the other host. Id 1 is the first that came, so
    # it would decide: it must wait until the launcher lists the survivors.
    results = {}

    def survivor(my_id):
        results[my_id] = reform.reform(my_id, 1)
    threads = [threading.Thread(target=survivor, args=(i,)) for i in (2, 3)]
    for t in threads:
        t.start()
    time.sleep(0.05)

    def launcher():
        time.sleep(1.0)  # longer than the settle time: the old rule had decided by now
        store.put(PREFIX + "ids", b"2,3")
    threading.Thread(target=launcher).start()
    with pytest.raises(elastic.HorovodInternalError,
                       match="id 1.*after the others had formed it without it"):
        reform.reform(1, 1)
    for t in threads:
        t.join(10)
    assert store.get(PREFIX + "round1/members") == b"2,3"
    assert results == {2: (0, ["h2", "h2"]), 3: (1, ["h2", "h2"])}


def test_a_listed_process_that_never_comes_is_left_out_after_the_wait(store, monkeypatch):
    monkeypatch.setattr(reform, "LISTED_WAIT_SECONDS", 0.6, raising=False)
    store.put(PREFIX + "ids", b"1,2,3")
    store.put(PREFIX + "round1/alive/3", b"h2")
    t0 = time.monotonic()
    rank, hosts = reform.reform(2, 1)  # id 1 hangs: listed, never alive
    assert time.monotonic() - t0 >= 0.6
    assert store.get(PREFIX + "round1/members") == b"2,3"
    assert rank == 0


def test_when_every_listed_process_came_the_round_forms_after_the_settle_time(store):
    store.put(PREFIX + "ids", b"2,3")
    store.put(PREFIX + "round1/alive/3", b"h2")
    t0 = time.monotonic()
    rank, _ = reform.reform(2, 1)
    assert 0.2 <= time.monotonic() - t0 < 5.0
    assert rank == 0
    # the one that was not first reads the verdict
    assert reform.reform(3, 1) == (1, ["h2", "h2"])


def test_a_joiner_listed_after_this_process_came_is_not_waited_for(store):
    # the launcher starts a new process while the survivors re-form: it meets the job
    # at its next commit, the survivors do not wait for it
    store.put(PREFIX + "ids", b"2,3")
    store.put(PREFIX + "round1/alive/3", b"h2")

    def launcher():
        time.sleep(0.1)
        store.put(PREFIX + "ids", b"2,3,4")
    threading.Thread(target=launcher).start()
    t0 = time.monotonic()
    rank, _ = reform.reform(2, 1)
    assert time.monotonic() - t0 < 5.0
    assert store.get(PREFIX + "round1/members") == b"2,3"


def test_a_round_of_newcomers_only_fails_saying_the_state_was_lost(store, monkeypatch):
    # ids 0 and 1 held the state and are gone; 2 and 3 joined but never received it
    monkeypatch.setitem(elastic_store.seen, "holds", False)
    store.put(PREFIX + "ids", b"2,3")
    store.put(PREFIX + "commit", b"21")
    store.put(PREFIX + "round1/alive/3", b"h2")
    with pytest.raises(elastic.HorovodInternalError,
                       match=r"committed state was lost.*last commit 21"):
        reform.reform(2, 1)
    assert store.get(PREFIX + "round1/members") == b"lost 21"


def test_a_newcomer_is_waited_for_until_the_launcher_drops_it(store, monkeypatch):
    # id 4 was started by the launcher (listed as joining): the running ranks wait for
    # it past LISTED_WAIT_SECONDS, and form without it once the launcher drops it
    monkeypatch.setattr(reform, "LISTED_WAIT_SECONDS", 0.3)
    store.put(PREFIX + "ids", b"2,3,4")
    store.put(PREFIX + "joining", b"4")
    store.put(PREFIX + "round1/alive/3", b"h2")

    def launcher():
        time.sleep(1.5)
        store.put(PREFIX + "ids", b"2,3")
        store.put(PREFIX + "joining", b"")
    threading.Thread(target=launcher).start()
    t0 = time.monotonic()
    assert reform.reform(2, 1) == (0, ["h2", "h2"])
    assert time.monotonic() - t0 >= 1.5
    assert store.get(PREFIX + "round1/members") == b"2,3"


def test_a_process_the_launcher_asked_to_leave_exits_cleanly(store):
    store.put(PREFIX + "ids", b"2,3")
    store.put(PREFIX + "leaving/1", b"1")
    with pytest.raises(SystemExit) as info:
        reform.reform(1, 1)
    assert info.value.code == 0
