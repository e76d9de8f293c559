"""Catching the signals the launcher forwards to its ranks.

The handler only records the signal; the supervising loop (running in the main
thread) acts on it, so nothing complicated ever runs inside a signal handler.
"""

import signal
import threading

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signal_name(signum):
    try:
        return signal.Signals(signum).name
    except ValueError:
        return "signal %d" % signum


class SignalCatcher(object):
    def __init__(self, signals=FORWARDED_SIGNALS):
        self._signals = signals
        self._pending = []
        self._old_handlers = {}

    def _record(self, signum, frame):
        self._pending.append(signum)

    def install(self):
        """Start catching (only possible in the main thread; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self._signals:
            self._old_handlers[sig] = signal.signal(sig, self._record)

    def restore(self):
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)
        self._old_handlers = {}

    def pending(self):
        return bool(self._pending)

    def pop_all(self):
        """The signals received since the last call, oldest first."""
        taken = []
        while self._pending:
            taken.append(self._pending.pop(0))
        return taken

    def __enter__(self):
        self.install()
        return self

    def __exit__(self, *exc):
        self.restore()
