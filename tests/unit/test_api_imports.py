"""tf_hvd's Python layers import downwards only, without cycles.

From the bottom: the library loader (tf_hvd._library), the job's topology and
process sets, the ops, the functions built on them, the training wrappers
(optimizers, tape, the Keras support in tf_hvd._keras), elastic, init
(tf_hvd.basics), the public tf_hvd.keras, and the lazy package facade on top.
Under everything, the job contract (tf_hvd.job: the rendezvous, its
authentication and secret, network and placement helpers, one rank's
environment), which the launchers (tf_hvd.runner, tf_hvd.ray) and the library
(elastic, the scheduler resolver, the data service) share and which imports
nothing else of tf_hvd. The launcher is TensorFlow-free and imports nothing of
the layers above; its rooms import downwards too: processes (rank groups,
output, ssh...), the agent's loop (its actions, RunOutcome), elastic (the
membership, hosts, discovery, blacklist), the policies (the agent room's static and
elastic policies), modes (Gloo, MPI,
jsrun/LSF, Slurm, MPI Operator), the command line (parser to Plan), then its
front door (tf_hvd.runner: tfhvdrun's main and the horovod.run API).

Five checks:
* statically (ast), every module-level import of a tf_hvd module goes to the
  same or a lower layer, and the module graph has no cycle;
* no module uses another module's underscore name (``from tf_hvd.x import _y``
  or ``x._y``): the package's internal API has plain names. PRIVATE_IMPORTS_ALLOWED
  lists exactly the uses left in files being reworked elsewhere; it shrinks to
  empty, and an entry no longer used fails the test too (remove it);
* no function imports a tf_hvd module (that is how cycles hide);
* nothing outside tf_hvd.runner imports the launcher (the facade's lazy
  tf_hvd.run aside): the library and Ray meet it through tf_hvd.job only;
* at run time, each module is the first tf_hvd module imported in a process
  of its own (forked from one that has imported only TensorFlow and Keras),
  so an import that works only after another module was imported fails.
"""

import ast
import importlib
import os
import subprocess
import sys
import traceback

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_DIR = os.path.join(ROOT, "tf_hvd")

# Layers from the bottom; a module may import its own layer or lower ones.
# Keyed by module name or package prefix (the longest match wins).
LAYERS = [
    ("job", ["tf_hvd.job"]),
    # the launcher's rooms, from the bottom; its front door (tf_hvd.runner: launch and
    # the horovod.run API) is in "leaf" above them
    ("launcher processes", ["tf_hvd.runner.processes"]),
    # the agent room is split around elastic: its loop, actions and RunOutcome below it,
    # its two policies above it, since they ask elastic's Membership who is in the job;
    ("launcher agent loop", ["tf_hvd.runner.agent"]),
    ("launcher elastic", ["tf_hvd.runner.elastic"]),
    ("launcher policies", ["tf_hvd.runner.agent.static_policy",
                           "tf_hvd.runner.agent.elastic_policy"]),
    ("launcher modes", ["tf_hvd.runner.modes"]),
    ("launcher command line", ["tf_hvd.runner.command_line"]),
    ("leaf", ["tf_hvd.build_info", "tf_hvd.platform_floor", "tf_hvd.exceptions",
              "tf_hvd.reduce_ops", "tf_hvd.compression", "tf_hvd.runner", "tf_hvd.scheduler",
              "tf_hvd.horovod_names", "tf_hvd.sharded_rows", "tf_hvd.checkpoint"]),
    ("loader", ["tf_hvd._library"]),
    ("topology", ["tf_hvd.topology", "tf_hvd.tf_threads", "tf_hvd.process_sets"]),
    # tf_hvd.ops is a package: naming, raw, reduce, exchange, gradients
    ("ops", ["tf_hvd.ops"]),
    ("functions", ["tf_hvd.functions", "tf_hvd.hooks"]),
    ("training", ["tf_hvd.allreduce_grads", "tf_hvd.gradient_aggregation",
                  "tf_hvd.reduction_params", "tf_hvd.tape", "tf_hvd.adasum_optimizer",
                  "tf_hvd._keras", "tf_hvd.optimizer", "tf_hvd.sync_batch_norm"]),
    ("elastic", ["tf_hvd.elastic"]),
    ("init", ["tf_hvd.basics", "tf_hvd.mpi_ops"]),
    ("keras", ["tf_hvd.keras"]),
    ("integrations", ["tf_hvd.ray", "tf_hvd.data", "tf_hvd.spark"]),
    ("facade", ["tf_hvd"]),
]

# Every module is checked for function-level imports of the package's own modules.
FUNCTION_IMPORTS_CHECKED_OUTSIDE = ()


def _modules():
    """{module name: path} of every .py file of the package."""
    found = {}
    for directory, _, files in os.walk(PACKAGE_DIR):
        for filename in files:
            if not filename.endswith(".py"):
                continue
            path = os.path.join(directory, filename)
            name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
            if name.endswith(".__init__"):
                name = name[:-len(".__init__")]
            found[name] = path
    return found


