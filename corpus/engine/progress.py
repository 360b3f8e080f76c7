"""Progress per stage: tasks write their counts to small files, the build watches them.

Each task writes ``progress/STAGE/RANK.json`` (documents and bytes done) in the work folder, at most once a
second, through fsspec, so the same works for tasks on other machines of a Ray cluster. The build process
sums them, counts the tasks datatrove marked complete, and shows documents and bytes done, their rate, and an
ETA on the terminal and in a JSON status file that a user can watch (``--status-file``). The ETA comes from the
tasks' own estimates of their share done where every task has one (the readers know the size of their
input), else from the share of finished tasks.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from common.fileio import write_json
from common.paths import stamped


class TaskProgress:
    """A task's running counts, written to the work folder at most once per ``every`` seconds."""

    def __init__(self, work_url: str, stage: str, rank: int, every: float = 1.0):
        self.work_url, self.path, self.every = work_url, f"progress/{stage}/{rank:05d}.json", every
        self.documents = self.bytes = 0
        self.done: float | None = None  # the task's own estimate of its share done, where it has one
        self._last = 0.0

    def add(self, documents: int, n_bytes: int, done: float | None = None) -> None:
        self.documents += documents
        self.bytes += n_bytes
        self.done = done
        if time.monotonic() - self._last >= self.every:
            self.flush()

    def flush(self) -> None:
        from datatrove.io import get_datafolder

        with get_datafolder(self.work_url).open(self.path, "w") as f:
            json.dump({"documents": self.documents, "bytes": self.bytes, "done": self.done}, f)
        self._last = time.monotonic()


@dataclass
class StageStatus:
    stage: str
    tasks: int
    tasks_done: int = 0
    documents: int = 0
    bytes: int = 0
    total_documents: int | None = None
    elapsed_s: float = 0.0
    documents_per_s: float = 0.0
    bytes_per_s: float = 0.0
    eta_s: float | None = None
    done: bool = False


@dataclass
class BuildStatus:
    stages: list[StageStatus] = field(default_factory=list)


def _fmt(n: float) -> str:
    for unit in ("", "k", "M", "G", "T"):
        if abs(n) < 1000:
            return f"{n:.0f}{unit}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1000
    return f"{n:.1f}P"


def format_status(s: StageStatus) -> str:
    eta = "done" if s.done else ("ETA ?" if s.eta_s is None else f"ETA {s.eta_s:.0f}s")
    total = f"/{_fmt(s.total_documents)}" if s.total_documents else ""
    return (f"{s.stage}: tasks {s.tasks_done}/{s.tasks}, {_fmt(s.documents)}{total} docs, {_fmt(s.bytes)}B, "
            f"{_fmt(s.documents_per_s)} docs/s, {_fmt(s.bytes_per_s)}B/s, {eta}, {s.elapsed_s:.0f}s")


class StageWatcher:
    """While a stage runs: poll its task files, print one status line and rewrite the status file."""

    def __init__(self, status: BuildStatus, status_path: str | None, work_url: str, stage: str, logging_dir: str,
                 tasks: int, *, total_documents: int | None = None, show: bool = True, every: float = 0.5):
        self.status, self.status_path, self.work_url, self.logging_dir = status, status_path, work_url, logging_dir
        self.stage = StageStatus(stage, tasks, total_documents=total_documents)
        status.stages.append(self.stage)
        self.show, self.every = show, every
        self._seen: dict[str, dict] = {}  # last counts read from each task's file
        self._stop = threading.Event()
        self._start = time.monotonic()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> StageWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.stage.done = exc[0] is None
        self.poll()
        if self.show:
            # Done: keep the stage's last line. Stopped (bad input, a signal): clear it, so that the command's
            # one line stands alone.
            print("" if self.stage.done else "\r\033[K", end="\n" if self.stage.done else "", file=sys.stderr,
                  flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.poll()
            except OSError:
                # A full disk or a failing one: the stage itself meets it and ends the command in one line;
                # the status is written again at the next poll that can.
                continue

    def poll(self) -> None:
        from datatrove.io import get_datafolder

        work, s = get_datafolder(self.work_url), self.stage
        docs = n_bytes = 0
        shares: list[float | None] = []
        for path in work.list_files(f"progress/{s.stage}") if work.isdir(f"progress/{s.stage}") else []:
            try:
                with work.open(path, "r") as f:
                    counts = json.load(f)
                self._seen[path] = counts
            except (OSError, json.JSONDecodeError):  # being rewritten right now: its previous counts
                counts = self._seen.get(path)
                if counts is None:
                    continue
            docs += counts["documents"]
            n_bytes += counts["bytes"]
            shares.append(counts.get("done"))
        logs = get_datafolder(self.logging_dir)
        s.tasks_done = len(logs.list_files("completions")) if logs.isdir("completions") else 0
        # Where every started task reports its share done: the mean over all tasks (unstarted ones count 0).
        estimate = sum(shares) / s.tasks if shares and all(x is not None for x in shares) else None
        s.documents, s.bytes = docs, n_bytes
        s.elapsed_s = time.monotonic() - self._start
        s.documents_per_s = docs / s.elapsed_s if s.elapsed_s else 0.0
        s.bytes_per_s = n_bytes / s.elapsed_s if s.elapsed_s else 0.0
        done_share = (docs / s.total_documents if s.total_documents else estimate if estimate is not None
                      else s.tasks_done / s.tasks if s.tasks else 0)
        s.eta_s = 0.0 if s.done else (s.elapsed_s * (1 - done_share) / done_share if done_share > 0 else None)
        if self.status_path is not None:
            Path(self.status_path).parent.mkdir(parents=True, exist_ok=True)
            write_json(self.status_path, stamped(asdict(self.status)))
        if self.show:
            print("\r" + format_status(s), end="", file=sys.stderr, flush=True)
