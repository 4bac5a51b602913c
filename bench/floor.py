"""The floor: what a plain follow-up turn costs with Spotter's guarantees and nothing else, written as
plainly as this stack allows, so `make bench` can say how far above it Spotter's own CPU per turn is.

Three processes, on the same Postgres, NATS (JetStream), Redis and simulator as the platform, the same
libraries and the same event loop (uvloop), and none of Spotter's framework: no FastAPI, no FastStream,
no pydantic contracts, no settings, no logging, no metrics, no traces.

- **gateway** (uvicorn + httptools, a bare ASGI app): the POST of `…/agent/messages`; the token looked up
  in a dict (Spotter remembers verified tokens); one statement (the caller's membership and the
  conversation, its last event); one Redis script (a rate-limit counter and the conversation's lease);
  the command published to JetStream and its ack awaited; then the conversation's events, received on
  core NATS, written as SSE frames until `done`.
- **worker** (the orchestrator's part): the command pulled from a durable JetStream consumer (Spotter's
  `bus.Puller`: as many asked for as there are free workers); the turn
  row and the history read side by side; the user's message written while billing reserves the call's
  budget (a NATS request); the model called over aiohttp and its SSE parsed by hand; text stored, then
  published, in 100 ms windows that end at the same moments for every turn (the first delta at once),
  every conversation's appends that arrive together in one statement (Spotter's `Batches`; that and the puller are the pieces of Spotter it uses); the reply and its
  `message_done` in one statement; billing settles (a NATS request); `done` and the turn's status in
  one statement; the lease let go; the command acked.
- **billing**: reserve (one Redis script: spent + holds + the call's bound under the cap, then hold it)
  and settle (one Redis script, then the day's usage row upserted; settles that arrive together, one
  statement).

What it leaves out, on purpose, is everything that is not the guarantee itself: ambient search, the
recent-activity block, the org and session reads, the pre-check, the page context, compaction, titles,
redelivery bookkeeping (attempts, replays, the lease's fence), typed errors, idempotency keys, the
watchdog, structured logs, metrics. So its CPU per turn is a floor, not a rival: nobody could ship it.

    python bench/floor.py gateway|worker|billing   # one role; configured by the environment (FLOOR_*)
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

STREAM, SUBJECT, DURABLE = "FLOOR", "floor.cmd.send", "floor-worker"
EVENTS = "floor.events."
RESERVE, SETTLE = "floor.billing.reserve", "floor.billing.settle"
WINDOW_S = 0.1  # Spotter's text_delta window (SPOTTER_DELTA_FLUSH_MS)
WORKERS = 64
LEASE_MS = 45_000
CAP_USD_MICROS = 10**12  # a metered org whose cap is never reached: the reservation is still made
HOLD_USD_MICROS = 200_000


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"floor: {name} is not set")
    return value


async def connect_nats():
    import nats
    return await nats.connect(env("NATS_URL"), max_reconnect_attempts=-1)


async def _keep_session(conn: Any) -> None:
    """No reset round trip when a connection goes back to the pool (as Spotter's pools)."""


async def create_pool():
    import asyncpg
    return await asyncpg.create_pool(env("DATABASE_URL"), min_size=2, max_size=10, reset=_keep_session)


def create_redis():
    import redis.asyncio as aredis
    return aredis.from_url(env("REDIS_URL"), decode_responses=True)


# ---------------------------------------------------------------------------------------------- gateway

_ADMIT = """
SELECT c.last_event_seq FROM ai_conversations c
  JOIN memberships m ON m.organization_id = c.organization_id AND m.user_id = c.user_id AND m.status = 'active'
 WHERE c.id = $1 AND c.organization_id = $2 AND c.user_id = $3"""

# KEYS: the user's rate-limit counter, the conversation's lease. ARGV: the turn, the lease's ttl.
_ADMIT_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0"""


class Gateway:
    def __init__(self) -> None:
        self.tokens = {env("FLOOR_TOKEN"): env("FLOOR_USER_ID")}
        self.feeds: dict[str, asyncio.Queue[bytes | None]] = {}

    async def start(self) -> None:
        self.pool = await create_pool()
        self.redis = create_redis()
        self.admit_script = self.redis.register_script(_ADMIT_SCRIPT)
        self.nc = await connect_nats()
        self.js = self.nc.jetstream()
        await self.nc.subscribe(EVENTS + "*", cb=self.on_event)

    async def on_event(self, msg: Any) -> None:
        feed = self.feeds.get(msg.subject[len(EVENTS):])
        if feed is not None:
            feed.put_nowait(msg.data)

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await self.start()
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        parts = scope["path"].split("/")  # /organizations/{org}/agent/messages
        if scope["method"] != "POST" or len(parts) != 5 or parts[3:] != ["agent", "messages"]:
            return await respond(send, 404, b'{"code":"not_found"}')
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        user_id = self.tokens.get(auth.removeprefix("Bearer "))
        if user_id is None:
            return await respond(send, 401, b'{"code":"unauthorized"}')
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            asked = json.loads(body)
            conversation_id, org_id, text = str(uuid.UUID(asked["conversationId"])), str(uuid.UUID(parts[2])), str(asked["message"])
        except (ValueError, KeyError, TypeError):
            return await respond(send, 400, b'{"code":"invalid_request"}')
        last = await self.pool.fetchval(_ADMIT, uuid.UUID(conversation_id), uuid.UUID(org_id), uuid.UUID(user_id))
        if last is None:
            return await respond(send, 404, b'{"code":"not_found"}')
        turn_id = str(uuid.uuid4())
        if not await self.admit_script(keys=[f"floor:rate:{user_id}", f"floor:lease:{conversation_id}"], args=[turn_id, LEASE_MS]):
            return await respond(send, 409, b'{"code":"conversation_busy"}')
        feed: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.feeds[conversation_id] = feed
        try:
            command = json.dumps({"turn": turn_id, "conversation": conversation_id, "org": org_id, "user": user_id,
                                  "message": text}).encode()
            await self.js.publish(SUBJECT, command)
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
            while True:
                data = await feed.get()
                event = json.loads(data)
                frame = f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event['data'])}\n\n".encode()
                if event["type"] == "done":
                    await send({"type": "http.response.body", "body": frame})
                    return
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        finally:
            del self.feeds[conversation_id]


async def respond(send: Callable[[dict], Awaitable[None]], status: int, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


def serve_gateway() -> None:
    import uvicorn
    uvicorn.run(Gateway(), host="127.0.0.1", port=int(env("FLOOR_PORT")), loop="uvloop", http="httptools",
                lifespan="on", log_level="warning", access_log=False)


# ----------------------------------------------------------------------------------------------- worker

_BEGIN = "INSERT INTO ai_turns (id, conversation_id, command_id) VALUES ($1, $2, $3)"
_HISTORY = """SELECT role::text, content FROM ai_messages
               WHERE conversation_id = $1 AND role <> 'system_note' ORDER BY position"""
_MESSAGE = """
WITH c AS (UPDATE ai_conversations SET last_message_at = now(), last_message_position = last_message_position + 1
            WHERE id = $2 RETURNING last_message_position)
INSERT INTO ai_messages (id, conversation_id, role, content, turn_id, position)
SELECT $1, $2, 'user', $3::jsonb, $4, c.last_message_position FROM c"""
_EVENTS = """
WITH batch AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[]) WITH ORDINALITY AS b(conv, turn, type, data, ord)),
counts AS (SELECT conv, count(*) AS n FROM batch GROUP BY conv),
locked AS (SELECT c.id FROM ai_conversations c JOIN counts ON counts.conv = c.id ORDER BY c.id FOR UPDATE OF c),
bumped AS (UPDATE ai_conversations c SET last_event_seq = c.last_event_seq + counts.n
             FROM counts JOIN locked ON locked.id = counts.conv WHERE c.id = counts.conv
           RETURNING c.id, c.last_event_seq AS last, counts.n),
