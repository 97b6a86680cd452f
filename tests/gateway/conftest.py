"""A gateway on a free loopback port for every test that asks for one, over the `db`
fixture's metabase (SQLite and PostgreSQL), with a user whose key signs boto3's requests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

from ripple.gateway.data import ObjectData
from ripple.gateway.ratelimit import RateLimit
from ripple.gateway.request import Services
from ripple.gateway.server import Gateway, bind
from ripple.identity import AccessKey, Keyring, create_user
from ripple.metabase import Metabase
from tests.waiting import wait_for


@dataclass
class Running:
    url: str
    services: Services
    key: AccessKey
    secret: str
    data_dir: Path

    def client(
        self, access_key: str | None = None, secret: str | None = None, **config: Any
    ) -> Any:
        """A boto3 S3 client for this gateway (path-style, no retries)."""
        settings = {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 1}}
        settings.update(config)
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=access_key or self.key.access_key_id,
            aws_secret_access_key=secret or self.secret,
            config=Config(**settings),
        )

    def sns(self, access_key: str | None = None, secret: str | None = None) -> Any:
        """A boto3 SNS client for this gateway's topic API (no retries)."""
        return boto3.client(
            "sns",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=access_key or self.key.access_key_id,
            aws_secret_access_key=secret or self.secret,
            config=Config(retries={"max_attempts": 1}),
        )


def start_gateway(services: Services) -> Gateway:
    gateway = Gateway(services, bind("127.0.0.1:0"))
    gateway.start()
    wait_for(lambda: gateway.started, what="the gateway to start")
    return gateway


@pytest.fixture
def services(db: Metabase, tmp_path: Path) -> Services:
    return Services(
        db=db,
        data=ObjectData(tmp_path / "objects"),
        keyring=Keyring(db, tmp_path, ttl=0.0),
        deletes=RateLimit(db, "delete", 10_000, 10_000),
    )


@pytest.fixture
def gateway(services: Services, tmp_path: Path) -> Iterator[Running]:
    _, key, secret = create_user(services.db, tmp_path, "alice")
    server = start_gateway(services)
    try:
        yield Running(server.url, services, key, secret, tmp_path)
    finally:
        server.stop()


@pytest.fixture
def s3(gateway: Running) -> Any:
    return gateway.client()


def unanswered_writes(services: Services) -> int:
    """How many object writes of this gateway wait to be committed or are being committed."""
    return services.commits.unanswered()
