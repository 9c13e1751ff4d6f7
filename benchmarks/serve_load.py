"""`evr1-rewards serve` under a real HTTP load: N concurrent keep-alive connections from a separate client process.

    pip install "evr1-rewards[serve]" aiohttp                # and/or: apt-get install wrk
    python benchmarks/serve_load.py                       # 64 connections x 2,000 one-sample requests, then batches
    python benchmarks/serve_load.py --client wrk          # the same load from wrk (C, a Lua body script)
    python benchmarks/serve_load.py --connections 64 --requests 2000 --batch 64 --batch-requests 200
    python benchmarks/serve_load.py --fairness            # a third client's wait while two saturate the sandbox

The server is `evr1-rewards serve` in its own process (uvicorn, one worker); the client is either this script
(`--client aiohttp`: one session per connection, HTTP/1.1 keep-alive) or `wrk` (`--client wrk`, 2 threads, a Lua
script that rotates 64 prepared bodies). wrk runs for `--seconds` and
reports how many requests got done. wrk costs the shared cores far less than a Python client, so it measures the
server more than the client. Prints errors, latency percentiles for one-sample requests (target:
0 errors, p99 <= 50 ms) and samples/s for 64-sample batches (OpenRLHF sends a batch per request). Mixed typical
payloads: multiple choice, numerical, temporal grounding, boolean. The machine's load average is printed beside
the figures (the client and the server share its cores).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time

PROMPT = "<|im_start|>user\nWhat happens in the video?<|im_end|>\n<|im_start|>assistant\n"
THINK = "<think>The clip shows a person walking left, then a red car enters at the top right and stops.</think>"
SAMPLES = [
    (THINK + "<answer>B</answer><|im_end|>", {"problem_type": "multiple choice", "ground_truth": "B",
                                               "extras": {"options": ["A. red", "B. blue", "C. green"]}}),
    (THINK + "<answer>1,250</answer><|im_end|>", {"problem_type": "numerical", "ground_truth": "1250"}),
    (THINK + '<answer>{"time": [12.5, 20.0]}</answer><|im_end|>',
     {"problem_type": "temporal grounding", "ground_truth": '{"time": [12.0, 19.5]}'}),
    (THINK + "<answer>yes</answer><|im_end|>", {"problem_type": "boolean", "ground_truth": "no"}),
]  # fmt: skip


def payload(n: int, rng: random.Random) -> bytes:
    picks = [rng.choice(SAMPLES) for _ in range(n)]
    return json.dumps(
        {
            "query": [PROMPT + r for r, _ in picks],
            "prompts": [PROMPT] * n,
            "labels": [json.dumps(lab) for _, lab in picks],
        }
    ).encode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    port: int, extra: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "evr1_rewards.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--log-level", "warning", *(extra or [])]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                raise SystemExit(f"server exited: {proc.stderr.read().decode() if proc.stderr else ''}") from None
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start within 60 s")


async def load(url: str, connections: int, requests: int, samples: int, seed: int) -> dict[str, object]:
    import aiohttp

    rng = random.Random(seed)
    bodies = [payload(samples, rng) for _ in range(64)]
    latencies: list[float] = []
    errors: list[str] = []
    todo = iter(range(requests))

    async def worker() -> None:
        # one keep-alive connection per worker
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1, force_close=False)) as session:
            for i in todo:
                start = time.perf_counter()
                try:
                    async with session.post(url, data=bodies[i % len(bodies)],
                                            headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
                        body = await resp.read()
                        if resp.status != 200:
                            errors.append(f"HTTP {resp.status}: {body[:200]!r}")
                            continue
                        if len(json.loads(body)["rewards"]) != samples:
                            errors.append("wrong number of rewards")
                            continue
                except Exception as e:
                    errors.append(f"{type(e).__name__}: {e}")
                    continue
                latencies.append(time.perf_counter() - start)

    wall = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(connections)))
    wall = time.perf_counter() - wall
    lat = sorted(latencies)

    def pct(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3 if lat else float("nan")

    return {
        "requests": requests, "samples_per_request": samples, "connections": connections, "errors": len(errors),
        "first_errors": errors[:3], "wall_s": wall, "requests_per_s": len(lat) / wall,
        "samples_per_s": len(lat) * samples / wall, "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
        "max_ms": lat[-1] * 1e3 if lat else float("nan"), "mean_ms": statistics.fmean(lat) * 1e3 if lat else 0.0,
    }  # fmt: skip


_LUA = """
local bodies = {%(bodies)s}
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function request()
  i = i %% #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('EVR1 {"requests": %%d, "p50": %%f, "p90": %%f, "p99": %%f, "max": %%f, "status": %%d, '
    .. '"connect": %%d, "read": %%d, "write": %%d, "timeout": %%d, "duration_us": %%d}\\n', summary.requests,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, e.status, e.connect, e.read,
    e.write, e.timeout, summary.duration))
