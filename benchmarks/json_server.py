"""The JSON server's HTTP stack, measured: the standard-library transport (``rbjax.lm.http.server``) against
the same protocol (``rbjax.lm.http.protocol.JsonApi``) under FastAPI + uvicorn, per tool call and against
clients that misbehave.

    .venv-openenv/bin/python benchmarks/json_server.py [--clients 1,16] [--calls 3000] [--rounds 3]
        [--work benchmarks/out/json_server] [--no-probes]

FastAPI and uvicorn come with the OpenEnv extra (``rbjax[openenv]``); without them only the standard library's
rows are measured. uvloop and httptools (uvicorn's fast loop and parser, ``uvicorn[standard]``) add rows
where they can be imported (PYTHONPATH may name a folder that has them).

It makes (once, in --work) a slices folder of 2 oracle stores and a tasks file, then starts one server process
per stack, each with a pool of 16 slots. Each process first times ``Session.acall("view_funds_and_date")``
in-process (the API's cost of the call, without HTTP). Then, round after round (stacks interleaved, so that
other work on the machine weighs on each alike), N client threads (``rbjax.lm.http.Client``, one keep-alive
connection each) open a session each and call ``view_funds_and_date`` --calls times in all. calls/s: calls
over the wall time from the threads' start to the last call; ms per call: each call's time as its client saw
it (median and 90th percentile over every call of every round); overhead per call: 1/rate - the API's time
(the extra wall time per call, client's work included: client and server share the machine's cores).

The FastAPI app is the thinnest one: one catch-all route handing the method, raw path and body to
``JsonApi.handle`` and its answer back as bytes (no pydantic models). ASGI tells an app nothing of a
connection's end, so its sessions cannot belong to their connection (the JSON server closes them when it
closes); here every session is closed by its client.

The probes (one connection each, against every stack) say what a client that misbehaves gets: a 100 KB header,
a Content-Length over ``MAX_BODY`` (64 KB of the body sent, then nothing), a chunked body of 5 MiB, a request
line that is not HTTP, a head stalled half-way, and whether a session is closed when the connection that
opened it closes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

STACKS = {  # name: (transport, event loop, uvicorn's HTTP parser)
    "stdlib": ("stdlib", "asyncio", None),
    "stdlib + uvloop": ("stdlib", "uvloop", None),
    "FastAPI/uvicorn h11": ("fastapi", "asyncio", "h11"),
    "FastAPI/uvicorn h11 + uvloop": ("fastapi", "uvloop", "h11"),
    "FastAPI/uvicorn httptools + uvloop": ("fastapi", "uvloop", "httptools"),
}
NEEDS = {"fastapi": ("fastapi", "uvicorn"), "uvloop": ("uvloop",), "httptools": ("httptools",)}
SLOTS, API_CALLS = 16, 2000


# ---------------------------------------------------------------------- the server side (a subprocess)
def fastapi_app(api):
    """A FastAPI app of ``api`` (``JsonApi``): one catch-all route, bytes in and out, bodies over
    ``MAX_BODY`` refused as the standard-library transport refuses them (uvicorn has no limit of its own)."""
    from fastapi import FastAPI, Request, Response

    from rbjax.lm.http.protocol import MAX_BODY, encode

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    too_big = encode({"error": f"Content-Length must be 0..{MAX_BODY}"})

    async def any_route(request):
        size, body = request.headers.get("content-length"), b""
        if size is not None and (not size.isdigit() or int(size) > MAX_BODY):
            return Response(too_big, 400, media_type="application/json", headers={"Connection": "close"})
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY:  # a chunked body
                return Response(too_big, 400, media_type="application/json", headers={"Connection": "close"})
        target = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        status, payload = await api.handle(request.method, target, body)
        return Response(encode(payload), status, media_type="application/json")

    any_route.__annotations__ = {"request": Request, "return": Response}  # FastAPI reads them: real classes
    app.add_api_route("/{path:path}", any_route, methods=["GET", "POST", "DELETE", "PUT", "PATCH"])
    return app


async def api_ms(pool, task) -> float:
    """Median ms of ``view_funds_and_date`` through ``Session.acall``, in this process."""
    session = await pool.aopen(task)
    times = []
    for _ in range(API_CALLS):
        t = time.perf_counter()
        await session.acall("view_funds_and_date")
        times.append(time.perf_counter() - t)
    pool.close(session.id)
    return 1e3 * statistics.median(times[API_CALLS // 10 :])


async def serve_stack(stack: str, tasks_path: str) -> None:
    """Serve ``tasks_path`` on a free port through ``stack``; prints ``READY url api_ms`` once listening."""
    from rbjax.lm.http import JsonApi, JsonServer
    from rbjax.lm.pool import SessionPool
    from rbjax.lm.tasks import read_tasks

    transport, _, parser = STACKS[stack]
    tasks = read_tasks(tasks_path)
    pool = SessionPool.for_task(tasks[0], slots=SLOTS, idle_timeout=None)
    ms = await api_ms(pool, tasks[0])
    by_id = {t.id: t for t in tasks}
    if transport == "stdlib":
        server = JsonServer(pool, by_id)
        await server.start("127.0.0.1", 0)
        print(f"READY {server.url} {ms:.4f}", flush=True)
        await server.wait()
        return
    import uvicorn

    app = fastapi_app(JsonApi(pool, by_id))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", access_log=False, http=parser)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(0.05)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    print(f"READY http://{host}:{port} {ms:.4f}", flush=True)
    await task


def run_server(stack: str, tasks_path: str) -> None:
    """``serve_stack`` on the stack's event loop, until killed."""
    import rbjax

    rbjax.setup(devices=1)
    if STACKS[stack][1] == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(serve_stack(stack, tasks_path))
    else:
        asyncio.run(serve_stack(stack, tasks_path))


