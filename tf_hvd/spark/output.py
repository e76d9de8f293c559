"""The ranks' output on the driver: batches of lines the tasks put in the driver's store
(tf_hvd.spark.task), written to the caller's streams as tfhvdrun writes them,
``[rank]<stdout>:line`` (a timestamp in front with ``prefix_output_with_timestamp``).

    printer = Printer(server.store, job, 2, sys.stdout, sys.stderr, verbose=1,
                      timestamps=False)
    printer.start(); ...; printer.stop()      # stop() prints what is left
"""

import json
import threading

from tf_hvd.job import output_prefix
from tf_hvd.spark import keys

POLL_S = 0.25


class Printer(object):
    """Polls the store for every rank's next batch, prints and deletes it."""

    def __init__(self, store, job, num_proc, stdout, stderr, verbose, timestamps):
        self.store, self.job, self.num_proc = store, job, num_proc
        self.streams = {"stdout": stdout, "stderr": stderr}
        self.verbose, self.timestamps = verbose, timestamps
        self.next = [0] * num_proc
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True,
                                       name="tf_hvd.spark-output")

    def start(self):
        self.thread.start()

    def stop(self):
        if not self.stopped.is_set():
            self.stopped.set()
            if self.thread.is_alive():
                self.thread.join(5)
            self.drain()

    def _loop(self):
        while not self.stopped.wait(POLL_S):
            self.drain()

    def drain(self):
        with self.lock:
            for rank in range(self.num_proc):
                while True:
                    key = keys.output_key(self.job, rank, self.next[rank])
                    data = self.store.get(key)
                    if data is None:
                        break
                    self.store.delete(key)
                    self.next[rank] += 1
                    if self.verbose:
                        self._write(rank, json.loads(data.decode()))

    def _write(self, rank, lines):
        stamp = output_prefix.stamp() if self.timestamps else ""
        for name, line in lines:
            self.streams[name].write(output_prefix.prefixed(rank, name, line, stamp))
        for stream in self.streams.values():
            stream.flush()