MODULES = _modules()


def _layer(module):
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > len(best[1]):
                    best = (index, prefix)
    return None if best is None else best[0]


def _is_package(module):
    return MODULES.get(module, "").endswith("__init__.py")


def _resolve(module, node):
    """The tf_hvd modules an import statement in ``module`` loads."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "tf_hvd"]
    base = node.module or ""
    if node.level:
        package = module if _is_package(module) else module.rsplit(".", 1)[0]
        for _ in range(node.level - 1):
            package = package.rsplit(".", 1)[0]
        base = package + ("." + base if base else "")
    if base.split(".")[0] != "tf_hvd":
        return []
    targets = []
    for alias in node.names:
        sub = base + "." + alias.name
        targets.append(sub if sub in MODULES else base)
    return targets


def _with_packages(importer, target):
    """``target`` and the packages Python imports before it, less the
    importer's own packages (a submodule may import while its package runs)."""
    mine = importer.split(".")
    own = set(".".join(mine[:i]) for i in range(1, len(mine)))
    parts = target.split(".")
    chain = [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return [m for m in chain if m not in own and m != importer]


class _ImportVisitor(ast.NodeVisitor):
    """Module-level imports (also inside if/try/class at module level) and
    imports inside functions, separately."""

    def __init__(self, module):
        self.module = module
        self.depth = 0
        self.top, self.in_function = [], []

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def _import(self, node):
        for target in _resolve(self.module, node):
            (self.in_function if self.depth else self.top).append((target, node.lineno))

    visit_Import = visit_ImportFrom = _import


def _scan():
    graph, function_imports = {}, []
    for module, path in sorted(MODULES.items()):
        with open(path) as f:
            visitor = _ImportVisitor(module)
            visitor.visit(ast.parse(f.read(), path))
        edges = set()
        for target, _ in visitor.top:
            edges.update(_with_packages(module, target))
        graph[module] = sorted(edges)
        function_imports += [(module, target, line) for target, line in visitor.in_function]
    return graph, function_imports


def _find_cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph.get(node, ()):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in MODULES if _layer(m) is None)
    assert not unplaced, "place these modules in LAYERS: %s" % unplaced


def test_module_level_imports_go_down_and_have_no_cycle():
    graph, _ = _scan()
    upward = ["%s (%s) imports %s (%s)" % (m, LAYERS[_layer(m)][0], t, LAYERS[_layer(t)][0])
              for m, targets in graph.items() for t in targets
              if t in MODULES and _layer(t) > _layer(m)]
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)
    assert _find_cycle(graph) is None, "import cycle: %s" % " -> ".join(_find_cycle(graph))


def test_no_function_level_imports_of_tf_hvd():
    _, function_imports = _scan()
    found = ["%s:%d imports %s" % (m, line, t) for m, t, line in function_imports
             if not m.startswith(FUNCTION_IMPORTS_CHECKED_OUTSIDE)]
    assert not found, "import these at module level:\n" + "\n".join(found)


# The package facade gives tf_hvd.run lazily (importlib, no import statement) and
# Nothing outside the launcher imports it (the package facade's lazy ``run`` aside).
LAUNCHER, LAUNCHER_IMPORTED_BY = "tf_hvd.runner", ("tf_hvd",)


def _launcher_imports(module, source):
    """Imports of the launcher (tf_hvd.runner...) in ``module``, at any depth."""
    visitor = _ImportVisitor(module)
    visitor.visit(ast.parse(source))
    return sorted(set((t, line) for t, line in visitor.top + visitor.in_function
                      if t == LAUNCHER or t.startswith(LAUNCHER + ".")))


def test_nothing_outside_the_launcher_imports_it():
    """tfhvdrun is a program above the library: Ray's elastic executor and tf_hvd.elastic
    share only the job contract (tf_hvd.job) with it, the store's keys included."""
    found = []
    for module, path in sorted(MODULES.items()):
        if module.startswith(LAUNCHER + ".") or module in (LAUNCHER,) + LAUNCHER_IMPORTED_BY:
            continue
        with open(path) as f:
            found += ["%s:%d imports %s" % (module, line, t)
                      for t, line in _launcher_imports(module, f.read())]
    assert not found, "only tf_hvd.runner imports tf_hvd.runner:\n" + "\n".join(found)
    assert _launcher_imports("tf_hvd.ray.elastic", "from tf_hvd.runner.elastic import x\n"
                             "def f():\n    import tf_hvd.runner\n") == [
        ("tf_hvd.runner", 3), ("tf_hvd.runner.elastic", 1)]


