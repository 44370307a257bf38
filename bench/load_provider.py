"""A fake OpenAI Chat Completions server for the load benchmark, built to
stream hundreds of answers at once at a real model's pace:
`python -m bench.load_provider --tokens-per-s 50 --tokens 500`.

Real models stream 50–200 tokens a second, each token its own SSE event.
So does this server: every ``POST /v1/chat/completions`` with ``stream:
true`` is answered with ``--tokens`` content chunks, one every
``1 / --tokens-per-s`` seconds, in OpenAI's wire format (``data:`` events,
a usage chunk when asked for, ``data: [DONE]``), each chunk its own write.
Each chunk's text is ``w<i>@<unix time>␠`` with the time taken just before
it is written, so a client that receives it can tell how long the whole
relay took (provider → worker → event log → web process → websocket).

One asyncio process and one *ticker* task write every stream's chunks: a
heap of the streams' next due times, popped as they fall due. A task (and
a timer) per stream cost about 44 µs of this process's CPU per chunk, a
core at 25,000 tokens/s, and the server's own lateness would have been
counted as ChatForge's. Chunks are scheduled against their stream's start,
so a late chunk does not delay the ones after it; how late each was
written is recorded.

``GET /stats`` answers the streams served so far: ``[start, end]``
wall-clock times of each (``end`` null while it runs, so the peak number
streaming at once is exact), how many the client abandoned, and how late
the server wrote chunks (its scheduling lag).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import time
import uuid
from array import array
from urllib.parse import parse_qs, urlsplit
from dataclasses import dataclass, field

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_DONE = b"data: [DONE]\n\n"


def _http_chunk(data: bytes) -> bytes:
    return b"%X\r\n%s\r\n" % (len(data), data)


@dataclass
class _Stream:
    """One answer being streamed."""

    writer: asyncio.StreamWriter
    envelope: str  # the chunk JSON up to ``"choices":``
    started: float  # monotonic time chunk 0 is due
    record: list[float | None]  # [start, end] wall clock, in LoadProvider.streams
    usage: bool
    done: asyncio.Future[None]
    index: int = 0
    _order: int = field(default_factory=itertools.count().__next__)

    def event(self, choices: str, usage: str = "") -> bytes:
        return _http_chunk(f"data: {self.envelope}{choices}{usage}}}\n\n".encode())


class LoadProvider:
    def __init__(self, *, tokens: int, tokens_per_s: float, first_chunk_s: float) -> None:
        self.tokens = max(2, tokens)
        self.interval_s = 1.0 / tokens_per_s
        self.first_chunk_s = first_chunk_s
        self.streams: list[list[float | None]] = []  # [start, end] per stream
        self.abandoned = 0
        # Per chunk: when it was written (unix time) and how late (seconds).
        self.written_at = array("d")
        self.lags = array("d")
        self._due: list[tuple[float, int, _Stream]] = []  # (due, order, stream): a heap
        self._wake: asyncio.Event | None = None
        self._ticker: asyncio.Task | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on the connection
                head = await reader.readuntil(b"\r\n\r\n")
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, path, _ = request_line.split(" ", 2)
                headers = {}
                for line in header_lines:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                url = urlsplit(path)
                if method == "GET" and url.path.rstrip("/") == "/stats":
                    since = float(parse_qs(url.query).get("since", ["0"])[0])
                    await self._send_json(writer, 200, self.stats(since))
                elif method == "POST" and path.rstrip("/") == "/v1/chat/completions":
                    await self._chat(writer, json.loads(body or b"{}"))
                else:
                    await self._send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
                if headers.get("connection", "").lower() == "close" or writer.is_closing():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stats(self, since: float = 0.0) -> dict:
        """What was served from unix time ``since`` on."""
        lags = [lag for at, lag in zip(self.written_at, self.lags) if at >= since]
        return {
            "streams": [s for s in self.streams if s[0] >= since],
            "abandoned": self.abandoned,
            "chunks_written": len(lags),
            "chunk_lag_p50_ms": _percentile(lags, 50) * 1000,
            "chunk_lag_p99_ms": _percentile(lags, 99) * 1000,
            "chunk_lag_max_ms": max(lags, default=0.0) * 1000,
        }

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _chat(self, writer: asyncio.StreamWriter, body: dict) -> None:
        if not body.get("stream"):
            await self._send_json(writer, 400, {"error": {"message": "the load provider only streams"}})
            return
        envelope = (
            '{"id":"chatcmpl-' + uuid.uuid4().hex[:24] + '","object":"chat.completion.chunk","created":'
            + str(int(time.time())) + ',"model":' + json.dumps(str(body.get("model")))
            + ',"system_fingerprint":"fp_load","choices":'
        )
        record: list[float | None] = [time.time(), None]
        self.streams.append(record)
        stream = _Stream(
            writer=writer,
            envelope=envelope,
            started=time.monotonic() + self.first_chunk_s,
            record=record,
            usage=bool((body.get("stream_options") or {}).get("include_usage")),
            done=asyncio.get_running_loop().create_future(),
        )
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nx-request-id: req_load\r\n\r\n"
        )
        writer.write(stream.event('[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]'))
        self._schedule(stream)
        await stream.done
        await writer.drain()

    def _schedule(self, stream: _Stream) -> None:
        due = stream.started + stream.index * self.interval_s
        heapq.heappush(self._due, (due, stream._order, stream))
        if self._ticker is None or self._ticker.done():
            self._wake = asyncio.Event()
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        elif self._due[0][2] is stream:
            self._wake.set()  # due before whatever the ticker sleeps towards

    async def _tick(self) -> None:
        """Write every chunk as it falls due, for all streams."""
        assert self._wake is not None
        while True:
            if not self._due:
                self._wake.clear()
                await self._wake.wait()
                continue
            wait = self._due[0][0] - time.monotonic()
            if wait > 0:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
                continue
            due, _, stream = heapq.heappop(self._due)
            lag = time.monotonic() - due
            if stream.writer.is_closing():
                self.abandoned += 1
                self._end(stream)
                continue
            now = time.time()
            self.written_at.append(now)
            self.lags.append(lag)
            text = f"w{stream.index}@{now:.6f} "
            stream.writer.write(
                stream.event('[{"index":0,"delta":{"content":"' + text + '"},"finish_reason":null}]')
            )
            stream.index += 1
            if stream.index < self.tokens:
                due = stream.started + stream.index * self.interval_s
                heapq.heappush(self._due, (due, stream._order, stream))
            else:
                self._finish(stream)

    def _finish(self, stream: _Stream) -> None:
        stream.writer.write(stream.event('[{"index":0,"delta":{},"finish_reason":"stop"}]'))
        if stream.usage:
            tokens = self.tokens
            stream.writer.write(
                stream.event(
                    "[]",
                    ',"usage":{"prompt_tokens":10,"completion_tokens":' + str(tokens)
                    + ',"total_tokens":' + str(tokens + 10) + "}",
                )
            )
        stream.writer.write(_http_chunk(_DONE) + b"0\r\n\r\n")
        self._end(stream)

    @staticmethod
    def _end(stream: _Stream) -> None:
        stream.record[1] = time.time()
        if not stream.done.done():
            stream.done.set_result(None)


def _percentile(values: list[float] | array, p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))]


async def serve(host: str, port: int, provider: LoadProvider) -> None:
    server = await asyncio.start_server(provider.handle, host, port, backlog=2048)
    print(f"load provider on http://{host}:{server.sockets[0].getsockname()[1]}/v1", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--tokens", type=int, default=500, help="content chunks (tokens) per answer")
    parser.add_argument("--tokens-per-s", type=float, default=50.0, help="tokens streamed per second")
    parser.add_argument(
        "--first-chunk", type=float, default=0.0, help="seconds before the first content chunk"
    )
    args = parser.parse_args()
    provider = LoadProvider(
        tokens=args.tokens, tokens_per_s=args.tokens_per_s, first_chunk_s=args.first_chunk
    )
    try:
        asyncio.run(serve(args.host, args.port, provider))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
