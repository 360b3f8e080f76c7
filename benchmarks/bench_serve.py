"""``fertility serve`` under load: concurrent clients posting ~2 KB texts to a real server on loopback.

    python benchmarks/bench_serve.py [--clients 20] [--seconds 20] [--text-bytes 2048]
        [--tokenizer gpt2 --tokenizer o200k_base]

The server is ``python -m fertility serve --port 0`` in its own process (the URL is read from the line it
prints). Each client posts texts cut from the shipped sample (Bangla and English, ``--text-bytes`` UTF-8 bytes
each, cut at a space), one request after another, until ``--seconds`` have passed (and at most
``MAX_REQUESTS`` in all). It prints the latency percentiles, the throughput and the errors (any answer but
200, or no answer), then checks the server still answers and stops it with SIGTERM (exit 143 expected).

The peer, measured in the same run: the direct in-process call the app makes per request
(``fertility.present.explorer.explore`` + its HTML and figures), one after another on the same texts. Ratios: the
server's throughput over the direct calls' (1 = no cost of serving at all; the server has ``--workers``
threads and the direct calls one), and the server's p50 latency over the direct call's median (with more
clients than workers, queueing makes this about clients / workers).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from fertility.present.explorer import explore
from fertility.text import iter_documents
from fertility.tokenizers import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SOURCES = {"bn": SAMPLE / "bn" / "literature-bnarchive.txt.gz", "en": SAMPLE / "en" / "wiki-en-chinapedia.txt.gz"}
MAX_REQUESTS = 100_000
POOL = 64  # distinct texts, cycled


def texts(size: int) -> list[dict[str, str]]:
    """``POOL`` texts of about ``size`` UTF-8 bytes, alternating Bangla and English, cut at a space."""
    out = []
    streams = {lang: iter(iter_documents(str(path))) for lang, path in SOURCES.items()}
    while len(out) < POOL:
        for lang, docs in streams.items():
            text = ""
            while len(text.encode("utf-8")) < size:
                text += next(docs).text + "\n"
            data = text.encode("utf-8")[:size].decode("utf-8", errors="ignore")
            out.append({lang: data[: data.rfind(" ")] if " " in data else data})
    return out[:POOL]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--text-bytes", type=int, default=2048)
    parser.add_argument("--tokenizer", action="append", default=None)
    args = parser.parse_args()
    names = args.tokenizer or ["gpt2", "o200k_base"]
    pool = texts(args.text_bytes)

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "fertility", "serve", "--port", "0"]
    for name in names:
        command += ["--tokenizer", name]
    # the server's stderr goes to a file, read back at the end (a pipe nobody reads could fill up)
    with tempfile.TemporaryFile(mode="w+") as log:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            line = server.stdout.readline()
            if "http://" not in line:
                raise SystemExit(f"the server did not start: {line!r}")
            url = line.split()[2]
            body = lambda i: {"texts": pool[i % POOL], "tokenizers": names}  # noqa: E731
            with httpx.Client(timeout=120) as warm:  # a warm-up, not measured
                for i in range(2):
                    warm.post(url + "api/explore", json=body(i)).raise_for_status()

            latencies: list[float] = []
            errors: list[str] = []
            lock = threading.Lock()
            deadline = time.perf_counter() + args.seconds

            def client(k: int) -> None:
                with httpx.Client(timeout=120) as http:
                    i = k
                    while time.perf_counter() < deadline:
                        with lock:
                            if len(latencies) + len(errors) >= MAX_REQUESTS:
                                return
                        start = time.perf_counter()
                        try:
                            r = http.post(url + "api/explore", json=body(i))
                            problem = None if r.status_code == 200 else f"HTTP {r.status_code}: {r.text[:200]}"
                        except httpx.HTTPError as e:
                            problem = f"{type(e).__name__}: {e}"
                        with lock:
                            (errors.append(problem) if problem else latencies.append(time.perf_counter() - start))
                        i += args.clients

            start = time.perf_counter()
            threads = [threading.Thread(target=client, args=(k,)) for k in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - start

            with httpx.Client(timeout=60) as after:
                still = after.get(url).status_code == 200 and after.post(url + "api/explore", json=body(0)).status_code == 200

            # The peer: the same work in this process, one call after another.
            toks = [load_tokenizer(n) for n in names]
            direct = []
            for i in range(min(POOL, max(8, len(latencies) // args.clients))):
                t0 = time.perf_counter()
                e = explore(pool[i % POOL], toks)
                e.html(style=False), e.to_dict()
                direct.append(time.perf_counter() - t0)
        finally:
            server.send_signal(signal.SIGTERM)
            code = server.wait(timeout=60)
            log.seek(0)
            stderr = log.read().strip()

    served = len(latencies)
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    direct_median = statistics.median(direct)
    print(f"{args.clients} clients x {args.seconds:g} s, ~{args.text_bytes} B texts, tokenizers {', '.join(names)}")
    print(f"served {served} requests in {elapsed:.1f} s ({served / elapsed:.1f}/s); errors: {len(errors)}")
    for problem in sorted(set(errors))[:5]:
        print(f"  error: {problem}")
    print(f"latency p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms")
    print(f"direct explore() call: median {direct_median * 1000:.1f} ms over {len(direct)} calls "
          f"({1 / direct_median:.1f}/s one after another)")
    print(f"ratio throughput server / direct: {served / elapsed * direct_median:.2f}")
    print(f"ratio p50 latency server / direct: {p50 / direct_median:.1f} (clients / workers queue)")
    print(f"server still answering afterwards: {still}; stopped by SIGTERM with exit {code}, stderr: {stderr!r}")
    if errors or not still or code != 128 + signal.SIGTERM:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
