"""Fixtures for the snapshotter's tests: settings under the test's own directory.

Backend-specific fixtures (Redis, PostgreSQL, the S3 gateway) live with the tests that use
them; a service that is absent skips its tests, or fails them when CI is set
(`tests.conftest.service_missing`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ripple.snapshotter.settings import SnapshotterSettings
from tests.certificates import Pki


@pytest.fixture
def snapshot_settings(tmp_path: Path) -> SnapshotterSettings:
    """The embedded default snapshotter under tmp_path, retrying storage quickly."""
    return SnapshotterSettings.embedded(
        tmp_path, retry_base_seconds=0.01, retry_max_seconds=0.05, max_retries=3
    )


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    """The server's and the clients' certificate authorities, and the server's certificate."""
    return Pki(tmp_path / "pki")
