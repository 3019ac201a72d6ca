"""Shared test settings: never reach the model hub; the slow files first."""

import json
import os
import signal
from collections import defaultdict
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The suite keeps both cores busy (two workers, each with its studios, browsers and training processes), where
# OpenMP threads that spin while they wait for each other burn the time another process needs: with threads that
# sleep instead, tests/engine/training took 111-114 s against 122-129 s (two rounds, arms alternated). Set before
# torch loads OpenMP; every process a test starts inherits it. The whole suite: 17 min 9 s against 22 min 44 s. Not
# for the studio's own runs: alone on the machine, sleeping threads halve a demo run's speed (benchmarks/throughput.py,
# one round: 2,402 against 4,486 tokens/s); engine.training.cpu_share is how a run makes room for other programs.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Seconds each test file took on 2 idle cores, written by `python -m pytest --store-file-seconds`. Files not in it
# are guessed from their marks: a browser test drives a studio and a run, an integration test starts training
# processes; the rest take a fraction of a second.
FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
SECONDS_BY_MARK = {"e2e": 30.0, "integration": 8.0}
OTHER_SECONDS = 0.2


# Fixtures every test folder may use.
pytest_plugins = ["tests.helpers.small_disk"]


@pytest.fixture(autouse=True)
def _signal_handlers_kept_to_the_test():
    """A test that calls a process's main function in-process (engine.runs.supervisor.supervise) sets that
    process's signal handlers in the test process (its SIGTERM then forwarded to a worker long gone), and an
    ignored signal would stay ignored in every child the next tests start. Each test starts with the handlers the
    test process had."""
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD)
    before = {signum: signal.getsignal(signum) for signum in handled}
    yield
    for signum, handler in before.items():
        if handler is not None and signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


@pytest.fixture(autouse=True, scope="module")
def _image_roots_kept_to_the_module():
    """A studio built in a test module confines images for its whole process, and writes the images datasets hold
    into its workspace or, in demo mode, refuses them (studio.path_guard.confine_images); the next module starts
    without any of it again, as a process without a studio does."""
    names = ("STUDIO_IMAGE_ROOTS", "STUDIO_IMAGE_CACHE", "STUDIO_EMBEDDED_IMAGES")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-file-seconds",
        action="store_true",
        help=f"write the seconds each test file took to {FILE_SECONDS.name} (the order of the next runs)",
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order the test files by their expected time, longest first (each file's tests together, in their order).

    The two workers take whole files (``--dist loadfile``) in this order (``--no-loadscope-reorder``: xdist's own
    reorder puts the files with the most tests first, the many quick ones, which left the few long browser and
    sweep files for the end, on one worker while the other had nothing left to do).
    """
    known = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}
    guessed: dict[str, float] = defaultdict(float)
    for item in items:
        guessed[file_of(item.nodeid)] += expected_seconds(item)
    items.sort(key=lambda item: -known.get(file_of(item.nodeid), guessed[file_of(item.nodeid)]))  # stable sort


def expected_seconds(item: pytest.Item) -> float:
    """The rough time of one test, from its marks."""
    return max((s for mark, s in SECONDS_BY_MARK.items() if item.get_closest_marker(mark)), default=OTHER_SECONDS)


def file_of(nodeid: str) -> str:
    return nodeid.split("::")[0]


_measured: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _measured[file_of(report.nodeid)] += report.duration  # setup, call and teardown; on the controller too


def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.getoption("--store-file-seconds") and not hasattr(session.config, "workerinput"):
        ordered = dict(sorted(((name, round(s, 1)) for name, s in _measured.items()), key=lambda kv: -kv[1]))
        FILE_SECONDS.write_text(json.dumps(ordered, indent=1) + "\n")
