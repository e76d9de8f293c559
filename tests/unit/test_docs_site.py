"""The documentation: the MkDocs site builds in strict mode (every page of the nav exists,
every link and anchor in docs/ resolves, every API entry names something in tf_hvd's
sources), the API reference is generated from the docstrings, and every relative link
of README.md resolves.

The site is built once per test session into a temporary directory (about 2 s).
"""

import html
import os
import re

import pytest
import yaml

from jobrunner import PYTHON, REPO, clean_env, run

README = os.path.join(REPO, "README.md")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    # The README's command (`mkdocs build --strict` in the repository root), only written to
    # a temporary directory instead of site/. No -q: it hides warnings from strict mode,
    # which then has nothing to count, so a broken link would build "successfully".
    out = tmp_path_factory.mktemp("site")
    res = run([PYTHON, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
              timeout=120, env=clean_env(), cwd=REPO)
    assert res.ok, "mkdocs build --strict failed:\n" + res.describe()
    warnings = [line for line in res.output.splitlines()
                if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "mkdocs build --strict warned:\n" + "\n".join(warnings)
    return out


def _text(site, page):
    """The visible text of a built page (tags dropped, entities decoded)."""
    with open(os.path.join(site, page, "index.html") if page else
              os.path.join(site, "index.html")) as f:
        return html.unescape(re.sub(r"<[^>]+>", "", f.read()))


def _nav_pages(nav):
    for entry in nav:
        value = list(entry.values())[0] if isinstance(entry, dict) else entry
        if isinstance(value, list):
            yield from _nav_pages(value)
        else:
            yield value


def test_every_page_of_the_nav_is_built(site):
    with open(os.path.join(REPO, "mkdocs.yml")) as f:
        config = yaml.safe_load(f)
    pages = list(_nav_pages(config["nav"]))
    assert "index.md" in pages and "api/tf_hvd.md" in pages and "knobs.md" in pages
    for page in pages:
        built = "index.html" if page == "index.md" else page[:-len(".md")] + "/index.html"
        assert os.path.isfile(os.path.join(site, built)), page


def test_the_api_reference_shows_signatures_and_docstrings(site):
    api = _text(site, "api/tf_hvd")
    assert re.search(r"allreduce\(tensor, average=None, device_dense='', device_sparse='', "
                     r"compression=Compression\.none, op=None, prescale_factor=1\.0, "
                     r"postscale_factor=1\.0, name=None, process_set=None", api), \
        "hvd.allreduce's signature is missing from api/tf_hvd"
    assert "Reduces a tensor over all processes" in api
    for name in ("broadcast_variables(", "DistributedGradientTape(", "DistributedOptimizer(",
                 "ProcessSet", "init(", "allgather("):
        assert name in api, name
    keras = _text(site, "api/keras")
    assert "DistributedOptimizer(optimizer" in keras
    callbacks = _text(site, "api/callbacks")
    for name in ("BroadcastGlobalVariablesCallback", "MetricAverageCallback",
                 "LearningRateWarmupCallback"):
        assert name in callbacks, name
    elastic = _text(site, "api/elastic")
    for name in ("run(func)", "TensorFlowKerasState", "KerasState", "CommitStateCallback"):
        assert name in elastic, name
    # horovod.run's parameters, in Horovod 0.28.1's order
    assert "run(func, args=(), kwargs=None, num_proc=1, min_num_proc=None" in _text(site, "api/runner")


def test_pages_moved_out_of_the_readme_are_in_the_site(site):
    assert "HOROVOD_FUSION_THRESHOLD" in _text(site, "knobs")
    assert "When a rank fails" in _text(site, "troubleshooting")
    assert os.path.isfile(os.path.join(site, "benchmark-results", "compare.png"))
    assert 'src="../benchmark-results/compare.png"' in open(
        os.path.join(site, "performance", "index.html")).read()


def _github_anchors(markdown):
    """The anchors GitHub makes for a Markdown file's headings (outside code blocks)."""
    anchors, fence = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


def test_every_relative_link_of_the_readme_resolves():
    with open(README) as f:
        text = f.read()
    links = re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S))
    assert len(links) > 20
    broken = []
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # http(s), mailto: not checked here
        path, _, anchor = link.partition("#")
        target = os.path.join(REPO, path) if path else README
        if not os.path.exists(target):
            broken.append(link + " (no such file)")
        elif anchor and target.endswith(".md"):
            with open(target) as f:
                if anchor not in _github_anchors(f.read()):
                    broken.append(link + " (no such heading)")
    assert not broken, "README.md links that do not resolve: %s" % broken
