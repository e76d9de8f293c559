"""rs_chain.py on 2 namespace hosts with 1 Gbit/s links, once per library given.

    sudo python hosts_rs.py 256K,2M OLD/_hvd.so NEW/_hvd.so
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools", "clusters"))
import netns_cluster  # noqa: E402

with netns_cluster.Cluster(2, name="tfsb", rate_mbit=1000) as c:
    layout = ",".join("%s:1" % h for h in c.hosts)
    cmd = [sys.executable, "-m", "tf_hvd.runner", "-np", "2", "-H", layout, sys.executable,
           os.path.join(HERE, "rs_chain.py"), "--sizes", sys.argv[1], "--chain", "10",
           "--reps", "5"]
    for lib in sys.argv[2:]:
        env = dict(os.environ, TF_HVD_LIBRARY=lib, PYTHONPATH=REPO)
        out = subprocess.run(c.exec_argv("h1", cmd), env=env, cwd=REPO, capture_output=True,
                             text=True)
        print(lib, [l for l in out.stdout.splitlines() if "RESULT" in l] or out.stderr[-2000:])
