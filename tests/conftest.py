"""Shared fixtures: paths to the real benchmark data beside the checkout."""
from __future__ import annotations

from pathlib import Path

import pytest

from support.data import DATA


@pytest.fixture(scope="session")
def drb() -> Path:
    return DATA / "drb"


@pytest.fixture(scope="session")
def rigorous_data() -> Path:
    return DATA / "rigorous"


@pytest.fixture(scope="session")
def redis_server():
    """A real redis-server on a free loopback port for the whole session (temp dir, no
    persistence, stopped afterwards). A machine without redis-server fails here, loudly:
    the team tests must run, never be skipped (./scripts/test installs it when it can)."""
    from drscore.engine.runtime.team.local_server import LocalRedis, RedisServerMissing

    try:
        server = LocalRedis()
        server.start()
    except RedisServerMissing as e:
        pytest.fail(str(e), pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    """The session's Redis, emptied before each test."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url