# ---------------------------------------------------------------------- the client side
def ensure_tasks(work: str) -> str:
    """tasks.jsonl in ``work``: 3-day tasks from day 16 of 2 oracle stores (made once)."""
    slices, tasks = os.path.join(work, "slices"), os.path.join(work, "tasks.jsonl")
    if not os.path.exists(os.path.join(slices, "slices.json")):
        line = "--devices 1 run --policy oracle --stores 2 --days 24 --every 16 --progress 0"
        run = [sys.executable, "-m", "rbjax", *line.split(), "--save-states", slices]
        subprocess.run(run, check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(tasks):
        from rbjax.lm.tasks import make_tasks, write_tasks

        write_tasks(make_tasks(slices, 3, at=[16], tail=0), tasks)
    return tasks


def available(stack: str) -> bool:
    """Whether this Python can import what ``stack`` needs."""
    import importlib.util

    transport, loop, parser = STACKS[stack]
    needed = [m for k in (transport, loop, parser) for m in NEEDS.get(k, ())]
    return all(importlib.util.find_spec(m) is not None for m in needed)


def start_servers(stacks: list, tasks_path: str, work: str) -> dict:
    """{stack: (process, url, api ms)}, once every server listens."""
    procs = {}
    for stack in stacks:
        log = os.path.join(work, f"server-{stack.replace('/', '_').replace(' ', '')}.log")
        command = [sys.executable, __file__, "--serve", stack, "--tasks", tasks_path]
        with open(log, "w") as err:  # the child keeps its own copy of the file
            procs[stack] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
    out = {}
    for stack, proc in procs.items():
        line = proc.stdout.readline().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"the {stack} server did not start; see its log in {work}")
        out[stack] = (proc, line[1], float(line[2]))
    return out


