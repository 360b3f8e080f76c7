"""``fertility serve``: the app's endpoints and limits, its figures against ``fertility report``, the page in a
real headless Chromium, and the command's contract (bad input exit 2 before listening; SIGINT/SIGTERM one line).

The browser test needs Chromium from the system's packages and Playwright, as tests/fertility/present/test_viewer.py
(skipped where either is absent); its screenshot goes to ``test-output/fertility-serve.png``.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from starlette.testclient import TestClient

from fertility.cli import main
from fertility.present.explorer import MAX_TEXT_BYTES, explore
from fertility.present.faults import BLOCK_ENV
from fertility.present.serve import App, Shelf, listen, url_of

ROOT = Path(__file__).resolve().parents[3]
OUTPUT = ROOT / "test-output"
PLANTED = ['<script>window.planted = 1</script>', '<img src=x onerror="window.planted = 2">',
           "\" onmouseover='window.planted = 3' x=\""]
BANGLA = "আমি বাংলায় গান গাই। রবীন্দ্রনাথ ঠাকুরের স্বাধীনতা ও ক্ষমতা নিয়ে কবিতা।"
ENGLISH = "The quick brown fox jumps over the lazy dog, and the tokenizer counts its pieces."
TEXT = "\n".join([BANGLA, ENGLISH, *PLANTED])
STARTUP_TRIES = 200  # readiness polls of the URL, each bounded by its own timeout


@pytest.fixture(scope="module")
def shelf(shipped_tokenizers):
    return Shelf(["gpt2", "o200k_base"], shipped_tokenizers)


@pytest.fixture(scope="module")
def client(shelf):
    with TestClient(App(shelf).asgi(), base_url="http://127.0.0.1") as c:
        yield c


def post(client, texts, tokenizers=("gpt2", "o200k_base"), **extra):
    return client.post("/api/explore", json={"texts": texts, "tokenizers": list(tokenizers), **extra})


# --- the app -----------------------------------------------------------------------------------------------------

def test_page_offers_the_tokenizers_and_forbids_other_scripts(client):
    r = client.get("/")
    assert r.status_code == 200
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert "value='gpt2' checked" in r.text and "value='o200k_base' checked" in r.text
    assert str(ROOT) not in r.text  # no path of the server in the page
    assert client.get("/explorer.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/explorer.css").headers["content-type"].startswith("text/css")


def test_explore_is_the_explorers_html_and_figures(client, shelf):
    r = post(client, {"mix": TEXT})
    assert r.status_code == 200, r.text
    direct = explore({"mix": TEXT}, [shelf.get("gpt2"), shelf.get("o200k_base")])
    assert r.json()["html"] == direct.html(style=False)  # the same HTML as fertility.show
    assert r.json()["data"] == json.loads(json.dumps(direct.to_dict()))
    for planted in PLANTED:
        assert planted not in r.json()["html"]


def test_the_browser_never_names_a_path(client, shipped_tokenizers):
    for name in (str(shipped_tokenizers / "gpt2"), "../data/tokenizers/gpt2", "cl100k_base"):
        r = post(client, {"en": "text"}, [name])
        assert r.status_code == 400 and "not offered" in r.json()["error"]


@pytest.mark.parametrize("body, status, words", [
    ({"texts": {"en": "a" * (MAX_TEXT_BYTES + 1)}, "tokenizers": ["gpt2"]}, 413, "limit"),
    ({"texts": {"bn": "এক\nদুই", "en": "one"}, "tokenizers": ["gpt2"], "parallel": True}, 400, "line-aligned"),
    ({"texts": {"en": "  \n"}, "tokenizers": ["gpt2"]}, 400, "empty"),
    ({"texts": {"../etc": "text"}, "tokenizers": ["gpt2"]}, 400, "label"),
    ({"texts": {"en": "text"}, "tokenizers": []}, 400, "at least one"),
    ({"texts": {"en": "text"}, "tokenizers": ["gpt2", "gpt2"]}, 400, "once"),
    ({"texts": {f"l{i}": "text" for i in range(9)}, "tokenizers": ["gpt2"]}, 400, "at most 8 languages"),
    ([1, 2], 400, "JSON object"),
], ids=["too-large", "misaligned", "empty", "label", "no-tokenizer", "twice", "languages", "not-an-object"])
def test_bad_requests_get_a_message(client, body, status, words):
    r = client.post("/api/explore", json=body)
    assert r.status_code == status and words in r.json()["error"]


def test_no_request_opens_a_file(client):
    opened = []
    watching = threading.Event()

    def hook(event, args):  # audit hooks cannot be removed: this one records only while the test watches
        if watching.is_set() and event == "open":
            opened.append(args[0])

    def requests():
        assert client.get("/").status_code == 200
        assert post(client, {"mix": TEXT}).status_code == 200
        assert post(client, {"bn": BANGLA, "en": ENGLISH}, parallel=True).status_code == 200
        assert post(client, {"en": "x"}, ["/etc/passwd"]).status_code == 400
        assert post(client, {"../../etc/passwd": "x"}).status_code == 400

    requests()  # first: Python imports the modules these need (reading their .pyc files) once
    sys.addaudithook(hook)
    watching.set()
    try:
        requests()
    finally:
        watching.clear()
    assert opened == []


def test_a_body_over_the_limit_is_not_read(client):
    r = client.post("/api/explore", content=b"{}", headers={"Content-Type": "application/json",
                                                            "Content-Length": str(10 * MAX_TEXT_BYTES)})
    assert r.status_code == 413 and "limit" in r.json()["error"]


def test_only_json_posts_from_its_own_host(client):
    assert client.post("/api/explore", data={"texts": "x"}).status_code == 415  # a cross-site form post
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400  # DNS rebinding


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "127.0.0.2:9", "127.255.255.254", "[::1]",
                                  "[::1]:8000", "localhost", "localhost:8000", "LocalHost"])
def test_every_loopback_form_of_host_is_answered(client, host):
    assert client.get("/", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "[::1].evil",
                                  "localhost.evil.example", "[::2]:80", "10.0.0.1", "", "[::1"])
def test_a_host_that_is_not_loopback_is_refused(client, host):
    r = client.get("/", headers={"Host": host})
    assert r.status_code == 400 and "host" in r.text.lower()


@pytest.mark.parametrize("body, words", [
    (b"[" * 200_000, "nests too deep"),
    (b'{"texts": {"en": "' + b"[" * 200_000 + b'"}, "tokenizers": ["gpt2"]}', None),  # brackets in a string: text
    (b'{"texts": {"en": "say \\"' + b"[" * 100 + b'\\" and \\\\"}, "tokenizers": ["gpt2"]}', None),
    (b'{"texts": {"en": "x', "expected a JSON body"),
    (b'{"texts": {"en": "' + b'\\"[' * 2000, "expected a JSON body"),  # unterminated: its brackets are text
    (b'{"texts": {"en": "a \\ud800 b"}, "tokenizers": ["gpt2"]}', "not valid Unicode"),
    (b'{"texts": {"\\udfff": "text"}, "tokenizers": ["gpt2"]}', "label"),
], ids=["deep", "brackets-in-text", "escaped-quotes", "broken-json", "unterminated", "lone-surrogate", "surrogate-label"])
def test_odd_json_gets_a_message_and_no_traceback(client, body, words, capfd):
    r = client.post("/api/explore", content=body, headers={"Content-Type": "application/json"})
    if words is None:
        assert r.status_code == 200, r.text
    else:
        assert r.status_code == 400 and words in r.json()["error"], r.text
    assert "Traceback" not in capfd.readouterr().err


def test_tokenizers_load_once(shipped_tokenizers, monkeypatch):
    import fertility.present.serve as serve

    loads = []
    real = serve.load_tokenizer
    monkeypatch.setattr(serve, "load_tokenizer", lambda *a: loads.append(a) or real(*a))
    shelf = Shelf([], shipped_tokenizers)
    assert loads == [] and shelf.names == ["gpt2", "o200k_base"]  # known names offered, loaded on first use
    threads = [threading.Thread(target=shelf.get, args=("gpt2",)) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loads) == 1 and shelf.get("gpt2") is shelf.get("gpt2")


@contextmanager
def running(app_settings: App):
    """The app on a real uvicorn in a thread, on a free loopback port; yields its URL."""
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app_settings.asgi(), log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = url_of(sock)
    for _ in range(STARTUP_TRIES):  # the socket listens already; this waits for uvicorn to answer
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            continue
    else:
        pytest.fail(f"the server at {url} did not answer")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class BlockingApp(App):
    """An app whose measuring of the text "block" waits until the test lets it go."""

    started: threading.Event
    release: threading.Event

    def _measure(self, req):
        if "block" in req.texts.values():
            self.started.set()
            assert self.release.wait(timeout=60)
        return super()._measure(req)


def test_requests_are_served_while_one_is_measured(shelf):
    app = BlockingApp(shelf, workers=2)
    app.started, app.release = threading.Event(), threading.Event()
    with running(app) as url:
        slow = {}
        thread = threading.Thread(target=lambda: slow.update(r=httpx.post(
            url + "api/explore", json={"texts": {"en": "block"}, "tokenizers": ["gpt2"]}, timeout=60)))
        thread.start()
        assert app.started.wait(timeout=60)
        try:  # the event loop answers, and a second measuring runs beside the blocked one
            assert httpx.get(url, timeout=30).status_code == 200
            r = httpx.post(url + "api/explore", json={"texts": {"en": "other"}, "tokenizers": ["gpt2"]}, timeout=60)
            assert r.status_code == 200
        finally:
            app.release.set()
            thread.join(timeout=60)
        assert slow["r"].status_code == 200


# --- the page in a browser -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cli_md(tmp_path_factory, shipped_tokenizers):
    """report.md and report.json of ``fertility report`` on TEXT saved as a file, labelled "mix"."""
    folder = tmp_path_factory.mktemp("cli")
    (folder / "mix.txt").write_text(TEXT, encoding="utf-8")
    code = main(["report", "--no-progress", "--tokenizer", "gpt2", "--tokenizer", "o200k_base", "--tokenizer-dir",
                 str(shipped_tokenizers), "--text", f"mix={folder / 'mix.txt'}", "--detail-every", "1",
                 "--out", str(folder / "report")])
    assert code == 0
    return ((folder / "report" / "report.md").read_text(encoding="utf-8"),
            json.loads((folder / "report" / "report.json").read_text(encoding="utf-8")))


def md_rows(md: str, tokenizer: str, table: str) -> dict[str, list[str]]:
    """The rows of report.md's ``table`` ("languages", "scripts") of ``tokenizer``, by first cell."""
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith(f"## {tokenizer} (") and line.endswith(f": {table}"))
    rows = {}
    for line in lines[start + 4:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


@pytest.mark.slow
def test_app_in_headless_chromium(shelf, cli_md, tmp_path_factory, browser_page):
    md, report = cli_md
    with running(App(shelf)) as url, browser_page(1400, 1000) as (page, problems, dialogs):
        page.goto(url, wait_until="load")
        page.fill("#lang-a", "mix")
        page.fill("#text-a", TEXT)
        assert page.is_checked("input[value=gpt2]") and page.is_checked("input[value=o200k_base]")
        page.click("#go")
        page.wait_for_selector(".fx table.summary")
        assert page.evaluate("window.planted") is None  # no planted script or handler ran
        for i, name in enumerate(["gpt2", "o200k_base"]):
            tokens = round(report["tokenizers"][i]["languages"]["mix"]["tokens"])
            cells = page.locator(f".fx .cell[data-tokenizer='{name}']")
            assert page.locator(f".fx .cell[data-tokenizer='{name}'] .tok").count() == tokens
            shown = "\n".join(cells.nth(k).inner_text() for k in range(cells.count()))
            for planted in PLANTED:
                assert planted in shown  # shown as the text it is
            title = page.locator(f".fx .cell[data-tokenizer='{name}'] .tok").first.get_attribute("title")
            assert title.startswith("id ") and "| bytes " in title
            # the per-script figures are the CLI's report.md figures, cell for cell
            cli = md_rows(md, name, "scripts")
            for script in ("Bengali", "Latin"):
                row = page.locator(f".fx table.scripts tr[data-row='{script}'] td").all_inner_texts()
                assert row[2 + 2 * i] == cli[script][1]  # chars/token
                assert row[3 + 2 * i] == cli[script][10]  # the pre-tokenizer's ceiling
            summary = page.locator(f".fx table.summary tr[data-tokenizer='{name}'] td").all_inner_texts()
            assert summary[3] == f"{tokens:,}"
        assert page.locator(".fx .tok.cut").count() > 0  # gpt2 starts tokens inside Bengali clusters
        diff = round(report["tokenizers"][1]["languages"]["mix"]["tokens"]) - \
            round(report["tokenizers"][0]["languages"]["mix"]["tokens"])
        assert f"{diff:+,}" in page.locator(".fx .head[data-tokenizer='o200k_base']").inner_text()
        OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUTPUT / "fertility-serve.png"), full_page=False)

        page.check("input[value=parallel]")
        page.fill("#lang-a", "bn")
        page.fill("#text-a", "আমি বাংলায় গান গাই।\nতুমি কেমন আছ?")
        page.fill("#text-b", "I sing in Bangla.\nHow are you?")
        page.click("#go")
        page.wait_for_selector("text=bn premium (vs en)")
        direct = explore({"bn": "আমি বাংলায় গান গাই।\nতুমি কেমন আছ?", "en": "I sing in Bangla.\nHow are you?"},
                         [shelf.get("gpt2")], parallel=True)
        premium_cell = page.locator(".fx table.summary tr[data-tokenizer='gpt2'] td").all_inner_texts()[-2]
        assert premium_cell == f"{direct.parallel['gpt2']['bn'].premium:.3f}"

        page.check("input[value=one]")
        page.evaluate(f"document.querySelector('#text-a').value = 'a'.repeat({MAX_TEXT_BYTES + 1})")
        page.click("#go")
        assert "the limit is 1,000,000 bytes" in page.locator("#message").inner_text()

        # a file: read as UTF-8 into the text box; refused with a message when not UTF-8 or too large
        files = tmp_path_factory.mktemp("files")
        (files / "bn.txt").write_text(BANGLA + "\n", encoding="utf-8")
        (files / "latin1.txt").write_bytes("caf\u00e9".encode("latin-1"))
        (files / "big.txt").write_bytes(b"a" * (MAX_TEXT_BYTES + 1))
        page.set_input_files("#file-a", str(files / "bn.txt"))
        page.wait_for_function("document.querySelector('#text-a').value.length > 10")
        assert page.input_value("#text-a") == BANGLA + "\n"
        page.set_input_files("#file-a", str(files / "latin1.txt"))
        page.wait_for_selector("#message:has-text('is not UTF-8 text')")
        page.set_input_files("#file-a", str(files / "big.txt"))
        page.wait_for_selector("#message:has-text('the limit is 1,000,000 bytes')")
        assert page.input_value("#text-a") == BANGLA + "\n"  # a refused file leaves the text as it was
        assert problems == [] and dialogs == []


