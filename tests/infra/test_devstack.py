"""The dev/test backing servers for real: NATS JetStream, Postgres 18 + pgvector, Redis."""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import psutil
import pytest

from spotter_cli.devstack import (
    DevStack,
    create_database,
    create_database_sync,
    drop_database,
    psql,
)


@pytest.fixture(scope="module")
def infra_stack():
    stack = DevStack(ephemeral=True, use_env=False)  # our own servers even when *_URL are set
    t0 = time.monotonic()
    stack.start()
    stack.measured_start = time.monotonic() - t0
    try:
        yield stack
    finally:
        stack.stop()


def test_starts_fast(infra_stack):
    assert infra_stack.measured_start < 20, infra_stack.measured_start
    assert set(infra_stack.servers) == {"nats", "postgres", "redis"}
    assert infra_stack.urls.nats_url.startswith("nats://127.0.0.1:")
    assert infra_stack.urls.database_url.startswith("postgresql://spotter:spotter@127.0.0.1:")
    assert infra_stack.urls.database_url.endswith("/spotter")
    assert infra_stack.urls.redis_url.startswith("redis://127.0.0.1:")


def test_nats_jetstream_puback(infra_stack):
    import nats

    async def go():
        nc = await nats.connect(infra_stack.urls.nats_url, connect_timeout=5)
        try:
            js = nc.jetstream()
            name = f"INFRA_{uuid.uuid4().hex[:8]}"
            await js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
            ack = await js.publish(f"{name.lower()}.hello", b"hi", timeout=5)
            assert ack.stream == name and ack.seq == 1
            msg = await js.get_msg(name, 1)
            assert msg.data == b"hi"
        finally:
            await nc.close()

    asyncio.run(go())


def test_postgres_has_pgvector(infra_stack):
    import asyncpg

    async def go():
        conn = await asyncpg.connect(infra_stack.urls.database_url)
        try:
            exts = {r["extname"] for r in await conn.fetch("SELECT extname FROM pg_extension")}
            assert "vector" in exts
            assert (await conn.fetchval("SHOW server_version")).startswith("18")
            dist = await conn.fetchval("SELECT '[1,2,3]'::vector <-> '[1,2,5]'::vector")
            assert dist == pytest.approx(2.0)
            assert await conn.fetchval("SHOW server_encoding") == "UTF8"
        finally:
            await conn.close()

    asyncio.run(go())


def test_create_and_drop_database(infra_stack):
    import asyncpg

    name = f"infra_{uuid.uuid4().hex[:8]}"

    async def go():
        url = await create_database(infra_stack.urls.database_url, name)  # the spotter URL is superuser too
        assert url.endswith(f"/{name}") and url.startswith("postgresql://spotter:spotter@")
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 1
        finally:
            await conn.close()  # drop_database forces disconnects anyway
        await drop_database(infra_stack.urls.database_url, name)

    asyncio.run(go())
    left = psql(infra_stack.admin_database_url, f"SELECT count(*) FROM pg_database WHERE datname = '{name}'")
    assert left.strip() == "0"
    with pytest.raises(ValueError):
        create_database_sync(infra_stack.admin_database_url, "bad-name; DROP")


def test_redis_set_get(infra_stack):
    from redis import Redis

    r = Redis.from_url(infra_stack.urls.redis_url, decode_responses=True)
    try:
        r.set("infra:k", "v", ex=30)
        assert r.get("infra:k") == "v"
        assert r.config_get("save")["save"] == ""
        assert r.config_get("appendonly")["appendonly"] == "no"
    finally:
        r.close()


def test_stop_leaves_no_process_or_files():
    stack = DevStack(ephemeral=True, use_env=False)
    stack.start()
    root = stack.root
    procs = []
    for s in stack.servers.values():
        p = psutil.Process(s.pid)
        procs.append(p)
        procs.extend(p.children(recursive=True))  # postgres backends, checkpointer, ...
    assert len(procs) > 3
    stack.stop()
    gone, alive = psutil.wait_procs(procs, timeout=5)
    assert not alive, alive
    assert not root.exists()


def test_busy_default_port_moves_and_running_servers_are_reused(tmp_path, capfd):
    # hold redis' default port (if nobody else does already): the stack must pick another one
    holder = socket.socket()
    try:
        holder.bind(("127.0.0.1", 6379))
        holder.listen()
    except OSError:
        pass  # already busy: same situation
    first = DevStack(root=tmp_path / "state", nats_url="nats://unused:1", database_url="postgresql://unused/x",
                     use_env=False)
    second = DevStack(root=tmp_path / "state", nats_url="nats://unused:1", database_url="postgresql://unused/x",
                      use_env=False)
    try:
        urls = first.start()
        assert list(first.servers) == ["redis"]  # configured URLs are used as given
        assert urls.nats_url == "nats://unused:1"
        assert first.servers["redis"].port != 6379
        assert "6379 is busy" in capfd.readouterr().err
        # a second stack on the same state dir reuses the running server and leaves it running
        assert second.start().redis_url == urls.redis_url
        assert "redis" in second.reused and not second.servers
        second.stop()
        assert first.servers["redis"].is_running()
    finally:
        second.stop()
        first.stop()
        holder.close()
