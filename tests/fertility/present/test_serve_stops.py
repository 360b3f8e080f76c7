"""``fertility serve`` ends and serves quietly: a second Ctrl-C during the graceful stop ends it at once with the
one stop line (no uvicorn traceback), SIGHUP stops it like SIGTERM, and a client that goes away in the middle
of its request body leaves no traceback in the server's log."""

from __future__ import annotations

import errno
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from fertility.present.faults import BLOCK_ENV

ROOT = Path(__file__).resolve().parents[3]
TOKENIZERS = ROOT / "data" / "tokenizers"


def start(**env_extra: str) -> tuple[subprocess.Popen, str]:
    """``fertility serve`` on a free port of 127.0.0.1; returns it and its URL (read from the line it prints)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    proc = subprocess.Popen([sys.executable, "-m", "fertility", "serve", "--port", "0", "--tokenizer-dir",
                             str(TOKENIZERS)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()  # printed once the socket listens (EOF if it died)
    assert line.startswith("fertility serve: http://"), (line, proc.stderr.read())
    return proc, line.split()[2]


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    return host, int(port)


def stop_line(sig: int) -> str:
    return f"fertility: stopped by {signal.Signals(sig).name}; finished work is kept (rerun the same command to go on)\n"


def refused(url: str) -> bool:
    """Whether the server no longer accepts connections (it has begun to stop)."""
    try:
        socket.create_connection(address(url), timeout=60).close()
    except OSError as e:
        return e.errno == errno.ECONNREFUSED
    return False


@pytest.mark.slow
def test_a_second_ctrl_c_during_the_stop_ends_it_at_once_with_one_line(tmp_path):
    started = tmp_path / "measuring"
    os.mkfifo(started)
    fifo = os.open(started, os.O_RDWR | os.O_NONBLOCK)  # read and write: the hook's open never waits
    proc, url = start(**{BLOCK_ENV: str(started)})
    client = threading.Thread(target=lambda: httpx.post(url + "api/explore", timeout=120,
                                                        json={"texts": {"en": "long"}, "tokenizers": ["gpt2"]}),
                              daemon=True)  # its answer (a 500, a dropped connection) is not what is tested
    try:
        client.start()
        while not select.select([fifo], [], [], 1.0)[0]:  # the measuring has begun, and blocks for good
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        while not refused(url):  # the first Ctrl-C is in: the server stopped listening and waits for the request
            assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        os.close(fifo)
    assert (proc.returncode, err) == (130, stop_line(signal.SIGINT))


@pytest.mark.slow
def test_sighup_stops_it_like_sigterm():
    proc, url = start()
    try:
        assert httpx.get(url, timeout=120).status_code == 200  # up and past its start
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (129, stop_line(signal.SIGHUP))


@pytest.mark.slow
def test_a_client_gone_in_the_middle_of_its_body_leaves_no_traceback():
    proc, url = start()
    host, port = address(url)
    try:
        for _ in range(3):
            with socket.create_connection((host, port), timeout=120) as sock:
                sock.sendall(f"POST /api/explore HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json"
                             "\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n".encode())
                # uvicorn says "100 Continue" when the app starts reading the body: the event to wait on
                assert sock.recv(64).startswith(b"HTTP/1.1 100"), "the app did not start reading the body"
                sock.sendall(b'{"texts": {"en": "par')  # 21 of the 1000 bytes announced, then gone
        assert httpx.get(url, timeout=120).status_code == 200  # still serving
        proc.send_signal(signal.SIGTERM)  # a graceful stop waits for every request, the ones above included
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err and "ClientDisconnect" not in err, err
    assert proc.returncode == 143 and err.endswith(stop_line(signal.SIGTERM)), err
    assert len(err.splitlines()) <= 1 + 3, err  # at most a line a disconnect, besides the stop line
