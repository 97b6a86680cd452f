from __future__ import annotations

import pytest

from ripple.metabase import Metabase
from tests.metabase.steps import World


@pytest.fixture
def world(db: Metabase) -> World:
    return World(db)
