"""Many SSE streams from a few processes: the client side of bench_fanout.py.

Each worker process opens its share of `GET …/conversations/{id}/events?after=0` streams with a bare
asyncio Protocol (HTTP/1.1 request written by hand, chunked transfer decoded by hand, SSE split on
the blank line): no per-connection task, no HTTP library, so thousands of streams cost the client
little and the client is not what is measured. For each `text_delta` whose text starts with the
benchmark's stamp `~<phase><monotonic ns>~<tokens>~`, it records the delivery lag (arrival in
this process − the stamp; CLOCK_MONOTONIC is one clock for every process on the machine) and the
tokens it carries. SSE ids are checked per stream: each must be the previous one + 1.

The parent talks to each worker over a multiprocessing Pipe: the worker says `connected` (with how
many streams are open and have replayed their first stored event), the parent says `stop`, the
worker closes everything and answers `stats`.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import resource
import time
from array import array
from dataclasses import dataclass, field
from typing import Any, Optional

_STAMP = ord("~")


@dataclass
class PhaseStats:
    lags_ns: array = field(default_factory=lambda: array("q"))
    events: int = 0
    tokens: int = 0
    first_ns: int = 0  # first arrival
    last_ns: int = 0  # last arrival
    first_sent_ns: int = 0  # earliest stamp

    def add(self, now_ns: int, lag_ns: int, tokens: int) -> None:
        self.lags_ns.append(lag_ns)
        self.events += 1
        self.tokens += tokens
        if not self.first_ns:
            self.first_ns = now_ns
        self.last_ns = now_ns
        sent = now_ns - lag_ns
        if not self.first_sent_ns or sent < self.first_sent_ns:
            self.first_sent_ns = sent

    def as_dict(self) -> dict[str, Any]:
        return {"lags_ns": self.lags_ns.tobytes(), "events": self.events, "tokens": self.tokens,
                "first_ns": self.first_ns, "last_ns": self.last_ns, "first_sent_ns": self.first_sent_ns}


@dataclass
class Totals:
    phases: dict[str, PhaseStats] = field(default_factory=dict)
    other_events: dict[str, int] = field(default_factory=dict)
    gaps: int = 0  # SSE ids skipped
    dups: int = 0  # SSE ids repeated or going back
    lost: int = 0  # streams the server ended or cut before we stopped
    http_errors: list[str] = field(default_factory=list)
    connect_errors: list[str] = field(default_factory=list)

    def phase(self, tag: str) -> PhaseStats:
        st = self.phases.get(tag)
        if st is None:
            st = self.phases[tag] = PhaseStats()
        return st


class SseStream(asyncio.Protocol):
    def __init__(self, request: bytes, totals: Totals) -> None:
        self.request = request
        self.t = totals
        self.transport: Optional[asyncio.Transport] = None
        self.raw = b""
        self.headers_done = False
        self.chunked = True
        self.chunk_left = 0  # data bytes left in the current chunk
        self.skip_crlf = 0  # CRLF after a chunk's data still to skip
        self.body = b""
        self.last_id = 0
        self.established: asyncio.Future = asyncio.get_running_loop().create_future()
        self.closing = False
        self.ended = False

    # ---------------------------------------------------------------- asyncio
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.request)

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        if not self.closing:
            self.t.lost += 1
            self._fail(f"connection lost: {exc!r}" if exc else "server closed the stream")

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        if not self.headers_done:
            self.raw += data
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data, self.raw = self.raw[:end], self.raw[end + 4:], b""
            self.headers_done = True
            status = head.split(b"\r\n", 1)[0]
            if b" 200 " not in status + b" ":
                msg = f"HTTP {status.decode(errors='replace')}"
                self.t.http_errors.append(msg)
                self._fail(msg)
                self.close()
                return
            self.chunked = b"transfer-encoding: chunked" in head.lower()
        if self.chunked:
            self._dechunk(data)
        else:
            self.body += data
        self._events(now)

    # ---------------------------------------------------------------- parsing
    def _dechunk(self, data: bytes) -> None:
        buf = self.raw + data if self.raw else data
        self.raw = b""
        pos, n, out = 0, len(buf), []
        while pos < n:
            if self.skip_crlf:
                take = min(self.skip_crlf, n - pos)
                self.skip_crlf -= take
                pos += take
                continue
            if self.chunk_left:
                take = min(self.chunk_left, n - pos)
                out.append(buf[pos:pos + take])
                self.chunk_left -= take
                pos += take
                if not self.chunk_left:
                    self.skip_crlf = 2
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                self.raw = buf[pos:]
                break
            size = int(buf[pos:eol].split(b";", 1)[0], 16)
            pos = eol + 2
            if size == 0:
                self.ended = True
                break
            self.chunk_left = size
        if out:
            self.body += b"".join(out)

    def _events(self, now: int) -> None:
        body = self.body
        start = 0
        while True:
            end = body.find(b"\r\n\r\n", start)
            if end < 0:
                break
            self._event(body[start:end], now)
            start = end + 4
        self.body = body[start:]
        if self.ended and not self.closing:
            self.t.lost += 1
            self._fail("stream ended")
            self.close()

    def _event(self, ev: bytes, now: int) -> None:
        if ev.startswith(b":"):
            return  # ping comment
        seq = 0
        kind = b""
        for line in ev.split(b"\r\n"):
            if line.startswith(b"id: "):
                seq = int(line[4:])
            elif line.startswith(b"event: "):
                kind = line[7:]
        if seq:
            if seq == self.last_id + 1:
                pass
            elif seq > self.last_id + 1:
                self.t.gaps += seq - self.last_id - 1
            else:
                self.t.dups += 1
            if seq > self.last_id:
                self.last_id = seq
        if kind == b"text_delta":
            i = ev.find(b"~")
            if i >= 0:
                tag = chr(ev[i + 1])
                j = ev.find(b"~", i + 2)
                k = ev.find(b"~", j + 1)
                sent = int(ev[i + 2:j])
                self.t.phase(tag).add(now, now - sent, int(ev[j + 1:k]))
                return
        name = kind.decode() or "?"
        self.t.other_events[name] = self.t.other_events.get(name, 0) + 1
        if not self.established.done():
            self.established.set_result(True)

    def _fail(self, why: str) -> None:
        if not self.established.done():
            self.established.set_result(why)

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()


def request_bytes(host: str, port: int, path: str, token: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: text/event-stream\r\nCache-Control: no-cache\r\n\r\n").encode()


async def open_streams(host: str, port: int, paths: list[str], token: str, totals: Totals, *,
                       parallel: int = 100, timeout: float = 60.0) -> tuple[list[SseStream], list[float]]:
    """Open one stream per path, at most `parallel` being set up at once; a stream counts as open once
    its first stored event has been replayed. Returns the open streams and each one's set-up time."""
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(parallel)
    streams: list[SseStream] = []
    times: list[float] = []

    async def one(path: str) -> None:
        async with gate:
            t0 = time.perf_counter()
            proto = SseStream(request_bytes(host, port, path, token), totals)
            try:
                await asyncio.wait_for(loop.create_connection(lambda: proto, host, port), timeout)
                got = await asyncio.wait_for(proto.established, timeout)
            except (OSError, asyncio.TimeoutError) as exc:
                totals.connect_errors.append(f"{type(exc).__name__}: {exc}")
                proto.close()
                return
            if got is not True:
                totals.connect_errors.append(str(got))
                proto.close()
                return
            times.append(time.perf_counter() - t0)
            streams.append(proto)

    await asyncio.gather(*(one(p) for p in paths))
    return streams, times


