"""``fertility serve``: the explorer (fertility.present.explorer) as a local web app, Starlette served by uvicorn.

Paste text or drop a text file, tick tokenizers, and see each one's tokens as coloured spans beside the
report's figures; or paste a sentence per line in two languages for the premium. The page is rendered by
:meth:`fertility.present.explorer.Exploration.html`, the HTML ``fertility.show`` puts in a notebook.

Limits and safety:

* a request carries at most ``MAX_TEXT_BYTES`` (1 MB) of text; a larger one is refused with a message (in the
  page before it is sent; by the server too, which stops reading a body that is too large);
* the tokenizers offered are named by the server: ``--tokenizer`` specs (loaded at start, so a bad one stops
  the command before it listens) and the known names found in the tokenizer folders (loaded on first use);
  each is loaded once and kept. The browser names a tokenizer from that list, never a path, and no endpoint
  reads or writes a file;
* the measuring runs on worker threads (at most ``--workers`` at once), so the event loop keeps answering;
* every piece of text is HTML-escaped by the explorer; the page runs only its own script (a
  Content-Security-Policy forbids any other, inline ones included) and answers only requests whose Host is
  the one it listens on (no DNS rebinding), and only JSON posts (no cross-site form posts);
* it listens on 127.0.0.1 unless ``--host`` says otherwise, and warns when it does.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from html import escape
from pathlib import Path

import anyio
import anyio.from_thread
import anyio.lowlevel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from common.errors import InputError
from common.signals import SIGNALS, Interrupted
from fertility.present import faults
from fertility.present.explorer import CSS, DEFAULT_LANG, MAX_TEXT_BYTES, TextTooLarge, check_size, explore
from fertility.present.viewer import FONT_STACK
from fertility.tokenizers import (
    Tokenizer,
    TokenizerLoadError,
    available_known,
    check_tokenizer_dir,
    load_tokenizer,
)
from fertility.tokenizers.base import WORKERS

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
# A JSON body escapes some characters (a control character takes 6 bytes); past this many bytes a body cannot
# hold MAX_TEXT_BYTES of text and reading stops.
MAX_BODY_BYTES = 6 * MAX_TEXT_BYTES + 64 * 1024
MAX_LANGUAGES = 8  # texts in one request (the page sends one, or two in parallel mode)
SHUTDOWN_GRACE_S = 5  # requests still running at Ctrl-C get this long to finish, then a 503
_SURROGATE = re.compile("[\ud800-\udfff]")
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Shelf:
    """The tokenizers the app offers, by name: each loaded once, then kept for every request."""

    def __init__(self, specs: Sequence[str], tokenizer_dir: str | Path | None = None) -> None:
        check_tokenizer_dir(tokenizer_dir)
        self.tokenizer_dir = tokenizer_dir
        self._loaded: dict[str, Tokenizer] = {}
        for spec in specs:  # loaded now: a bad one is an error before the server listens
            try:
                tok = load_tokenizer(spec, tokenizer_dir)
            except TokenizerLoadError as e:
                raise TokenizerLoadError(f"--tokenizer {spec}: {e}") from None
            if tok.name in self._loaded:
                raise InputError(f"--tokenizer {spec}: a second tokenizer named {tok.name!r}; give each once")
            self._loaded[tok.name] = tok
        self.names = list(self._loaded) + [n for n in available_known(tokenizer_dir) if n not in self._loaded]
        if not self.names:
            raise InputError("no tokenizers: pass --tokenizer SPEC or --tokenizer-dir DIR")
        self.default = list(self._loaded) or [n for n in ("gpt2", "o200k_base") if n in self.names] or self.names[:2]
        self._lock = threading.Lock()

    def get(self, name: str) -> Tokenizer:
        """The tokenizer offered as ``name``, loaded on first use; an :class:`InputError` for any other name."""
        if name not in self.names:
            raise InputError(f"tokenizer {name!r} is not offered here; expected one of {', '.join(self.names)}")
        tok = self._loaded.get(name)
        if tok is None:
            with self._lock:  # two first requests for one tokenizer load it once
                tok = self._loaded.get(name) or load_tokenizer(name, self.tokenizer_dir)
                self._loaded[name] = tok
        return tok


@dataclass
class ExploreRequest:
    """A checked request of ``POST /api/explore``: texts per language, tokenizer names, the mode."""

    texts: dict[str, str]
    tokenizers: list[str]
    parallel: bool = False
    reference: str | None = None

    @classmethod
    def parse(cls, body: object, shelf: Shelf, max_bytes: int) -> ExploreRequest:
        if not isinstance(body, dict):
            raise InputError("expected a JSON object {texts: {LANG: TEXT}, tokenizers: [NAME, ...]}")
        texts, names = body.get("texts"), body.get("tokenizers")
        if not isinstance(texts, dict) or not texts or not all(isinstance(t, str) for t in texts.values()):
            raise InputError("texts: expected an object of LANG: TEXT")
        if len(texts) > MAX_LANGUAGES:
            raise InputError(f"texts: at most {MAX_LANGUAGES} languages a request")
        for lang, text in texts.items():
            if _SURROGATE.search(text):  # a lone "\ud800" escape is valid JSON but no character
                at = _SURROGATE.search(text).start()
                raise InputError(f"texts[{lang!r}]: not valid Unicode text (a lone surrogate "
                                 f"U+{ord(text[at]):04X} at character {at}); send the text as UTF-8")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise InputError("tokenizers: choose at least one tokenizer")
        if len(set(names)) != len(names):
            raise InputError("tokenizers: each tokenizer once")
        for name in names:
            if name not in shelf.names:
                raise InputError(f"tokenizer {name!r} is not offered here")
        check_size(texts, max_bytes)
        parallel = body.get("parallel") is True
        reference = list(texts)[-1] if parallel else None
        return cls(texts, names, parallel, reference)


@dataclass
class App:
    """The app's settings; :meth:`asgi` is the Starlette application."""

    shelf: Shelf
    max_bytes: int = MAX_TEXT_BYTES
    workers: int = WORKERS
    # Answer only requests whose Host is a loopback form (no DNS rebinding); off where it listens beyond loopback.
    loopback_only: bool = True
    on_ready: Callable[[], None] | None = None  # called once the app has started
    grace_s: float = SHUTDOWN_GRACE_S  # how long a running request may go on once :meth:`stop` is called

    def asgi(self) -> Starlette:
        @asynccontextmanager
        async def lifespan(app: Starlette):
            app.state.limiter = anyio.CapacityLimiter(self.workers)
            self._stopping = anyio.Event()
            if self.on_ready:
                self.on_ready()
            yield

        routes = [Route("/", self.page), Route("/explorer.css", self.stylesheet),
                  Route("/explorer.js", self.script), Route("/api/explore", self.explore, methods=["POST"]),
                  Route("/favicon.ico", self.no_icon)]
        middleware = [Middleware(LoopbackHostOnly)] if self.loopback_only else []
        return Starlette(routes=routes, lifespan=lifespan, middleware=middleware)

    def stop(self) -> None:
        """The server stops: running requests get ``grace_s`` more, then a 503 (called on the event loop)."""
        stopping = getattr(self, "_stopping", None)  # None: the app never started
        if stopping is not None:
            stopping.set()

    async def page(self, request: Request) -> Response:
        return HTMLResponse(page_html(self.shelf, self.max_bytes), headers=HEADERS)

    async def stylesheet(self, request: Request) -> Response:
        return Response(CSS + PAGE_CSS, media_type="text/css", headers=HEADERS)

    async def script(self, request: Request) -> Response:
        return Response(SCRIPT, media_type="text/javascript", headers=HEADERS)

    async def no_icon(self, request: Request) -> Response:
        return Response(status_code=204, headers=HEADERS)  # browsers ask; a 404 would be a console error

    async def explore(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _error(415, "expected a JSON body (Content-Type: application/json)")
        too_large = _error(413, f"the request is over the limit of {self.max_bytes:,} bytes ({self.max_bytes / 1e6:g} "
                                "MB) of text: paste or drop a shorter text")
        if int(request.headers.get("content-length") or 0) > MAX_BODY_BYTES:
            return too_large
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    return too_large
        except ClientDisconnect:  # the client went away before its body was in: no one to answer, nothing wrong
            return Response(status_code=400, headers=HEADERS)
        try:
            parsed = ExploreRequest.parse(json.loads(body), self.shelf, self.max_bytes)
        except TextTooLarge as e:
            return _error(413, str(e))
        except InputError as e:
            return _error(400, str(e))
        except RecursionError:  # the parser recurses: 200k nested "[" was a 500 and a traceback per request
            return _error(400, "the JSON body nests too deep; expected an object {texts: {LANG: TEXT}, "
                               "tokenizers: [NAME, ...]}")
        except ValueError:  # not JSON, not UTF-8
            return _error(400, "expected a JSON body")
        try:
            done = await self._measured(parsed, request.app.state.limiter)
        except InputError as e:  # an empty text, misaligned parallel lines, a tokenizer that fails to load
            return _error(400, str(e))
        if done is None:
            return _error(503, f"fertility serve is stopping: the measuring did not finish within "
                               f"{self.grace_s:g} s; start the server again and resend")
        html, data = done
        return JSONResponse({"html": html, "data": data}, headers=HEADERS)

    async def _measured(self, req: ExploreRequest, limiter: anyio.CapacityLimiter) -> tuple[str, dict] | None:
        """:meth:`_measure` on a thread of its own once ``limiter`` lets it run; None when the server stops and
        ``grace_s`` passes first (a request still waiting its turn included).

        The thread is a daemon: a measuring that outlives the server is abandoned with it, so the process
        ends with its stop line (a worker thread of anyio's would be joined at exit, however long it runs;
        and uvicorn's own cancelling of the request, past its grace, logged a CancelledError traceback).
        """
        finished = anyio.Event()
        box: dict = {}
        token = anyio.lowlevel.current_token()

        def work() -> None:
            try:
                box["result"] = self._measure(req)
            except BaseException as e:  # noqa: BLE001 (raised again on the event loop, below)
                box["error"] = e
            with contextlib.suppress(RuntimeError):  # the event loop has closed: the server stopped without it
                anyio.from_thread.run_sync(finished.set, token=token)

        async with anyio.create_task_group() as tg:
            async def give_up() -> None:
                await self._stopping.wait()
                await anyio.sleep(self.grace_s)
                tg.cancel_scope.cancel()

            tg.start_soon(give_up)
            async with limiter:
                threading.Thread(target=work, name="fertility-measure", daemon=True).start()
                await finished.wait()
            tg.cancel_scope.cancel()
        if "error" in box:
            raise box["error"]
        return box.get("result")

    def _measure(self, req: ExploreRequest) -> tuple[str, dict]:
        faults.block_if_asked()
        exploration = explore(req.texts, [self.shelf.get(n) for n in req.tokenizers], parallel=req.parallel,
                              reference=req.reference)
        return exploration.html(style=False), exploration.to_dict()


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status, headers=HEADERS)