def measure(url: str, clients: int, calls: int) -> dict:
    """{rate, times}: calls/s and each call's seconds, ``clients`` threads making ``calls`` calls in all."""
    from rbjax.lm.http import Client

    each, times, errors = max(1, calls // clients), [], []
    barrier, lock = threading.Barrier(clients + 1), threading.Lock()

    def client():
        """One client thread: open a session, warm up, wait for the others, time each call."""
        try:
            with Client(url, timeout=60) as c:
                s = c.open(c.tasks()[0])
                for _ in range(20):  # warm the connection
                    c.call(s, "view_funds_and_date")
                mine = []
                barrier.wait(60)
                for _ in range(each):
                    t = time.perf_counter()
                    c.call(s, "view_funds_and_date")
                    mine.append(time.perf_counter() - t)
                c.close(s)
            with lock:
                times.extend(mine)
        except Exception as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    try:
        barrier.wait(120)
    except threading.BrokenBarrierError:
        for t in threads:
            t.join()
        raise errors[0] if errors else RuntimeError("the clients did not start") from None
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return {"rate": len(times) / wall, "times": times}


def table(results: dict, servers: dict, clients: list) -> str:
    """The markdown table of ``results`` ({(stack, clients): [measure's dicts]})."""
    lines = [
        "| stack | clients | calls/s | ms per call, median | ms per call, p90 | overhead per call (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for n in clients:
        for stack in servers:
            runs = results[(stack, n)]
            rate = statistics.median(r["rate"] for r in runs)
            times = sorted(t for r in runs for t in r["times"])
            med, p90 = 1e3 * times[len(times) // 2], 1e3 * times[int(0.9 * len(times))]
            over = 1e3 / rate - servers[stack][2]
            lines.append(f"| {stack} | {n} | {rate:,.0f} | {med:.3f} | {p90:.3f} | {over:.3f} |")
    return "\n".join(lines)


def ratios(results: dict, servers: dict, clients: list) -> str:
    """Each stack's calls/s and median ms against the standard library's, at each number of clients."""
    lines = ["| stack | clients | calls/s vs stdlib | median ms vs stdlib |", "|---|---:|---:|---:|"]
    for n in clients:
        base = results[("stdlib", n)]
        base_rate = statistics.median(r["rate"] for r in base)
        base_med = statistics.median(t for r in base for t in r["times"])
        for stack in servers:
            runs = results[(stack, n)]
            rate = statistics.median(r["rate"] for r in runs) / base_rate
            med = statistics.median(t for r in runs for t in r["times"]) / base_med
            lines.append(f"| {stack} | {n} | {rate:.2f}x | {med:.2f}x |")
    return "\n".join(lines)


# ---------------------------------------------------------------------- probes
def exchange(url: str, data: bytes, wait: float = 5.0, stall: bool = False) -> tuple[bytes, float]:
    """(the server's bytes, seconds until it closed) for ``data`` sent on a new connection; stall: send
    ``data`` and then nothing, not even our end of the connection."""
    host, port = url.rsplit("/", 1)[1].split(":")
    answer, start = b"", time.monotonic()
    with socket.create_connection((host, int(port)), timeout=wait) as sock:
        try:
            sock.sendall(data)
            if not stall:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before taking everything: read its answer
            pass
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except TimeoutError:
            return answer + b"(still open)", time.monotonic() - start
        except OSError:
            answer += b"(reset)"
    return answer, time.monotonic() - start


def said(answer: bytes) -> str:
    """A short account of a server's answer: status, content type, the start of its body."""
    if not answer.startswith(b"HTTP/"):
        return answer.decode("latin-1")[:40] or "closed, no answer"
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    kind = next((h.split(":", 1)[1].strip() for h in lines if h.lower().startswith("content-type")), "")
    text = body[:70].decode("utf-8", "replace").replace("|", "/").replace("\n", " ")
    return f"{lines[0].split(' ', 2)[1]} {kind.split(';')[0]} `{text}`"


def probes(url: str) -> dict:
    """{probe: what the server at ``url`` did}."""
    from rbjax.lm.http import MAX_BODY, Client

    out, host = {}, b"Host: x\r\n"
    head = b"GET /health HTTP/1.1\r\n" + host + b"X: " + b"a" * 100_000 + b"\r\n\r\n"
    out["100 KB header"] = said(exchange(url, head)[0])
    big = b"POST /sessions HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (host, MAX_BODY + 1)
    answer, seconds = exchange(url, big + b" " * 65536, wait=10, stall=True)  # the rest never comes
    out["Content-Length over MAX_BODY"] = f"{said(answer)} after {seconds:.0f} s"
    chunks = b"".join(b"%x\r\n%s\r\n" % (1 << 20, b" " * (1 << 20)) for _ in range(5)) + b"0\r\n\r\n"
    chunked = b"POST /sessions HTTP/1.1\r\n" + host + b"Transfer-Encoding: chunked\r\n\r\n"
    out["chunked body of 5 MiB"] = said(exchange(url, chunked + chunks, wait=20)[0])
    out["not HTTP"] = said(exchange(url, b"\x00\xffgarbage\r\n\r\n")[0])
    answer, seconds = exchange(url, b"GET /health HTTP/1.1\r\n" + host + b"X-Slow: 1", wait=40, stall=True)
    out["head stalled half-way"] = f"{said(answer)} after {seconds:.0f} s"
    with Client(url, timeout=30) as c:
        c.open(c.tasks()[0])
    time.sleep(1.0)
    with Client(url, timeout=30) as c:
        left = c.health()["open"]
    out["disconnect closes its session"] = "yes" if left == 0 else f"no ({left} left open)"
    return out


def probe_table(servers: dict) -> str:
    """The probes' markdown table: one row a probe, one column a stack (probed at once, in threads)."""
    found = {}
    threads = [
        threading.Thread(target=lambda s=s: found.__setitem__(s, probes(servers[s][1]))) for s in servers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = list(servers)
    lines = ["| probe | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for probe in found[names[0]]:
        lines.append(f"| {probe} | " + " | ".join(found[s][probe] for s in names) + " |")
    return "\n".join(lines)


def main() -> None:
    """The command line: measure every stack this Python can run, print the tables (or, with the hidden
    ``--serve STACK``, be one of the server processes)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--calls", type=int, default=3000, help="calls per measurement, over all its clients")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", default="benchmarks/out/json_server")
    ap.add_argument("--no-probes", action="store_true")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--tasks", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return run_server(args.serve, args.tasks)
    os.makedirs(args.work, exist_ok=True)
    clients = [int(x) for x in args.clients.split(",")]
    stacks = [s for s in STACKS if available(s)]
    print(
        "stacks:", ", ".join(stacks), "| missing:", ", ".join(s for s in STACKS if s not in stacks) or "none"
    )
    servers = start_servers(stacks, ensure_tasks(args.work), args.work)
    results = {(s, n): [] for s in servers for n in clients}
    try:
        for _, url, _ in servers.values():
            measure(url, 1, 200)  # each server's first calls: compiled views, warm caches
        for _ in range(args.rounds):
            for n in clients:
                for stack, (_, url, _) in servers.items():
                    results[(stack, n)].append(measure(url, n, args.calls))
        api = ", ".join(f"{s}: {v[2]:.3f}" for s, v in servers.items())
        print(f"\nview_funds_and_date through Session.acall, in each server's process (ms): {api}\n")
        print(table(results, servers, clients) + "\n\n" + ratios(results, servers, clients))
        if not args.no_probes:
            print("\n" + probe_table(servers))
    finally:
        for proc, _, _ in servers.values():
            proc.kill()
            proc.wait()
    summary = {f"{s} | {n}": [r["rate"] for r in v] for (s, n), v in results.items()}
    with open(os.path.join(args.work, "json_server.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
