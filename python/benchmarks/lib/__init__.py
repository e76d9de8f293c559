"""The benchmarks' engine and helpers, shared by the drivers beside this folder.

launch (contenders and how each is started), worker (what every process of a contender
runs), rounds (interleaved rounds, spreads and verdicts), report (the one tail of a part
driver: tables, JSON, plot, exit code), targets (the goals compare.py judges by, as data);
and the helpers, one job each: formats, timing, machine, knobs, paths, jsonio, tables.

Imported as ``from lib import launch``: the drivers' folder (python/benchmarks) is on the
path when a driver runs, and the launcher puts it there for the workers.
"""