# --------------------------------------------------------------------------- worker process


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def worker_main(conn: Any, host: str, port: int, paths: list[str], token: str, parallel: int) -> None:
    _raise_nofile()
    asyncio.run(_worker(conn, host, port, paths, token, parallel))


async def _worker(conn: Any, host: str, port: int, paths: list[str], token: str, parallel: int) -> None:
    loop = asyncio.get_running_loop()
    totals = Totals()
    t0 = time.perf_counter()
    streams, times = await open_streams(host, port, paths, token, totals, parallel=parallel)
    conn.send(("connected", {"open": len(streams), "asked": len(paths), "setup_s": times,
                             "wall_s": time.perf_counter() - t0, "errors": totals.connect_errors[:20],
                             "error_count": len(totals.connect_errors)}))
    stop: asyncio.Future = loop.create_future()

    def readable() -> None:
        msg = conn.recv()
        if msg[0] == "count":
            conn.send(("counts", {tag: ph.events for tag, ph in totals.phases.items()}))
        elif not stop.done():
            stop.set_result(msg)

    loop.add_reader(conn.fileno(), readable)
    await stop
    loop.remove_reader(conn.fileno())
    open_at_stop = sum(1 for s in streams if not s.ended and s.transport is not None and not s.transport.is_closing())
    for s in streams:
        s.close()
    await asyncio.sleep(0.2)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    conn.send(("stats", {
        "phases": {k: v.as_dict() for k, v in totals.phases.items()},
        "other_events": totals.other_events, "gaps": totals.gaps, "dups": totals.dups, "lost": totals.lost,
        "http_errors": totals.http_errors[:20], "open_at_stop": open_at_stop,
        "cpu_s": ru.ru_utime + ru.ru_stime, "pid": os.getpid(),
    }))
    conn.close()


