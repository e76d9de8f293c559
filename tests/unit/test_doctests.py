"""The examples in the docstrings of the TensorFlow-free packages (tf_hvd.job, the
launcher tf_hvd.runner, tf_hvd.scheduler) run as doctests: every module of theirs with a
``>>>`` line is found when the tests are collected, so a module added later is covered.
An example that only shows a call (it needs a job, a cluster or a file) says so with
``# doctest: +SKIP`` on its line, or is a plain ``::`` code block instead."""

import doctest
import importlib
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("tf_hvd/job", "tf_hvd/runner", "tf_hvd/scheduler")


def _modules_with_examples():
    names = []
    for package in PACKAGES:
        for folder, dirs, files in os.walk(os.path.join(REPO, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = os.path.join(folder, name)
                if not name.endswith(".py"):
                    continue
                with open(path, encoding="utf-8") as f:
                    if ">>>" not in f.read():
                        continue
                module = os.path.relpath(path, REPO)[:-len(".py")].replace(os.sep, ".")
                names.append(module[:-len(".__init__")] if name == "__init__.py" else module)
    return names


MODULES = _modules_with_examples()


def test_the_packages_have_examples():
    assert {m.split(".")[1] for m in MODULES} == {"job", "runner", "scheduler"}, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module, name) if t.examples]
    # A ">>>" that no docstring of the module's own holds (a comment, a string) runs nowhere.
    assert tests, "%s has '>>>' lines but no docstring example doctest finds" % name
    report = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    failed = sum(runner.run(test, out=report.append).failed for test in tests)
    assert failed == 0, "".join(report)
