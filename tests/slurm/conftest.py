"""Fixtures of tests/slurm (make check-slurm): one throwaway Slurm cluster for the
session (cluster.py; one per worker under pytest -n) and, per test, a gflow daemon in
slurm mode submitting to it, in a sandbox made by the e2e harness (tests/e2e/conftest.py,
loaded under another name)."""
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("e2e_harness", HERE.parent / "e2e" / "conftest.py")
e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(e2e)

from cluster import SlurmCluster, missing_programs  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "long: a test that waits out Slurm's one-minute time limit")


def pytest_collection_modifyitems(items):
    """The long test first: under -n (make check-slurm) each worker has its own cluster,
    and the other tests share out among the workers while one waits out Slurm's minute."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(scope="session")
def cluster():
    missing = missing_programs()
    if missing:
        pytest.skip(f"Slurm is not installed (missing {' '.join(missing)}): "
                    "run scripts/install-deps.sh --slurm")
    root = tempfile.mkdtemp(prefix="gflow-slurm-", dir="/tmp")
    c = SlurmCluster(root)
    try:
        c.start()
    except Exception as e:
        logs = c.logs()
        c.stop()
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"cannot start the Slurm cluster: {e}\n{logs}")
    yield c
    c.stop()
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def make_slurm_gflow(cluster):
    """Factory: a gflow sandbox whose daemon (started unless start=False) submits to the
    session's cluster; extra env on top."""
    made = []

    def make(env=None, start=True):
        full = {
            "SLURM_CONF": str(cluster.conf),
            "PATH": cluster.env["PATH"],
            "GFLOW_BACKEND__KIND": "slurm",
            "GFLOW_BACKEND__POLL_SECS": "1",
        }
        full.update(env or {})
        g = e2e.Gflow(env=full)
        made.append(g)
        if start:
            g.up()
        return g

    yield make
    problems = []
    for g in made:
        problems += g.cleanup()
    # Jobs a failing test left in Slurm would hold the node for the next test.
    cluster.run("scancel", "--user=root")
    if problems:
        pytest.fail("teardown: " + "\n".join(problems))


@pytest.fixture
def sgflow(make_slurm_gflow):
    return make_slurm_gflow()