end
"""


def load_wrk(url: str, connections: int, seconds: float, samples: int, seed: int) -> dict[str, object]:
    """The load from wrk for `seconds` (wrk runs for a duration: the requests done in it are reported), latency
    percentiles and error counts (non-200 replies, connect/read/write errors, timeouts) from wrk itself."""
    import shutil
    import tempfile

    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed (Debian: apt-get install wrk), or use --client aiohttp")
    rng = random.Random(seed)
    threads = 2
    bodies = ",".join("[==[" + payload(samples, rng).decode() + "]==]" for _ in range(64))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_LUA % {"bodies": bodies})
    try:
        out = subprocess.run(
            ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "10s", "-s", f.name,
             url],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        os.unlink(f.name)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("EVR1 ")), None)
    if line is None:
        raise SystemExit(f"wrk failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    r = json.loads(line[5:])
    errors = r["status"] + r["connect"] + r["read"] + r["write"] + r["timeout"]
    wall = r["duration_us"] / 1e6
    return {
        "requests": r["requests"], "samples_per_request": samples, "connections": connections, "errors": errors,
        "first_errors": [f"{k}: {r[k]}" for k in ("status", "connect", "read", "write", "timeout") if r[k]],
        "wall_s": wall, "requests_per_s": r["requests"] / wall, "samples_per_s": r["requests"] * samples / wall,
        "p50_ms": r["p50"] / 1e3, "p90_ms": r["p90"] / 1e3, "p99_ms": r["p99"] / 1e3, "max_ms": r["max"] / 1e3,
    }  # fmt: skip


SPIN = "while True:\n    pass"
"""A program that burns its whole CPU limit (killed at extras.timeout seconds of CPU)."""


def _post(url: str, body: bytes) -> tuple[int, float]:
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(url)
    start = time.perf_counter()
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=600)
    try:
        conn.request("POST", f"{u.path}?{u.query}", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status, time.perf_counter() - start
    finally:
        conn.close()


def _code_body(programs: list[str], timeout: float) -> bytes:
    label = json.dumps({"problem_type": "code", "ground_truth": [{"input": "", "output": "1"}],
                        "extras": {"timeout": timeout}})  # fmt: skip
    return json.dumps({"query": programs, "labels": [label] * len(programs)}).encode()


def fairness(timeout: float, probes: int) -> list[dict[str, object]]:
    """Two clients keep the code sandbox saturated with programs that spin until their CPU limit; a third client
    sends a trivial code answer now and then. Its wait, with the fair gate (default) and with first come first
    served at the sandbox (`--code-slots 1000`: the gate never holds anyone back, as before the gate), in one run.
    Target: the trivial answer waits at most one program's time limit (its wall limit, 2 x timeout + 2 s)."""
    import threading

    rows = []
    for mode, extra in (("fair gate (default)", []), ("first come first served (--code-slots 1000)",
                                                      ["--code-slots", "1000"])):  # fmt: skip
        port = free_port()
        proc = start_server(port, extra, {"EVR1_REWARDS_TOKEN": "client-a,client-b,client-c"})
        base = f"http://127.0.0.1:{port}/get_reward?token="
        stop = threading.Event()

        def saturate(token: str, base: str = base, stop: threading.Event = stop) -> None:
            while not stop.is_set():
                _post(base + token, _code_body([SPIN] * 4, timeout))

        threads = [threading.Thread(target=saturate, args=(t,), daemon=True) for t in ("client-a", "client-b") * 2]
        try:
            for t in threads:
                t.start()
            time.sleep(2 * timeout + 2)  # both clients have answers running and queued
            waits = []
            for _ in range(probes):
                status, wait = _post(base + "client-c", _code_body(["print(1)"], timeout))
                waits.append(wait if status == 200 else float("nan"))
                time.sleep(timeout)
        finally:
            stop.set()
            proc.terminate()
            proc.wait(timeout=60)
            for t in threads:
                t.join(timeout=4 * timeout + 10)
        rows.append({"mode": mode, "waits_s": waits, "limit_s": 2 * timeout + 2})
    load1, load5, _ = os.getloadavg()
    print(f"\n## Fair share of the code sandbox: two clients saturate it, a third sends a trivial answer (load "
          f"{load1:.1f} / {load5:.1f})\n")  # fmt: skip
    print("| server | trivial answer waits (s) | worst | one program's time limit (s) | within it |")
    print("|---|---|---|---|---|")
    for r in rows:
        waits = r["waits_s"]
        assert isinstance(waits, list)
        worst = max(waits)
        print(
            f"| {r['mode']} | {', '.join(f'{w:.2f}' for w in waits)} | {worst:.2f} | {r['limit_s']:g} |"
            f" {'yes' if worst <= float(r['limit_s']) else 'NO'} |"
        )  # type: ignore[arg-type]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=64, help="samples per request in the batch run")
    parser.add_argument("--batch-requests", type=int, default=200)
    parser.add_argument("--url", default=None, help="an already running server (default: start one)")
    parser.add_argument("--client", choices=("aiohttp", "wrk"), default="aiohttp")
    parser.add_argument("--seconds", type=float, default=5.0, help="wrk: seconds per run (it reports what got done)")
    parser.add_argument("--json", default=None)
    parser.add_argument("--fairness", action="store_true", help="only the fair-share run of the code sandbox")
    parser.add_argument("--code-timeout", type=float, default=1.0, help="fairness: CPU seconds per spinning program")
    parser.add_argument("--probes", type=int, default=3, help="fairness: trivial answers sent by the third client")
    args = parser.parse_args()
    if args.fairness:
        rows = fairness(args.code_timeout, args.probes)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"fairness": rows, "load": os.getloadavg()}, f, indent=2)
        return
    proc = None
    if args.url is None:
        port = free_port()
        proc = start_server(port)
        args.url = f"http://127.0.0.1:{port}/get_reward"
    try:
        asyncio.run(load(args.url, 8, 200, 1, 0)) if args.client == "aiohttp" else load_wrk(args.url, 8, 1, 1, 0)
        if args.client == "wrk":
            one = load_wrk(args.url, args.connections, args.seconds, 1, 1)
            batch = load_wrk(args.url, args.connections, args.seconds, args.batch, 2)
        else:
            one = asyncio.run(load(args.url, args.connections, args.requests, 1, 1))
            batch = asyncio.run(load(args.url, args.connections, args.batch_requests, args.batch, 2))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
    load1, load5, _ = os.getloadavg()
    print(f"\n## evr1-rewards serve, client {args.client}: {args.connections} concurrent keep-alive connections (load average {load1:.1f} / "
          f"{load5:.1f}, {os.cpu_count()} CPUs shared by client and server)\n")  # fmt: skip
    print("| requests | samples/request | errors | p50 ms | p90 ms | p99 ms | max ms | requests/s | samples/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in (one, batch):
        print(f"| {r['requests']} | {r['samples_per_request']} | {r['errors']} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} |"
              f" {r['p99_ms']:.1f} | {r['max_ms']:.1f} | {r['requests_per_s']:,.0f} | {r['samples_per_s']:,.0f} |")  # fmt: skip
    ok = one["errors"] == 0 and batch["errors"] == 0 and one["p99_ms"] <= 50.0  # type: ignore[operator]
    print(f"\nTarget (0 errors, p99 <= 50 ms for one-sample requests): {'ok' if ok else 'MISSED'}")
    for r in (one, batch):
        if r["first_errors"]:
            print("errors:", r["first_errors"])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"one_sample": one, "batch": batch, "load": [load1, load5]}, f, indent=2)


if __name__ == "__main__":
    main()