# --- the command ---------------------------------------------------------------------------------------------------

def run_main(args, capsys):
    try:
        code = main(["serve", *args])
    except SystemExit as e:  # argparse's one-line error for an option's value
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("args, names", [
    (["--tokenizer", "nope"], ["--tokenizer", "nope"]),
    (["--tokenizer", "missing/tokenizer.json"], ["--tokenizer", "missing/tokenizer.json"]),
    (["--tokenizer", "gpt2", "--tokenizer", "gpt2"], ["--tokenizer", "gpt2"]),
    (["--tokenizer-dir", "no-such-folder"], ["--tokenizer-dir", "no-such-folder"]),
    (["--port", "65536"], ["--port", "65536"]),
    (["--port", "http"], ["--port", "http"]),
    (["--workers", "0"], ["--workers"]),
    (["--host", "192.0.2.1", "--port", "0"], ["--host", "192.0.2.1"]),  # TEST-NET: an address not on this machine
], ids=["unknown-name", "missing-file", "twice", "no-dir", "port-range", "port-text", "workers", "foreign-host"])
def test_bad_input_exits_2_before_listening(args, names, capsys, input_error, monkeypatch):
    monkeypatch.setattr(uvicorn.Server, "run", lambda *a, **k: pytest.fail("it got as far as serving"))
    code, err = run_main(args, capsys)
    input_error(code, err, *names)


