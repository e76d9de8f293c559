"""Agreeing, through the launcher's store, on who takes part in the job's next form
(a round): the processes that come are ranked in the order of their ids.

    rank, hosts = reform(my_id, round_)     # every process of the round
    # rank: this process's new rank; hosts: each new rank's host

The first process to come decides, once no newcomer has come for SETTLE_SECONDS and
every process the launcher lists has come (or LISTED_WAIT_SECONDS have passed); the
others read its verdict (the round's members key).
"""

import os
import time

from tf_hvd.elastic import store
from tf_hvd.exceptions import HorovodInternalError
from tf_hvd.job import rank_env
from tf_hvd.job.elastic_state import (COMMIT_KEY, HOSTS_VERSION_KEY, IDS_KEY, JOINING_KEY,
                                      LEAVING_KEY, ROUND_KEY, parse_ids, round_key)

SETTLE_SECONDS = 1.0  # survivors wait this long without a newcomer before forming the job
# ...and, while the launcher still lists a process that has not come to the round, this
# long: the launcher lists a failed process until it sees it exit, and only then stops
# the other ranks of its (blacklisted) host; deciding before that would form the round
# with processes about to be stopped. A listed process that never comes (it hangs) is
# left out after this.
LISTED_WAIT_SECONDS = 30.0
# A reset that waits for a newcomer the launcher started waits until the launcher drops
# it (it does so --elastic-timeout after starting it); this much longer at most.
JOINING_GRACE_SECONDS = 30.0


def _ids(s):
    return parse_ids(s.get(IDS_KEY))  # the launcher publishes every process's id


def _joining(s):
    return parse_ids(s.get(JOINING_KEY))


def reform(my_id, round_, announce=False):
    """Agree with the other processes of round ``round_`` on who takes part; return
    (rank, size): ranks in the order of the processes' ids."""
    launched = rank_env.RankEnv.from_environ(os.environ)
    timeout = 600.0 if launched.elastic_timeout is None else launched.elastic_timeout
    entered = time.monotonic()
    min_np = launched.elastic_min_np or 1
    with store.client() as s:
        # the value is this process's host: the new topology groups ranks by it
        if store.seen["holds"]:
            s.put(round_key(round_, "holds/%d" % my_id), b"1")
        s.put(round_key(round_, "alive/%d" % my_id), store.my_host().encode())
        if announce:  # the running ranks see this at their next commit and come here
            s.put(HOSTS_VERSION_KEY, ("joined %d" % my_id).encode())
        # Listed when this process came: the ones worth waiting for (a joiner the
        # launcher starts later meets the job at its next commit, as before).
        listed_on_entry = set(_ids(s))
        if s.get(LEAVING_KEY % my_id) is not None:
            leave(my_id)
        alive, stable_since = None, time.monotonic()
        while True:
            decided = s.get(round_key(round_, "members"))
            if decided is not None:
                if decided.startswith(b"lost"):
                    raise HorovodInternalError(lost_message(decided, round_))
                members = [int(r) for r in decided.decode().split(",")]
                break
            listed = _ids(s)
            now_alive = [i for i in listed if s.get(round_key(round_, "alive/%d" % i))]
            if now_alive != alive:
                alive, stable_since = now_alive, time.monotonic()
            stable = time.monotonic() - stable_since
            missing = [i for i in listed if i in listed_on_entry and i not in alive]
            # Newcomers are waited for until the launcher drops them (it does so
            # --elastic-timeout after starting one that has not come): the committed
            # state must reach them before anything else changes.
            joining = _joining(s)
            if (stable >= SETTLE_SECONDS and alive and alive[0] == my_id
                    and len(alive) >= min_np
                    and (not missing or (stable >= LISTED_WAIT_SECONDS and
                                         not [i for i in missing if i in joining]))):
                if not [i for i in alive if s.get(round_key(round_, "holds/%d" % i))]:
                    # Every process that held the committed state is gone: forming a job
                    # of newcomers would start over from nothing.
                    verdict = ("lost %s" % (s.get(COMMIT_KEY) or b"0").decode()).encode()
                    s.put(round_key(round_, "members"), verdict)
                    raise HorovodInternalError(lost_message(verdict, round_))
                # The first process decides (the members key is the round's verdict).
                s.put(round_key(round_, "members"), ",".join(str(i) for i in alive).encode())
                s.put(ROUND_KEY, str(round_).encode())
                members = alive
                break
            waited_for = [i for i in missing if i in joining]
            limit = timeout + (JOINING_GRACE_SECONDS if waited_for else 0.0)
            if time.monotonic() - entered > limit:
                raise HorovodInternalError("elastic reset: the job did not re-form within "
                                           "--elastic-timeout")
            time.sleep(0.1)
        hosts = [(s.get(round_key(round_, "alive/%d" % i)) or b"?").decode()
                 for i in members]
    if my_id not in members:
        with store.client() as s:
            leaving = s.get(LEAVING_KEY % my_id)
        if leaving is not None:
            leave(my_id)
        raise HorovodInternalError("elastic reset: this process (id %d) reached round %d "
                                   "after the others had formed it without it"
                                   % (my_id, round_))
    return members.index(my_id), hosts


def leave(my_id):
    """The launcher no longer lists this process (its host left the discovered hosts):
    the others have its last commit; it ends here, as a Horovod worker whose host was
    removed does."""
    print("tf_hvd.elastic: the launcher removed this process (id %d) from the job; the "
          "others go on with its last commit" % my_id, flush=True)
    raise SystemExit(0)


def lost_message(verdict, round_):
    """The error of a round whose verdict is ``lost <last commit>``."""
    return ("elastic reset: the job's committed state was lost: every process that held it "
            "is gone (last commit %s) and the processes left, which joined later, never "
            "received it; not starting over from nothing (round %d)"
            % (verdict.decode().split(" ", 1)[-1], round_))
