"""ElasticRayExecutor's bookkeeping of the committed state, without a Ray cluster: an
in-memory store stands in for the driver's rendezvous store, a clock the test moves for
time, and the actors are never touched (driver.kill_all is replaced).

* a newcomer that has not come within elastic_timeout of its start is stopped, named,
  unlisted and its node blacklisted; one that came is kept;
* a holder that dies while another worker holds the state is dropped quietly; when the
  last holder dies before a newcomer synced, HorovodInternalError names the commit and
  the newcomers; once a newcomer synced, losing the first workers is no failure.
"""

import argparse

import pytest

pytest.importorskip("ray")

from tf_hvd.exceptions import HorovodInternalError  # noqa: E402
from tf_hvd.ray import driver  # noqa: E402
from tf_hvd.ray.elastic import ElasticRayExecutor, _Worker  # noqa: E402
from tf_hvd.job.elastic_state import (COMMIT_KEY, JOINED_KEY, JOINING_KEY,  # noqa: E402
                                      SYNCED_KEY, StateHolders)


class Store(dict):
    def put(self, key, value):
        self[key] = value


class Clock(object):
    now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def executor(monkeypatch):
    killed, logged = [], []
    monkeypatch.setattr(driver, "kill_all", lambda actors: killed.extend(actors))
    monkeypatch.setattr(driver, "log", logged.append)
    settings = ElasticRayExecutor.create_settings(min_np=2, max_np=4, elastic_timeout=60)
    ex = ElasticRayExecutor(settings)
    ex._server = argparse.Namespace(store=Store())
    ex.clock = Clock()
    ex.holders = StateHolders(ex._server.store, [0, 1], clock=ex.clock)
    for i in range(4):
        ex.workers[i] = _Worker(i, "actor%d" % i, "node-a" if i < 2 else "node-b",
                                "10.0.0.%d" % (1 if i < 2 else 2))
    ex.holders.started([2, 3])
    ex.killed, ex.logged = killed, logged
    return ex


def test_a_newcomer_that_does_not_come_in_time_is_stopped_and_named(executor):
    store = executor._server.store
    store.put(JOINED_KEY % 2, b"1")  # worker 2 came to the rendezvous, worker 3 did not
    executor.clock.now += 59
    executor._drop_late()
    assert executor.killed == [] and sorted(executor.workers) == [0, 1, 2, 3]
    executor.clock.now += 1
    executor._drop_late()
    assert executor.killed == ["actor3"] and sorted(executor.workers) == [0, 1, 2]
    assert executor.logged == [
        "worker 3 (on 10.0.0.2) has not come to the rendezvous within 60 s "
        "(elastic_timeout) of its start: stopping it, the others go on without it; no "
        "worker starts on that node again"]
    assert "node-b" in executor.blacklist and executor.lost == [3]
    assert store["tf_hvd/elastic/ids"] == b"0,1,2"  # the reset stops waiting for it
    assert store[JOINING_KEY] == b"2"


def _died(executor, i):
    w = executor.workers.pop(i)
    executor._forget(w, "worker %d on %s died (killed)" % (i, w.ip), {})


def test_the_last_holder_dying_before_the_newcomers_synced_fails_naming_the_commit(
        executor):
    executor._server.store.put(COMMIT_KEY, b"9")
    _died(executor, 0)  # worker 1 still holds the state
    with pytest.raises(HorovodInternalError) as e:
        _died(executor, 1)
    assert str(e.value) == (
        "the job failed: its committed state was lost at commit 9: the worker(s) that held "
        "it are gone (worker 0 on 10.0.0.1 died (killed); worker 1 on 10.0.0.1 died "
        "(killed)), and worker(s) 2, 3, which joined later, had not received it; tf_hvd "
        "does not start a job over from nothing: restart it from a checkpoint of your own")
    assert executor.logged == [str(e.value)]


def test_once_a_newcomer_synced_the_first_workers_may_go(executor):
    executor._server.store.put(SYNCED_KEY % 2, b"7")
    executor._server.store.put(SYNCED_KEY % 3, b"7")
    _died(executor, 0)
    _died(executor, 1)
    assert executor.logged == [] and sorted(executor.workers) == [2, 3]
    assert executor.holders.holds(2) and executor.holders.holds(3)
