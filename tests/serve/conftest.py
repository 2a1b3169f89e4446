"""One torch thread for these tests (tests/conftest.py's ``one_torch_thread``): the tiny model's
steps are microseconds of work, and on a loaded shared CPU two OpenMP threads spin against each other."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    yield
