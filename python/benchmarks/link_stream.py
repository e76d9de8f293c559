"""Raw TCP throughput through a host's link: the reference a collective is judged by.

One process per host. It listens on a port and counts what arrives; optionally it also
streams bytes to another host for a while. Run on every host of a namespace cluster,
each sending to the next one, it measures what plain TCP moves through every link at
once in the pattern of a ring allreduce (each host sends to one neighbour and receives
from the other); run with a single sender, one stream over one link.

    python link_stream.py --port 5301 --send-to 10.213.0.3:5301 --seconds 4
    -> {"received_bytes": ..., "recv_mbyte_per_s": 117.3, "sent_bytes": ..., ...}

The rate is taken over the middle of the transfer (the first and last quarter second
left out), from the receiver's clock, so connection set-up and TCP's slow start are
not counted. Prints one JSON line on stdout.
"""

import argparse
import json
import socket
import sys
import threading
import time

CHUNK = 4 << 20
EDGE_S = 0.25   # left out at both ends of the receive window


def _receive(listener, samples, done):
    conn, _ = listener.accept()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    buf = bytearray(CHUNK)
    view = memoryview(buf)
    total = 0
    while True:
        n = conn.recv_into(view)
        if n == 0:
            break
        total += n
        samples.append((time.perf_counter(), total))
    conn.close()
    done.set()


def _connect(target, within):
    host, port = target.rsplit(":", 1)
    deadline = time.monotonic() + within
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _send(target, seconds, start_at, sent):
    sock = _connect(target, 30.0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    while time.time() < start_at:  # every host starts streaming at the same moment
        time.sleep(0.005)
    payload = bytes(CHUNK)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sock.sendall(payload)
        sent[0] += len(payload)
    sock.shutdown(socket.SHUT_WR)
    sock.close()


def window_rate(samples, edge=EDGE_S):
    """Bytes per second between edge seconds after the first sample and edge seconds
    before the last one; None if that window is empty.

    >>> window_rate([(0.0, 0), (1.0, 100), (2.0, 300), (3.0, 400)], edge=1.0)
    200.0
    """
    if len(samples) < 2:
        return None
    t_first, t_last = samples[0][0] + edge, samples[-1][0] - edge
    inside = [(t, b) for t, b in samples if t_first <= t <= t_last]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True, help="port to listen on")
    p.add_argument("--bind", default="0.0.0.0")
    p.add_argument("--send-to", default=None, help="HOST:PORT to stream to (optional)")
    p.add_argument("--receive", type=int, default=1, help="1: expect a sender, 0: do not")
    p.add_argument("--seconds", type=float, default=4.0, help="how long to stream")
    p.add_argument("--start-at", type=float, default=0.0,
                   help="wall-clock time (time.time()) at which to start streaming")
    args = p.parse_args(argv)
    samples, done, sent = [], threading.Event(), [0]
    receiver = None
    if args.receive:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((args.bind, args.port))
        listener.listen(1)
        receiver = threading.Thread(target=_receive, args=(listener, samples, done),
                                    daemon=True)
        receiver.start()
    if args.send_to:
        _send(args.send_to, args.seconds, args.start_at, sent)
    if receiver is not None and not done.wait(args.seconds + 60.0):
        raise SystemExit("link_stream: the sender did not finish")
    rate = window_rate(samples)
    print(json.dumps({"received_bytes": samples[-1][1] if samples else 0,
                      "recv_mbyte_per_s": None if rate is None else rate / 1e6,
                      "sent_bytes": sent[0], "seconds": args.seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