class LoopbackHostOnly:
    """ASGI middleware: a 400 for any request whose Host header is not a loopback form (``127.0.0.1`` and the
    rest of 127/8, ``[::1]``, ``localhost``, each with or without a port), so that a page on another site
    whose name resolves to this machine (DNS rebinding) is not answered. Starlette's TrustedHostMiddleware
    cannot tell an IPv6 Host from a port, so `--host ::1` answered any Host."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if not is_loopback(host_name(host)):
                response = Response(f"Invalid Host header {host!r}: this server answers only loopback Host "
                                    "names (127.0.0.1, [::1], localhost)", status_code=400,
                                    media_type="text/plain", headers=HEADERS)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(host: str) -> str:
    """The name in a Host header, without its port: ``[::1]:8000`` -> ``::1``, ``localhost:80`` -> ``localhost``;
    "" for a malformed one."""
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        return name if bracket and (not rest or rest[0] == ":" and rest[1:].isdigit()) else ""
    name, colon, port = host.partition(":")
    return name if not colon or port.isdigit() else ""


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0: a free port); an :class:`InputError` when the address
    cannot be used (a port in use, an unknown host)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        raise InputError(f"--host {host}: cannot listen there ({e.strerror or e})") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise InputError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
    sock.set_inheritable(True)
    return sock


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, IPv6 with or without brackets) is this machine's loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def serve(shelf: Shelf, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, workers: int = WORKERS) -> None:
    """Listen on ``host``:``port``, print the URL on stdout, and serve until SIGINT/SIGTERM/SIGHUP, which ends it
    after the running requests (up to ``SHUTDOWN_GRACE_S``; a second signal: at once) and is raised again for
    the caller as :class:`common.signals.Interrupted` (``common.cli.run_command`` prints one line). Nothing is
    opened in a browser."""
    import uvicorn

    sock = listen(host, port)
    url = url_of(sock)
    loopback = is_loopback(host)
    if not loopback:
        print(f"fertility serve: warning: listening on {host}, not on loopback: anyone who can reach this machine "
              "can use the app", file=sys.stderr, flush=True)
    # The URL is printed from the app's startup, where uvicorn already handles SIGINT/SIGTERM (a script that
    # waits for the line may signal at once) and the socket listens (a request then waits to be answered).
    def ready() -> None:
        print(f"fertility serve: {url} (tokenizers: {', '.join(shelf.names)}; Ctrl-C stops it)", flush=True)

    settings = App(shelf, workers=workers, loopback_only=loopback, on_ready=ready)
    # uvicorn's INFO lines stay out of the terminal: stdout has the URL, stderr only warnings and the stop line.
    # Past the app's own grace a running request answers 503 and ends; uvicorn's later deadline (which cancels
    # the request and logs a CancelledError traceback) is never reached.
    config = uvicorn.Config(settings.asgi(), log_level="warning", access_log=False, lifespan="on",
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S + 10)
    server = _server_class()(config, settings.stop)
    server.run(sockets=[sock])
    if server.stopped_by is not None:
        raise Interrupted(server.stopped_by)  # common.cli.run_command prints the one line


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, telling the app when it starts to shut down, stopped by every signal that stops a
        command (SIGHUP too) and ending quietly: the signal is raised again only once the event loop is closed
        (:attr:`stopped_by`, raised by :func:`serve`), and a second signal means now."""

        def __init__(self, config, on_shutdown: Callable[[], None]) -> None:
            super().__init__(config)
            self._on_shutdown = on_shutdown
            self.stopped_by: int | None = None

        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn's own re-raises the signals inside the event loop, whose tasks then log tracebacks as the
            # loop is closed; and it knows only SIGINT and SIGTERM.
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in SIGNALS}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig: int, frame) -> None:
            if self.stopped_by is None:
                self.stopped_by = sig
                self.should_exit = True
                return
            # A second signal: stop now, without waiting for the running requests; their cancelling, as the
            # loop closes, is no error to log.
            self.force_exit = True
            logging.getLogger("uvicorn.error").disabled = True

        async def shutdown(self, sockets=None) -> None:
            self._on_shutdown()
            await super().shutdown(sockets)

    return Server


