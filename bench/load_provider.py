"""A fake OpenAI Chat Completions server for the load benchmark, built to
stream hundreds of answers at once: `python -m bench.load_provider`.

One asyncio process (no thread per stream, so its own latency stays flat at
500 streams). Every ``POST /v1/chat/completions`` with ``stream: true`` is
answered with ``--chunks`` content chunks spread evenly over ``--duration``
seconds, in OpenAI's wire format (``data:`` events, a usage chunk when asked
for, ``data: [DONE]``). Each chunk's text is ``w<i>@<unix time>␠`` with the
time taken just before the chunk is written, so a client that receives it
can tell how long the whole relay took (provider → worker → event log → web
process → websocket). The chunks are scheduled against the stream's start,
so a late chunk does not delay the ones after it.

``GET /stats`` answers the streams served so far: ``[start, end]`` wall-clock
times of each (``end`` null while it runs, so the peak number streaming at
once is exact), how many the client abandoned, and how late the server's own
loop wrote chunks (its scheduling lag).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}


class LoadProvider:
    def __init__(self, *, chunks: int, duration_s: float, first_chunk_s: float) -> None:
        self.chunks = max(2, chunks)
        self.duration_s = duration_s
        self.first_chunk_s = first_chunk_s
        self.streams: list[list[float | None]] = []  # [start, end] per stream
        self.abandoned = 0
        self.max_lag_s = 0.0
        self.lags: list[float] = []  # per chunk: how late it was written, seconds

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
                if method == "GET" and path.rstrip("/") == "/stats":
                    await self._send_json(writer, 200, self.stats())
                elif method == "POST" and path.rstrip("/") == "/v1/chat/completions":
                    await self._chat(writer, json.loads(body or b"{}"))
                else:
                    await self._send_json(writer, 404, {"error": {"message": f"no route {method} {path}"}})
                if headers.get("connection", "").lower() == "close":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stats(self) -> dict:
        return {
            "streams": self.streams,
            "abandoned": self.abandoned,
            "chunk_lag_p50_ms": _percentile(self.lags, 50) * 1000,
            "chunk_lag_p99_ms": _percentile(self.lags, 99) * 1000,
            "chunk_lag_max_ms": self.max_lag_s * 1000,
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
        model = str(body.get("model"))
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        envelope = (
            '{"id":"'
            + completion_id
            + '","object":"chat.completion.chunk","created":'
            + str(created)
            + ',"model":'
            + json.dumps(model)
            + ',"system_fingerprint":"fp_load","choices":'
        )

        def event(choices: str, usage: str = "") -> bytes:
            data = f"data: {envelope}{choices}{usage}}}\n\n".encode()
            return b"%X\r\n%s\r\n" % (len(data), data)

        record: list[float | None] = [time.time(), None]
        self.streams.append(record)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nx-request-id: req_load\r\n\r\n"
        )
        writer.write(event('[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]'))
        started = time.monotonic() + self.first_chunk_s
        interval = self.duration_s / (self.chunks - 1)
        try:
            for index in range(self.chunks):
                due = started + index * interval
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                lag = time.monotonic() - due
                self.lags.append(lag)
                self.max_lag_s = max(self.max_lag_s, lag)
                text = f"w{index}@{time.time():.6f} "
                writer.write(event('[{"index":0,"delta":{"content":"' + text + '"},"finish_reason":null}]'))
                await writer.drain()
            writer.write(event('[{"index":0,"delta":{},"finish_reason":"stop"}]'))
            if (body.get("stream_options") or {}).get("include_usage"):
                tokens = self.chunks * 4
                writer.write(
                    event(
                        "[]",
                        ',"usage":{"prompt_tokens":10,"completion_tokens":'
                        + str(tokens)
                        + ',"total_tokens":'
                        + str(tokens + 10)
                        + "}",
                    )
                )
            data = b"data: [DONE]\n\n"
            writer.write(b"%X\r\n%s\r\n0\r\n\r\n" % (len(data), data))
            await writer.drain()
        except ConnectionError:
            self.abandoned += 1
            raise
        finally:
            record[1] = time.time()


def _percentile(values: list[float], p: float) -> float:
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
    parser.add_argument("--chunks", type=int, default=40, help="content chunks per answer")
    parser.add_argument(
        "--duration", type=float, default=2.0, help="seconds from the first chunk to the last"
    )
    parser.add_argument(
        "--first-chunk", type=float, default=0.0, help="seconds before the first content chunk"
    )
    args = parser.parse_args()
    provider = LoadProvider(chunks=args.chunks, duration_s=args.duration, first_chunk_s=args.first_chunk)
    try:
        asyncio.run(serve(args.host, args.port, provider))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
