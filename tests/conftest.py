"""Shared fixtures: paths to the slice of real benchmark data in ``tests/data``, and a
guard that fails any test reading the full data beside the checkout (a clone has none)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from support.data import DATA, SHARED

_SHARED_PREFIX = str(SHARED) + "/"


def _refuse_shared_data(event: str, args: tuple) -> None:
    # Runs on every open() in this process: keep it to one cheap prefix test.
    if event == "open" and isinstance(args[0], (str, Path)) and \
            os.path.abspath(args[0]).startswith(_SHARED_PREFIX):
        raise PermissionError(f"tests must read benchmark data from {DATA} (support.data), not {args[0]}: "
                              "a clone of the repository has nothing beside it")


sys.addaudithook(_refuse_shared_data)


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
    from drscore.engine.runtime.calls.team.local_server import LocalRedis, RedisServerMissing

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


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    """The tiny random-weight llama GGUF the local servers serve (made here, never
    downloaded; its tokenizer is built from the bundled reports and prompts)."""
    from support.llama import write_test_model

    return write_test_model(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="session")
def llama_server(tiny_gguf):
    """llama.cpp's own llama-server (built by scripts/install-llama-servers), serving the
    tiny model with several slots and a small window per slot. A machine where it is not
    built fails here, loudly: these tests run, never skip."""
    from support.llama import start_server

    server = start_server("llama-server", tiny_gguf)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_cpp_python(tiny_gguf):
    """llama-cpp-python's server (one request at a time), serving the same model."""
    from support.llama import start_server

    server = start_server("llama-cpp-python", tiny_gguf)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def llama_server_wide(tiny_gguf):
    """llama-server with 2 slots of 32,768 tokens: RACE's long prompts fit."""
    from support.llama import start_server

    server = start_server("llama-server-wide", tiny_gguf)
    yield server
    server.stop()
