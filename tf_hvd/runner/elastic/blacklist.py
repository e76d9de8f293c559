"""Hosts an elastic run stops using after one of their ranks failed (Horovod's blacklist).

Without a cooldown range a host stays blacklisted for the rest of the job. With
``--blacklist-cooldown-range MIN MAX`` it comes back after a delay that doubles with
each of its blacklistings, plus a random part so hosts do not all return at once:
the n-th one lasts ``MIN * 2**n + U(0, 1) * MIN`` seconds, kept within [MIN, MAX]
(Horovod's rule). A failure while the host is already blacklisted and cooling down
does not start a new period.

    b = Blacklist(cooldown_range=(10, 100))
    b.add("h2")              # -> 24.6 (seconds until h2 may be used again)
    b.is_blacklisted("h2")   # True until then, False afterwards
"""

import random
import time


class Blacklist(object):
    """Which hosts are blacklisted now; ``clock`` and ``uniform`` are injectable for
    tests (time.monotonic and random.uniform by default)."""

    def __init__(self, cooldown_range=None, clock=time.monotonic, uniform=random.uniform):
        self.cooldown_range = tuple(cooldown_range) if cooldown_range else None
        self._clock, self._uniform = clock, uniform
        self._count = {}   # host -> how many times it was blacklisted
        self._until = {}   # host -> clock value its cooldown ends; None: for the whole job

    def add(self, host):
        """Blacklist ``host``; return the seconds until it comes back (None: never)."""
        now = self._clock()
        if host in self._until:
            until = self._until[host]
            if until is None:
                return None
            if until > now:
                return until - now  # already cooling down: the period stands
        self._count[host] = self._count.get(host, 0) + 1
        if self.cooldown_range is None:
            self._until[host] = None
            return None
        low, high = self.cooldown_range
        delay = low * 2 ** self._count[host] + self._uniform(0.0, 1.0) * low
        delay = max(low, min(high, delay))
        self._until[host] = now + delay
        return delay

    def is_blacklisted(self, host):
        if host not in self._until:
            return False
        until = self._until[host]
        return until is None or until > self._clock()

    def count(self, host):
        """How many times ``host`` was blacklisted."""
        return self._count.get(host, 0)

    def returned(self):
        """Hosts whose cooldown has ended since the last call (each named once)."""
        now = self._clock()
        back = [h for h, until in self._until.items() if until is not None and until <= now]
        for host in back:
            del self._until[host]
        return sorted(back)