# --- the page --------------------------------------------------------------------------------------------------

PAGE_CSS = f"""
body {{font-family: sans-serif; margin: 0 auto; max-width: 1400px; padding: 0 1em 2em}}
header {{display: flex; align-items: baseline; gap: 1em}}
header h1 {{font-size: 20px}}
.panes {{display: flex; gap: 1em}}
.pane {{flex: 1; display: flex; flex-direction: column; gap: 0.3em}}
.pane[hidden] {{display: none}}
.pane textarea {{min-height: 9em; font-size: 16px; width: 100%; box-sizing: border-box; font-family: {FONT_STACK}}}
.pane.dragging textarea {{outline: 3px dashed #1976d2}}
fieldset {{border: 1px solid #ddd; margin: 0.6em 0}}
fieldset label {{margin-right: 1em; white-space: nowrap}}
#message {{color: #b71c1c; font-weight: bold; min-height: 1.2em}}
#status {{color: #555}}
"""


def page_html(shelf: Shelf, max_bytes: int) -> str:
    """The app's page: the form; the results come from ``POST /api/explore`` as the explorer's HTML."""
    boxes = "".join(f"<label><input type='checkbox' name='tokenizer' value='{escape(n)}'"
                    f"{' checked' if n in shelf.default else ''}> {escape(n)}</label>" for n in shelf.names)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fertility explorer</title>