def test_a_port_in_use_exits_2(capsys, input_error, shipped_tokenizers):
    taken = listen("127.0.0.1", 0)
    try:
        port = str(taken.getsockname()[1])
        code, err = run_main(["--tokenizer-dir", str(shipped_tokenizers), "--port", port], capsys)
    finally:
        taken.close()
    input_error(code, err, "--port", port)


def start(*args: str, **env_extra: str) -> tuple[subprocess.Popen, str]:
    """``fertility serve`` in a subprocess; returns it and its URL, read from the line it prints."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    proc = subprocess.Popen([sys.executable, "-m", "fertility", "serve", "--port", "0", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the URL line, printed once the socket listens (EOF if it died)
    assert line.startswith("fertility serve: http://"), (line, proc.stderr.read())
    return proc, line.split()[2]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_it_with_one_line(sig, interrupt):
    proc, url = start()

    def answered() -> None:  # a request served: the server is up and past its start
        r = httpx.post(url + "api/explore", json={"texts": {"bn": BANGLA}, "tokenizers": ["gpt2"]}, timeout=120)
        assert r.status_code == 200

    interrupt(proc, sig, ready=answered, timeout=60)


@pytest.mark.slow
def test_another_host_than_loopback_warns():
    proc, url = start("--host", "0.0.0.0")
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143
    lines = err.splitlines()
    assert len(lines) == 2 and "warning: listening on 0.0.0.0, not on loopback" in lines[0], err


@pytest.mark.slow
def test_the_host_check_holds_on_ipv6_loopback(interrupt):
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"this machine has no IPv6 loopback ({e.strerror})")
    proc, url = start("--host", "::1")
    assert url.startswith("http://[::1]:")

    def checked() -> None:
        assert httpx.get(url, headers={"Host": "evil.example"}, timeout=60).status_code == 400
        assert httpx.get(url, timeout=60).status_code == 200  # Host: [::1]:PORT, what a browser sends

    _, err = interrupt(proc, signal.SIGINT, ready=checked, timeout=60)
    assert "warning" not in err


@pytest.mark.slow
def test_a_stop_during_a_long_request_prints_only_the_stop_line(interrupt, tmp_path):
    """Ctrl-C while a request's measuring runs past the grace period (held by fertility.present.faults): the client
    gets a 503 that says why, the terminal one stop line (no uvicorn CancelledError traceback)."""
    started = tmp_path / "measuring"
    os.mkfifo(started)
    # Held open for reading and writing, so that the hook's open never waits and our read never sees an end.
    fifo = os.open(started, os.O_RDWR | os.O_NONBLOCK)
    proc, url = start(**{BLOCK_ENV: str(started)})
    answer = {}
    client = threading.Thread(target=lambda: answer.update(r=httpx.post(
        url + "api/explore", json={"texts": {"en": "long"}, "tokenizers": ["gpt2"]}, timeout=120)))
    client.start()

    def measuring() -> None:  # wait on the FIFO the blocked measuring writes to: the event, never on time
        while not select.select([fifo], [], [], 1.0)[0]:  # each second, also check that both still live
            assert proc.poll() is None and client.is_alive(), (proc.poll(), answer)
        assert os.read(fifo, 64).strip().isdigit()

    try:
        interrupt(proc, signal.SIGINT, ready=measuring, timeout=120)
    finally:
        client.join(timeout=120)
        os.close(fifo)
    r = answer["r"]
    assert r.status_code == 503 and "stopping" in r.json()["error"], r.text