stored AS (INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
           SELECT b.conv, bumped.last - bumped.n + row_number() OVER (PARTITION BY b.conv ORDER BY b.ord), b.turn, b.type, b.data::json
             FROM batch b JOIN bumped ON bumped.id = b.conv)
SELECT id, last, n FROM bumped"""
_REPLY = """
WITH c AS (UPDATE ai_conversations SET last_message_at = now(), last_event_seq = last_event_seq + 1,
                                       last_message_position = last_message_position + 1
            WHERE id = $2 RETURNING last_message_position, last_event_seq),
m AS (INSERT INTO ai_messages (id, conversation_id, role, content, stop_reason, input_tokens, output_tokens, turn_id, position)
      SELECT $1, $2, 'assistant', $3::jsonb, $4, $5, $6, $7, c.last_message_position FROM c),
t AS (UPDATE ai_turns SET input_tokens = $5, output_tokens = $6, model_calls = 1 WHERE id = $7),
e AS (INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
      SELECT $2, c.last_event_seq, $7, 'message_done', $8::json FROM c)
SELECT last_event_seq FROM c"""
_DONE = """
WITH s AS (UPDATE ai_conversations SET last_event_seq = last_event_seq + 1 WHERE id = $1 RETURNING last_event_seq),
t AS (UPDATE ai_turns SET status = 'completed', finished_at = now() WHERE id = $2)
INSERT INTO ai_conversation_events (conversation_id, seq, turn_id, type, data)
SELECT $1, last_event_seq, $2, 'done', $3::json FROM s RETURNING seq"""
_RELEASE_SCRIPT = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


@dataclass
class _Append:
    conversation: uuid.UUID
    turn: uuid.UUID
    type: str
    data: str
    seq: asyncio.Future[int] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class Worker:
    async def start(self) -> None:
        import aiohttp
        from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig
        from spotter_shared.batches import Batches
        from spotter_shared.bus import Puller

        self.pool = await create_pool()
        self.redis = create_redis()
        self.release_script = self.redis.register_script(_RELEASE_SCRIPT)
        self.nc = await connect_nats()
        js = self.nc.jetstream()
        await js.add_stream(StreamConfig(name=STREAM, subjects=["floor.cmd.>"]))
        self.running: set[asyncio.Task[None]] = set()
        # Spotter's own puller (bus.Puller, as its orchestrator pulls turn commands): as many asked for as
        # there are free workers, in one pull request.
        self.puller = Puller(self.nc, stream=STREAM, durable=DURABLE, subject=SUBJECT,
                             config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30), max_workers=WORKERS,
                             poll_s=5.0, deliver=self._deliver)
        self.http = aiohttp.ClientSession(base_url=env("ANTHROPIC_BASE_URL"))
        self.log = Batches(self._write)
        with open(env("FLOOR_REQUEST")) as f:  # a request body the orchestrator sent: its model, system, tools
            template = json.load(f)
        self.model, self.max_tokens = template["model"], template["max_tokens"]
        self.prefix = json.dumps({k: template[k] for k in ("model", "max_tokens", "system", "tools", "stream")
                                  if k in template} | {"stream": True})[:-1] + ', "messages": '
        self.headers = {"x-api-key": env("ANTHROPIC_API_KEY"), "anthropic-version": "2023-06-01",
                        "content-type": "application/json"}

    async def run(self) -> None:
        await self.start()
        await self.puller.start()
        await asyncio.Event().wait()

    def _deliver(self, msg: Any, done: Any) -> None:
        task = asyncio.create_task(self._handle(msg))
        self.running.add(task)
        task.add_done_callback(lambda t: (self.running.discard(t), done()))

    async def _handle(self, msg: Any) -> None:
        await self.turn(json.loads(msg.data))
        await msg.ack()

    async def _write(self, batch: list[_Append]) -> None:
        try:
            rows = await self.pool.fetch(_EVENTS, [a.conversation for a in batch], [a.turn for a in batch],
                                         [a.type for a in batch], [a.data for a in batch])
        except Exception as exc:  # noqa: BLE001
            for a in batch:
                a.seq.set_exception(exc)
            return
        last = {r["id"]: r["last"] - r["n"] for r in rows}
        for a in batch:
            last[a.conversation] += 1
            a.seq.set_result(last[a.conversation])

    async def emit(self, conversation: str, turn: uuid.UUID, type_: str, data: dict[str, Any]) -> None:
        """Stored, then published."""
        encoded = json.dumps(data)
        append = _Append(uuid.UUID(conversation), turn, type_, encoded)
        self.log.add("log", append)
        seq = await append.seq
        await self.nc.publish(EVENTS + conversation, f'{{"seq": {seq}, "type": "{type_}", "data": {encoded}}}'.encode())

    async def turn(self, cmd: dict[str, Any]) -> None:
        conversation, turn = cmd["conversation"], uuid.UUID(cmd["turn"])
        conv = uuid.UUID(conversation)
        _, history = await asyncio.gather(self.pool.execute(_BEGIN, turn, conv, cmd["turn"]),
                                          self.pool.fetch(_HISTORY, conv))
        content = [{"type": "text", "text": cmd["message"]}]
        messages = [{"role": "assistant" if r["role"] == "assistant" else "user", "content": json.loads(r["content"])}
                    for r in history] + [{"role": "user", "content": content}]
        call = f"{cmd['turn']}:0"
        held, _ = await asyncio.gather(
            self.nc.request(RESERVE, json.dumps({"org": cmd["org"], "call": call, "amount": HOLD_USD_MICROS}).encode(), timeout=5),
            self.pool.execute(_MESSAGE, uuid.uuid4(), conv, json.dumps(content), turn))
        if held.data != b"ok":
            raise RuntimeError(f"reservation refused: {held.data!r}")
        text, usage, stop = await self.call_model(conversation, turn, messages)
        reply = [{"type": "text", "text": "".join(text)}]
        done = {"stopReason": stop}
        seq = await self.pool.fetchval(_REPLY, uuid.uuid4(), conv, json.dumps(reply), stop, usage.get("input_tokens", 0),
                                       usage.get("output_tokens", 0), turn, json.dumps(done))
        await self.nc.publish(EVENTS + conversation, json.dumps({"seq": seq, "type": "message_done", "data": done}).encode())
        cost = usage.get("input_tokens", 0) * 3 + usage.get("output_tokens", 0) * 15
        await self.nc.request(SETTLE, json.dumps({"org": cmd["org"], "user": cmd["user"], "call": call, "cost": cost,
                                                  "in": usage.get("input_tokens", 0), "out": usage.get("output_tokens", 0)}).encode(),
                              timeout=5)
        final = {"conversationId": conversation, "usage": usage}
        seq = await self.pool.fetchval(_DONE, conv, turn, json.dumps(final))
        await self.release_script(keys=[f"floor:lease:{conversation}"], args=[cmd["turn"]])
        await self.nc.publish(EVENTS + conversation, json.dumps({"seq": seq, "type": "done", "data": final}).encode())

    async def call_model(self, conversation: str, turn: uuid.UUID, messages: list[dict[str, Any]]) -> tuple[list[str], dict, str]:
        body = self.prefix + json.dumps(messages) + "}"
        text: list[str] = []
        held: list[str] = []
        usage: dict[str, int] = {}
        stop = "end_turn"
        writes: list[asyncio.Task[None]] = []
        window: asyncio.TimerHandle | None = None

        last = 0.0  # when text was last written: at most one write per window, the first delta at once (as Spotter)

        def flush() -> None:
            nonlocal window, last
            window = None
            last = loop.time()
            if held:
                chunk = "".join(held)
                held.clear()
                # After the write before it, as it is now (two flushes can come before either task starts).
                writes.append(asyncio.ensure_future(self._after(writes[-1] if writes else None, conversation, turn, chunk)))

        loop = asyncio.get_running_loop()
        async with self.http.post("/v1/messages", data=body.encode(), headers=self.headers) as r:
            r.raise_for_status()
            async for line in r.content:
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                kind = event["type"]
                if kind == "content_block_delta" and event["delta"].get("type") == "text_delta":
                    piece = event["delta"]["text"]
                    text.append(piece)
                    held.append(piece)
                    if loop.time() - last >= WINDOW_S:
                        if window is not None:
                            window.cancel()
                        flush()
                    elif window is None:
                        # Windows end at multiples of WINDOW_S for every turn, as Spotter's (emitter.window_end).
                        window = loop.call_at((math.floor(loop.time() / WINDOW_S) + 1) * WINDOW_S, flush)
                elif kind == "message_start":
                    usage.update(event["message"].get("usage", {}))
                elif kind == "message_delta":
                    usage.update(event.get("usage", {}))
                    stop = event["delta"].get("stop_reason") or stop
        if window is not None:
            window.cancel()
        flush()
        if writes:
            await writes[-1]
        return text, {k: v for k, v in usage.items() if isinstance(v, int)}, stop

    async def _after(self, before: asyncio.Task[None] | None, conversation: str, turn: uuid.UUID, chunk: str) -> None:
        """A window's text, in order: after the write before it."""
        if before is not None:
            await before
        await self.emit(conversation, turn, "text_delta", {"delta": chunk})