class ClientPool:
    """`procs` worker processes sharing the paths round-robin."""

    def __init__(self, host: str, port: int, paths: list[str], token: str, *, procs: int = 2, parallel: int = 100) -> None:
        self.ctx = mp.get_context("spawn")
        self.workers: list[tuple[Any, Any]] = []
        for i in range(procs):
            share = paths[i::procs]
            if not share:
                continue
            parent, child = self.ctx.Pipe()
            proc = self.ctx.Process(target=worker_main, args=(child, host, port, share, token, parallel), daemon=True)
            self.workers.append((proc, parent))

    def start(self) -> None:
        for proc, _ in self.workers:
            proc.start()

    @property
    def pids(self) -> list[int]:
        return [proc.pid for proc, _ in self.workers if proc.pid]

    async def _recv(self, conn: Any, timeout: float) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def readable() -> None:
            if not fut.done():
                try:
                    fut.set_result(conn.recv())
                except EOFError as exc:
                    fut.set_exception(exc)

        loop.add_reader(conn.fileno(), readable)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            loop.remove_reader(conn.fileno())

    async def connected(self, timeout: float = 300.0) -> dict[str, Any]:
        replies = await asyncio.gather(*(self._recv(conn, timeout) for _, conn in self.workers))
        out: dict[str, Any] = {"open": 0, "asked": 0, "setup_s": [], "wall_s": 0.0, "errors": [], "error_count": 0}
        for kind, r in replies:
            assert kind == "connected", kind
            out["open"] += r["open"]
            out["asked"] += r["asked"]
            out["setup_s"] += r["setup_s"]
            out["wall_s"] = max(out["wall_s"], r["wall_s"])
            out["errors"] += r["errors"]
            out["error_count"] += r["error_count"]
        return out

    async def counts(self, timeout: float = 30.0) -> dict[str, int]:
        """Events received so far, by phase tag, over all workers."""
        for _, conn in self.workers:
            conn.send(("count",))
        replies = await asyncio.gather(*(self._recv(conn, timeout) for _, conn in self.workers))
        out: dict[str, int] = {}
        for kind, r in replies:
            assert kind == "counts", kind
            for tag, n in r.items():
                out[tag] = out.get(tag, 0) + n
        return out

    async def stop(self, timeout: float = 60.0) -> dict[str, Any]:
        for _, conn in self.workers:
            conn.send(("stop",))
        replies = await asyncio.gather(*(self._recv(conn, timeout) for _, conn in self.workers))
        merged: dict[str, Any] = {"phases": {}, "other_events": {}, "gaps": 0, "dups": 0, "lost": 0, "http_errors": [],
                                  "open_at_stop": 0, "cpu_s": []}
        for kind, r in replies:
            assert kind == "stats", kind
            for tag, ph in r["phases"].items():
                m = merged["phases"].setdefault(tag, {"lags_ns": array("q"), "events": 0, "tokens": 0, "first_ns": 0, "last_ns": 0,
                                                      "first_sent_ns": 0})
                lags = array("q")
                lags.frombytes(ph["lags_ns"])
                m["lags_ns"].extend(lags)
                m["events"] += ph["events"]
                m["tokens"] += ph["tokens"]
                if ph["first_ns"] and (not m["first_ns"] or ph["first_ns"] < m["first_ns"]):
                    m["first_ns"] = ph["first_ns"]
                m["last_ns"] = max(m["last_ns"], ph["last_ns"])
                if ph["first_sent_ns"] and (not m["first_sent_ns"] or ph["first_sent_ns"] < m["first_sent_ns"]):
                    m["first_sent_ns"] = ph["first_sent_ns"]
            for k, v in r["other_events"].items():
                merged["other_events"][k] = merged["other_events"].get(k, 0) + v
            for k in ("gaps", "dups", "lost", "open_at_stop"):
                merged[k] += r[k]
            merged["http_errors"] += r["http_errors"]
            merged["cpu_s"].append(round(r["cpu_s"], 2))
        for proc, _ in self.workers:
            proc.join(10)
        return merged

    def kill(self) -> None:
        for proc, _ in self.workers:
            if proc.is_alive():
                proc.kill()
