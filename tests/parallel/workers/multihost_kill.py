"""A rank that records its pid and host, then allreduces until it is stopped.

    python multihost_kill.py DIR    # writes DIR/pid.<rank> = "<pid> <host name>"

The test kills one rank from outside (SIGKILL) and checks how the job ends.
"""

import os
import socket
import sys
import time

import tensorflow as tf

import tf_hvd as hvd

hvd.init()
with open(os.path.join(sys.argv[1], "pid.%d.tmp" % hvd.rank()), "w") as f:
    f.write("%d %s\n" % (os.getpid(), socket.gethostname()))
os.replace(os.path.join(sys.argv[1], "pid.%d.tmp" % hvd.rank()),
           os.path.join(sys.argv[1], "pid.%d" % hvd.rank()))
deadline = time.time() + 120
while time.time() < deadline:
    hvd.allreduce(tf.constant([1.0]), name="tick")
    time.sleep(0.05)
sys.exit("no rank was killed within 120 s")