<link rel="stylesheet" href="explorer.css"><script src="explorer.js" defer></script></head>
<body data-max-bytes="{max_bytes}">
<header><h1>fertility explorer</h1><span class="note">How tokenizers cut your text. It stays on this machine;
at most {max_bytes:,} bytes ({max_bytes / 1e6:g} MB) of text a time.</span></header>
<form id="form">
<fieldset><legend>mode</legend>
<label><input type="radio" name="mode" value="one" checked> one text</label>
<label><input type="radio" name="mode" value="parallel"> parallel: the same sentences in two languages, line by
line (premium of the first against the second)</label></fieldset>
<div class="panes">
<div class="pane" id="pane-a"><label>language <input id="lang-a" value="{DEFAULT_LANG}" size="10"></label>
<textarea id="text-a" placeholder="Paste text here, or drop a text file (UTF-8)"></textarea>
<input type="file" id="file-a" accept=".txt,text/plain"></div>
<div class="pane" id="pane-b" hidden><label>reference language <input id="lang-b" value="en" size="10"></label>
<textarea id="text-b" placeholder="The same sentences in the reference language, one per line"></textarea>
<input type="file" id="file-b" accept=".txt,text/plain"></div>
</div>
<fieldset id="tokenizers"><legend>tokenizers</legend>{boxes}</fieldset>
<button type="submit" id="go">Tokenize</button> <span id="status"></span> <span class="note">(Ctrl+Enter)</span>
<p id="message" role="alert"></p>
</form>
<div id="result"></div>
</body></html>"""


# The page's only script (served as /explorer.js; the Content-Security-Policy allows no other). Messages are
# set as textContent; the results are the server's escaped HTML.
SCRIPT = r"""
"use strict";
(() => {
  const $ = (selector) => document.querySelector(selector);
  const maxBytes = Number(document.body.dataset.maxBytes);
  const utf8 = new TextEncoder();
  let running = null;

  const parallel = () => document.querySelector("input[name=mode]:checked").value === "parallel";
  const say = (text) => { $("#message").textContent = text; };
  const tooLarge = (size) => `The text is ${size.toLocaleString("en")} bytes of UTF-8; the limit is ` +
    `${maxBytes.toLocaleString("en")} bytes (${maxBytes / 1e6} MB): paste or drop a shorter text.`;

  function setMode() {
    $("#pane-b").hidden = !parallel();
    if (parallel() && $("#lang-a").value === "und") $("#lang-a").value = "bn";
  }

  async function readFile(file, textarea) {
    if (file.size > maxBytes) { say(tooLarge(file.size)); return; }
    const bytes = await file.arrayBuffer();
    try {
      textarea.value = new TextDecoder("utf-8", {fatal: true}).decode(bytes);
      say("");
    } catch (e) {
      say(`${file.name} is not UTF-8 text: save it as UTF-8 (a .gz or binary file cannot be read here).`);
    }
  }

  function wire(pane, textarea, input) {
    input.addEventListener("change", () => { if (input.files.length) readFile(input.files[0], textarea); });
    pane.addEventListener("dragover", (e) => { e.preventDefault(); pane.classList.add("dragging"); });
    pane.addEventListener("dragleave", () => pane.classList.remove("dragging"));
    pane.addEventListener("drop", (e) => {
      e.preventDefault();
      pane.classList.remove("dragging");
      if (e.dataTransfer.files.length) readFile(e.dataTransfer.files[0], textarea);
    });
  }

  async function run() {
    const texts = {};
    texts[$("#lang-a").value.trim()] = $("#text-a").value;
    if (parallel()) {
      const ref = $("#lang-b").value.trim();
      if (ref in texts) { say("Give the two texts different language labels."); return; }
      texts[ref] = $("#text-b").value;
    }
    const tokenizers = [...document.querySelectorAll("input[name=tokenizer]:checked")].map((x) => x.value);
    if (!tokenizers.length) { say("Choose at least one tokenizer."); return; }
    const size = Object.values(texts).reduce((n, t) => n + utf8.encode(t).length, 0);
    if (size > maxBytes) { say(tooLarge(size)); return; }
    if (running) running.abort();
    const controller = new AbortController();
    running = controller;
    say("");
    $("#status").textContent = "measuring…";
    try {
      const response = await fetch("api/explore", {
        method: "POST", headers: {"Content-Type": "application/json"}, signal: controller.signal,
        body: JSON.stringify({texts, tokenizers, parallel: parallel()}),
      });
      const body = await response.json().catch(() => null);  // a bug's 500 is plain text
      if (!response.ok || !body) {
        say((body && body.error) || `The server answered ${response.status}: see its terminal.`);
        return;
      }
      $("#result").innerHTML = body.html;  // built by the server, every piece of text escaped
    } catch (e) {
      if (e.name !== "AbortError") say(`The server did not answer (${e.message}); is fertility serve running?`);
    } finally {
      if (running === controller) { running = null; $("#status").textContent = ""; }
    }
  }

  for (const radio of document.querySelectorAll("input[name=mode]")) radio.addEventListener("change", setMode);
  wire($("#pane-a"), $("#text-a"), $("#file-a"));
  wire($("#pane-b"), $("#text-b"), $("#file-b"));
  $("#form").addEventListener("submit", (e) => { e.preventDefault(); run(); });
  document.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(); });
  setMode();
})();
"""
