"""The elastic store's contract: the keys an elastic job's launcher (tfhvdrun's
ElasticHosts, Ray's ElasticRayExecutor) and its processes (tf_hvd.elastic) share in the
rendezvous store, and which processes hold the job's committed state (StateHolders).

The launcher publishes the ids of the processes taking part (``IDS_KEY``), the newcomers
still to receive the state (``JOINING_KEY``), a change of hosts (``HOSTS_VERSION_KEY``:
the running ranks re-form at their next commit) and who must leave (``LEAVING_KEY``).
The processes write that a newcomer came (``JOINED_KEY``) and received the state
(``SYNCED_KEY``), the job's commit count (``COMMIT_KEY``, rank 0) and, per round of
re-forming, who is alive and holds the state (``round_key``) and the round decided
(``ROUND_KEY``).

The processes a job starts with hold it (the state they were created with is the first
commit). A newcomer (started later on a discovered slot) holds it once ``run`` has synced
it from rank 0 (tf_hvd.elastic writes ``synced/<id>``). Rank 0 writes the job's commit
count at each ``commit()``. The launcher uses this to

* tell the running ranks that newcomers were started (``hosts_version``: their next
  commit raises HostsUpdatedInterrupt and the reset waits for the newcomers);
* list the newcomers still to receive the state (``joining``: the reset waits for them
  until the launcher drops them, --elastic-timeout after their start);
* never stop the last holders on a discovery update while newcomers lack the state, and
  end the job, naming the commit, when the holders are gone all the same.

    holders = StateHolders(store, initial_ids=[0, 1])
    holders.started([2, 3])      # newcomers; the running ranks re-form with them
    holders.refresh()            # -> [2, 3] once they have synced
    holders.late(600)            # newcomers that have not come within 600 s
"""

import time

STORE = "tf_hvd/elastic/"
IDS_KEY = STORE + "ids"                    # every process taking part: "0,1,3"
HOSTS_VERSION_KEY = STORE + "hosts_version"
JOINED_KEY = STORE + "joined/%d"           # a newcomer came to the rendezvous
SYNCED_KEY = STORE + "synced/%d"           # ... and received the committed state
COMMIT_KEY = STORE + "commit"              # the job's last commit (rank 0 writes it)
JOINING_KEY = STORE + "joining"            # newcomers still to receive it: "2,3"
LEAVING_KEY = STORE + "leaving/%d"         # the launcher asks this process to leave
ROUND_KEY = STORE + "round"                # the last round of re-forming decided


def round_key(round_, name):
    """The key ``name`` of re-forming round ``round_`` ("members", "alive/3", ...).

        >>> round_key(2, "members")
        'tf_hvd/elastic/round2/members'
    """
    return STORE + "round%d/%s" % (round_, name)


def format_ids(ids):
    """The value of IDS_KEY / JOINING_KEY.

        >>> format_ids([0, 1, 3]), parse_ids(b"0,1,3"), parse_ids(None)
        (b'0,1,3', [0, 1, 3], [])
    """
    return ",".join(str(i) for i in ids).encode()


def parse_ids(value):
    return [int(i) for i in value.decode().split(",") if i] if value else []


def id_list(ids):
    return ", ".join(str(i) for i in sorted(ids))


class StateHolders(object):
    def __init__(self, store, initial_ids, clock=time.monotonic):
        self.store, self.clock = store, clock
        self.holding = set(initial_ids)
        self.newcomers = {}  # id -> when it was started, until it holds the state
        self._starts = 0

    def started(self, ids):
        """Newcomers ``ids`` were started (and are listed among the job's ids)."""
        now = self.clock()
        for i in ids:
            self.newcomers[i] = now
        self._publish_joining()
        self.changed("started %s" % id_list(ids))

    def leaving(self, ids):
        """Ask ``ids`` to leave at the job's next commit (they are no longer listed)."""
        for i in ids:
            self.store.put(LEAVING_KEY % i, b"1")
        self.changed("removed %s" % id_list(ids))

    def changed(self, what):
        """Tell the running ranks that the job changed: their next commit re-forms it."""
        self._starts += 1
        self.store.put(HOSTS_VERSION_KEY, ("launcher %d: %s" % (self._starts, what)).encode())

    def _publish_joining(self):
        self.store.put(JOINING_KEY, format_ids(sorted(self.newcomers)))

    def refresh(self):
        """Newcomers that have received the state become holders; returns their ids."""
        moved = [i for i in sorted(self.newcomers)
                 if self.store.get(SYNCED_KEY % i) is not None]
        for i in moved:
            del self.newcomers[i]
            self.holding.add(i)
        if moved:
            self._publish_joining()
        return moved

    def checked_in(self, i):
        return self.store.get(JOINED_KEY % i) is not None

    def late(self, timeout):
        """Newcomers that have not come to the rendezvous ``timeout`` s after their start."""
        now = self.clock()
        return [i for i, t in sorted(self.newcomers.items())
                if now - t >= timeout and not self.checked_in(i)]

    def forget(self, i):
        """``i`` is gone (stopped or failed)."""
        self.holding.discard(i)
        if self.newcomers.pop(i, None) is not None:
            self._publish_joining()

    def holds(self, i):
        return i in self.holding

    def commit(self):
        """The job's last commit count that rank 0 reported (0: none yet)."""
        value = self.store.get(COMMIT_KEY)
        try:
            return int(value.decode()) if value else 0
        except ValueError:
            return 0