# ---------------------------------------------------------------------------------------------- billing

# KEYS: the org's spend, its holds. ARGV: the call, its bound, the cap.
_RESERVE_SCRIPT = """
local spent = tonumber(redis.call('GET', KEYS[1]) or '0')
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(v) end
if spent + held + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1"""
_SETTLE_SCRIPT = "redis.call('HDEL', KEYS[2], ARGV[1]) return redis.call('INCRBY', KEYS[1], ARGV[2])"
_USAGE = """
INSERT INTO ai_usage_daily (organization_id, user_id, day, messages, input_tokens, output_tokens, cost_usd_micros)
SELECT o, u, current_date, n, i, x, c FROM unnest($1::uuid[], $2::uuid[], $3::int[], $4::int[], $5::int[], $6::bigint[]) AS s(o, u, n, i, x, c)
ON CONFLICT (organization_id, user_id, day) DO UPDATE
   SET messages = ai_usage_daily.messages + excluded.messages, input_tokens = ai_usage_daily.input_tokens + excluded.input_tokens,
       output_tokens = ai_usage_daily.output_tokens + excluded.output_tokens,
       cost_usd_micros = ai_usage_daily.cost_usd_micros + excluded.cost_usd_micros"""


class Billing:
    async def run(self) -> None:
        from spotter_shared.batches import Batches

        self.pool = await create_pool()
        self.redis = create_redis()
        self.reserve_script = self.redis.register_script(_RESERVE_SCRIPT)
        self.settle_script = self.redis.register_script(_SETTLE_SCRIPT)
        self.usage = Batches(self._write)
        nc = await connect_nats()
        await nc.subscribe(RESERVE, "floor-billing", cb=self.reserve)
        await nc.subscribe(SETTLE, "floor-billing", cb=self.settle)
        await asyncio.Event().wait()

    async def reserve(self, msg: Any) -> None:
        ask = json.loads(msg.data)
        keys = [f"floor:spent:{ask['org']}", f"floor:holds:{ask['org']}"]
        ok = await self.reserve_script(keys=keys, args=[ask["call"], ask["amount"], CAP_USD_MICROS])
        await msg.respond(b"ok" if ok else b"refused")

    async def settle(self, msg: Any) -> None:
        ask = json.loads(msg.data)
        await self.settle_script(keys=[f"floor:spent:{ask['org']}", f"floor:holds:{ask['org']}"], args=[ask["call"], ask["cost"]])
        done = asyncio.get_running_loop().create_future()
        self.usage.add(ask["org"], (ask, done))
        await done
        await msg.respond(b"ok")

    async def _write(self, batch: list[tuple[dict[str, Any], asyncio.Future[None]]]) -> None:
        sums: dict[tuple[str, str], list[int]] = {}
        for ask, _ in batch:
            row = sums.setdefault((ask["org"], ask["user"]), [0, 0, 0, 0])
            for i, value in enumerate((1, ask["in"], ask["out"], ask["cost"])):
                row[i] += value
        try:
            await self.pool.execute(_USAGE, *([uuid.UUID(k[i]) for k in sums] for i in (0, 1)),
                                    *([v[i] for v in sums.values()] for i in range(4)))
        except Exception as exc:  # noqa: BLE001
            for _, done in batch:
                done.set_exception(exc)
            return
        for _, done in batch:
            done.set_result(None)


