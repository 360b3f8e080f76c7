"""The resumable work folder of a run: the prepared text and every finished training round, kept beside OUT.

A killed run (SIGKILL, power loss, Ctrl-C) leaves ``.OUT.checkpoint`` behind; the same command run again
finds it and skips the steps it holds: reading and normalising the text, and each round whose shares and
sample match the one it would train now (training is deterministic, so the resumed result is the result of
an uninterrupted run). Each step is built in a staging folder and renamed into place when complete, so a
kill in the middle of a step leaves only a stale staging folder, which is ignored. The folder is keyed by
every setting and input that changes the result (``key``): a checkpoint of different settings is discarded.
Only a folder that carries this project's ownership record for a checkpoint (``common.owned``, written when the
folder is made, before anything else) is one; anything else in its place (a folder of the user's, even one
holding a ``key.json``) is never removed: the run is refused.
A run that finishes, or fails with an error (bad input, a target not met), removes it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from common.errors import OutputPathError
from common.fileio import read_json, write_json
from common.outdir import publish_dir, staging_dir
from common.owned import make, owned, remove
from tokenizers_train.sampling import LanguageText, PreparedText, SourceInfo
from tokenizers_train.targeting import Round

KEY_FILE = "key.json"
ROLE = "tokenizers-train checkpoint"  # the common.owned role of the folder
PREPARED = "prepared"
DONE = "step.json"  # written last inside a step's folder: the step is complete


def _stored_key(path: Path) -> str | None:
    try:
        return read_json(path).get("key")
    except (OSError, ValueError, AttributeError):  # absent, torn or foreign: a checkpoint of unknown settings
        return None


class Checkpoint:
    """The checkpoint folder of one OUT."""

    def __init__(self, out: Path, key: dict) -> None:
        self.root = out.with_name(f".{out.name}.checkpoint")
        self.key = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
        self.resumed = False
        if self.root.exists() or self.root.is_symlink():
            found = None if self.root.is_symlink() else owned(self.root, ROLE)
            if found is None:  # not one this command made: never removed
                raise OutputPathError(f"{self.root}: is in the place of the checkpoint folder of --out {out} and is "
                                      "not one; move it away or choose another --out (nothing was written)")
            self.owner = found
            if _stored_key(self.root / KEY_FILE) == self.key:  # a kill before the key was written: no key, discarded
                self.resumed = True
                return
            remove(found)
        self.owner = make(self.root, ROLE)
        write_json(self.root / KEY_FILE, {"key": self.key, "settings": key})

    def remove(self) -> None:
        """Remove the folder, when it still is the one this run made or resumed (it carries its token)."""
        remove(self.owner)

    def step(self, name: str) -> Path | None:
        """The folder of a completed step, or None."""
        path = self.root / name
        return path if (path / DONE).is_file() else None

    def complete(self, name: str, staged: Path, record: dict) -> Path:
        """Mark ``staged`` complete with ``record`` and move it into place as step ``name``."""
        write_json(staged / DONE, record)
        return publish_dir(staged, self.root / name)

    def staging(self, name: str):
        """A staging folder for step ``name`` (removed if the block raises)."""
        return staging_dir(self.root / name)

    def load_prepared(self) -> PreparedText | None:
        path = self.step(PREPARED)
        if path is None:
            return None
        record = read_json(path / DONE)
        languages = {
            lang: LanguageText(lang, path / f"{lang}.txt", lt["train_chars"], lt["validation"], set(lt["alphabet"]),
                               lt["mark_chars"])
            for lang, lt in record["languages"].items()
        }
        return PreparedText(languages, [SourceInfo(**s) for s in record["sources"]], record["sha256"])

    def save_prepared(self, prepared: PreparedText, staged: Path) -> PreparedText:
        """Record ``prepared`` (whose files are in ``staged``) as a completed step; returns it re-pointed there."""
        record = {
            "languages": {lang: {"train_chars": lt.train_chars, "validation": lt.validation,
                                 "alphabet": sorted(lt.alphabet), "mark_chars": lt.mark_chars}
                          for lang, lt in prepared.languages.items()},
            "sources": [asdict(s) for s in prepared.sources],
            "sha256": prepared.sha256,
        }
        self.complete(PREPARED, staged, record)
        loaded = self.load_prepared()
        assert loaded is not None
        return loaded

    def load_round(self, index: int, shares: dict[str, float], sample_chars: int, probe: bool) -> Round | None:
        """Round ``index`` if it completed with these shares, sample size and kind."""
        path = self.step(f"round{index}")
        if path is None:
            return None
        r = Round(**read_json(path / DONE))
        return r if (r.shares, r.sample_chars, r.probe) == (shares, sample_chars, probe) else None