def test_the_checks_see_a_cycle_and_a_hidden_import():
    """The scanners themselves: a two-module cycle and a function-level import."""
    assert _find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]
    assert _find_cycle({"a": ["b"], "b": []}) is None
    visitor = _ImportVisitor("tf_hvd.ops")
    visitor.visit(ast.parse("import os\nfrom tf_hvd import topology\n"
                            "def f():\n    from tf_hvd.basics import init\n"))
    assert visitor.top == [("tf_hvd.topology", 2)]
    assert visitor.in_function == [("tf_hvd.basics", 4)]


# (importer, module, name): uses of another module's underscore name allowed for a while
# (none now); an entry no longer used fails the check, so the list only shrinks.
PRIVATE_IMPORTS_ALLOWED = set()


def _is_private(name):
    return name.startswith("_") and not name.startswith("__")


def _private_uses(module, source):
    """{(module used, underscore name): first line} for each ``from tf_hvd.x import _y``
    and each ``x._y`` where ``x`` names a tf_hvd module, anywhere in ``module``.
    Underscore *modules* (``from tf_hvd import _library``) are modules, not names."""
    tree = ast.parse(source)
    found, bound = {}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tf_hvd":
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound["tf_hvd"] = "tf_hvd"
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, ast.ImportFrom(module=node.module, level=node.level,
                                                   names=[ast.alias(name="-")]))
            for alias, target in zip(node.names, _resolve(module, node)):
                if base and target == base[0] + "." + alias.name:
                    bound[alias.asname or alias.name] = target  # a submodule
                elif _is_private(alias.name):
                    found.setdefault((target, alias.name), node.lineno)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        parts, value = [], node.value
        while isinstance(value, ast.Attribute):
            parts.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            used = ".".join([bound[value.id]] + parts)
            if used in MODULES and used != module:
                found.setdefault((used, node.attr), node.lineno)
    return found


def test_no_module_uses_another_modules_underscore_name():
    """The package's internal API has plain names; the allow-list holds exactly the uses
    left in files being reworked elsewhere (PRIVATE_IMPORTS_ALLOWED)."""
    found = {}
    for module, path in sorted(MODULES.items()):
        with open(path) as f:
            for (used, name), line in _private_uses(module, f.read()).items():
                found[(module, used, name)] = line
    new = ["%s:%d uses %s.%s" % (m, line, u, n) for (m, u, n), line in sorted(found.items())
           if (m, u, n) not in PRIVATE_IMPORTS_ALLOWED]
    assert not new, ("give these a public name in the module that defines them (or move "
                     "them to the one that uses them):\n" + "\n".join(new))
    # set(): the allow-list is written as a set, and as "{}" (a dict) once it is empty
    gone = sorted(set(PRIVATE_IMPORTS_ALLOWED) - set(found))
    assert not gone, "no longer used; remove from PRIVATE_IMPORTS_ALLOWED: %s" % gone


def test_the_underscore_check_sees_both_spellings():
    source = ("from tf_hvd.topology import _check, rank\n"
              "from tf_hvd import ops as o, _library\n"
              "import tf_hvd.process_sets as ps\n"
              "def f():\n    return o._raw(ps._id(_library.x), ps.__name__)\n")
    assert _private_uses("tf_hvd.functions", source) == {
        ("tf_hvd.topology", "_check"): 1, ("tf_hvd.ops", "_raw"): 5,
        ("tf_hvd.process_sets", "_id"): 5}


def _import_each_first():
    """Run as a script: import each module as the first tf_hvd module of a
    forked process; print the failures."""
    import tensorflow  # noqa: F401 - paid once, before forking
    import keras  # noqa: F401
    assert not [m for m in sys.modules if m.split(".")[0] == "tf_hvd"]
    failures = 0
    for module in sorted(MODULES):
        if module.endswith("__main__"):
            continue
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            code = 0
            try:
                importlib.import_module(module)
            except BaseException:  # noqa: BLE001 - reported to the parent
                os.write(write_end, traceback.format_exc()[-3000:].encode())
                code = 1
            os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            report = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        if status:
            failures += 1
            print("FAILED: import %s as the first tf_hvd module\n%s" % (module, report))
    print("imported %d modules, %d failed" % (len(MODULES), failures))
    return failures


def test_each_module_imports_first_in_a_fresh_process():
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, os.path.abspath(__file__)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=240)
    assert result.returncode == 0 and " 0 failed" in result.stdout, result.stdout[-6000:]



def test_hvd_elastic_right_after_import_tf_hvd():
    """As in Horovod: ``@hvd.elastic.run`` works with nothing else imported."""
    code = ("import tf_hvd as hvd, sys; sys.stdout.write(hvd.elastic.__name__ + ' ' + "
            "hvd.elastic.run.__name__ + ' ' + hvd.elastic.TensorFlowKerasState.__name__)")
    result = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            timeout=120)
    assert result.stdout == "tf_hvd.elastic run TensorFlowKerasState", result.stderr[-3000:]


if __name__ == "__main__":
    sys.exit(1 if _import_each_first() else 0)
