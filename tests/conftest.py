"""Shared by tests/unit and tests/parallel: makes tests/jobrunner.py (the one way tests
start processes) importable as ``jobrunner``."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