# ----------------------------------------------------------------------------------------- measuring it

@dataclass
class Floor:
    """The floor's three processes beside a running bench platform (its servers, simulator and demo org)."""

    env: dict[str, str]
    log_dir: Any
    procs: dict[str, Any] = field(default_factory=dict)
    url: str = ""

    def start(self, request_body: dict[str, Any], token: str, user_id: str) -> "Floor":
        from spotter_cli.devstack import find_free_port
        port = find_free_port()
        body = self.log_dir / "floor-request.json"
        body.write_text(json.dumps(request_body))
        env = {**self.env, "FLOOR_PORT": str(port), "FLOOR_TOKEN": token, "FLOOR_USER_ID": user_id, "FLOOR_REQUEST": str(body)}
        for role in ("billing", "worker", "gateway"):
            with open(self.log_dir / f"floor-{role}.log", "wb") as out:
                self.procs[role] = subprocess.Popen([sys.executable, __file__, role], env=env, stdout=out, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if any(p.poll() is not None for p in self.procs.values()):
                raise RuntimeError(f"a floor process exited at start; logs in {self.log_dir}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the floor's gateway did not listen within 60 s")
                time.sleep(0.2)
        return self

    def pids(self) -> dict[str, int]:
        return {f"floor-{role}": p.pid for role, p in self.procs.items()}

    def dead(self) -> list[str]:
        return [f"floor-{role} (exit {p.returncode})" for role, p in self.procs.items() if p.poll() is not None]

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except Exception:  # noqa: BLE001
                p.kill()
        self.procs = {}


SERVERS = ("nats", "postgres", "redis")


async def measure_floor(p: Any, http: Any, gw: Any, workload: Any, request_body: dict[str, Any], user_id: str, *,
                        rounds: int, turns_per_round: int, concurrency: int) -> dict[str, Any]:
    """Plain follow-ups through Spotter and through the floor, rounds alternating (AB, BA, …) on the
    same servers and simulator; every conversation opened by Spotter. CPU per turn of each path's
    processes and the servers (the simulator left out)."""
    from collections import Counter

    from bench_clients import Conversations, Gateway, run_closed_loop, sample_round
    from bench_stats import Samples, cpu_delta, cpu_snapshot

    floor = Floor(p.env, p.log_dir).start(request_body, p.token, user_id)
    try:
        fgw = Gateway(floor.url, gw.org_id, gw.token)
        conversations = {"spotter": Conversations(), "floor": Conversations()}
        opened = max(concurrency, -(-rounds * turns_per_round // 5))
        for pool in conversations.values():
            await run_closed_loop(lambda pool=pool: pool.open(http, gw, workload), opened, min(20, opened))
        servers = {k: v for k, v in p.pids().items() if k in SERVERS}
        paths = {
            "spotter": (lambda: conversations["spotter"].turn(http, gw, workload), {k: v for k, v in p.pids().items() if k != "sim"}),
            "floor": (lambda: conversations["floor"].turn(http, fgw, workload), {**floor.pids(), **servers}),
        }
        errors: list[tuple[str, str]] = []
        for name, (turn, _) in paths.items():  # warm-up
            results, _ = await run_closed_loop(turn, concurrency, concurrency)
            errors += [(f"floor warm-up, {name}", r.error or "?") for r in results if not r.ok]
        samples = {name: Samples() for name in paths}
        cpu: dict[str, Counter[str]] = {name: Counter() for name in paths}
        for rnd in range(rounds):
            for name in (list(paths) if rnd % 2 == 0 else list(reversed(paths))):
                turn, roots = paths[name]
                before = cpu_snapshot(roots)
                results, wall = await sample_round(samples[name], turn, turns_per_round, concurrency)
                cpu[name].update(cpu_delta(before, cpu_snapshot(roots)))
                errors += [(f"floor round {rnd + 1}, {name}", r.error or "?") for r in results if not r.ok]
            if floor.dead():
                raise RuntimeError("floor process died: " + ", ".join(floor.dead()))
        out: dict[str, Any] = {"concurrency": concurrency, "turns_per_path": rounds * turns_per_round, "errors": errors}
        for name in paths:
            n = max(1, len(samples[name].ok))
            per_turn = {k: round(v * 1000 / n, 1) for k, v in sorted(cpu[name].items(), key=lambda kv: -kv[1])}
            out[name] = {**samples[name].summary(), "cpu_ms_per_turn": per_turn, "cpu_ms_total": round(sum(per_turn.values()), 1)}
        out["cpu_ratio"] = round(out["spotter"]["cpu_ms_total"] / max(out["floor"]["cpu_ms_total"], 0.1), 2)
        return out
    finally:
        floor.close()


# Spotter's processes beside the floor's that do their part (rag and the tool-runner have none in the floor).
PAIRS = (("gateway", "floor-gateway"), ("orchestrator", "floor-worker"), ("billing", "floor-billing"), ("rag", None),
         ("tool-runner", None), ("postgres", "postgres"), ("nats", "nats"), ("redis", "redis"))


def markdown(result: dict[str, Any]) -> str:
    s, f = result["spotter"], result["floor"]
    sc, fc = s["cpu_ms_per_turn"], f["cpu_ms_per_turn"]

    def ratio(a: float | None, b: float | None) -> str:
        return "n/a" if not a or not b else f"{a / b:.2f}×"

    rows = ["| | Spotter | floor | Spotter ÷ floor |", "|---|---:|---:|---:|",
            f"| TTFT p50 | {s['ttft_p50_ms']:.0f} ms | {f['ttft_p50_ms']:.0f} ms | {ratio(s['ttft_p50_ms'], f['ttft_p50_ms'])} |",
            f"| Turns/s | {s['turns_per_s']:.2f}/s | {f['turns_per_s']:.2f}/s | {ratio(s['turns_per_s'], f['turns_per_s'])} |",
            f"| **CPU per turn, all processes and servers** | **{s['cpu_ms_total']:.1f} ms** | **{f['cpu_ms_total']:.1f} ms** | "
            f"**{ratio(s['cpu_ms_total'], f['cpu_ms_total'])}** |"]
    for ours, theirs in PAIRS:
        a, b = sc.get(ours, 0.0), (fc.get(theirs, 0.0) if theirs else None)
        rows.append(f"| {ours}{f' / {theirs}' if theirs and theirs != ours else ''} | {a:.1f} ms | "
                    f"{'—' if b is None else f'{b:.1f} ms'} | {ratio(a, b) if b else '—'} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("gateway", "worker", "billing"):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    if argv[0] == "gateway":
        serve_gateway()
        return 0
    import uvloop
    uvloop.run(Worker().run() if argv[0] == "worker" else Billing().run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
