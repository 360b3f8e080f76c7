"""The command-line contract for bad input to `corpus build`, `corpus plan` and `corpus inspect`: exit 2, one
line on stderr naming what is wrong, no traceback (datatrove's loguru one included), before any work where it
can be checked up front, and nothing of the user's changed, nothing left behind (not even an empty OUT or a
staging folder).

Every case runs ``corpus.cli.main`` in this process with the file descriptors captured, so that what the
ingest's pool workers print is seen too.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from common.outdir import MARKER
from corpus.cli import main


@dataclass
class Case:
    argv: Callable[[Path], list[str]]  # given the case's folder (sources in data/, OUT is out)
    names: tuple[str, ...]  # what the one line must name
    setup: Callable[[Path], None] = field(default=lambda root: None)


def _build(root: Path, *extra: str, mix: str = "bn=0.5,en=0.5", out: str | None = None, tokens: str = "1000",
           sources: tuple[str, ...] = ("bn=data/bn.txt", "en=data/en.txt")) -> list[str]:
    argv = ["build"]
    for source in sources:
        lang, _, path = source.partition("=")
        argv += ["--source", f"{lang}={root / path}" if path and not path.startswith("/") else source]
    return argv + ["--tokenizer", "gpt2", "--mix", mix, "--tokens", tokens, "--val-tokens", "100",
                   "--out", out or str(root / "out"), "--workers", "1", "--no-progress", *extra]


def _plan(root: Path, *extra: str, **kwargs) -> list[str]:
    return ["plan", *_build(root, *extra, **kwargs)[1:]]


def _file(name: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("a file of the user's\n", encoding="utf-8")
    return setup


def _ours(root: Path) -> None:
    """An OUT this project wrote (it carries the marker) holding a result."""
    (root / "out").mkdir()
    (root / "out" / MARKER).write_text('{"written_by": "bangla-tokfair", "command": "corpus build"}\n')
    (root / "out" / "train_000000.bin").write_bytes(b"\0" * 1024)


def _tokenizer(root: Path) -> None:
    """A copy of the shipped gpt2 tokenizer in root/tok."""
    shutil.copytree(Path(__file__).resolve().parents[2] / "data" / "tokenizers" / "gpt2", root / "tok")


def _published(name: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / name).mkdir()
        (root / name / MARKER).write_text('{"written_by": "bangla-tokfair", "command": "corpus build"}\n')
        (root / name / "status.json").write_text('{"written_by": "bangla-tokfair"}\n')
    return setup


def _manifest(text: str) -> Callable[[Path], None]:
    def setup(root: Path) -> None:
        (root / "shards").mkdir()
        (root / "shards" / "manifest.json").write_text(text, encoding="utf-8")
    return setup


# A manifest that loads: one training shard of one document (no shard file is read before the checks).
_SHARD = {"file": "train_000000.bin", "split": "train", "tokens": 9, "documents": 1, "tokens_by_language": {"bn": 9}}
_MANIFEST = {"tokenizer": {"spec": "gpt2", "sha256": "0", "vocab_size": 50257, "bos_id": 50256}, "dtype": "uint16",
             "shards": [_SHARD]}

CASES = {
    # --- build: sources and labels
    "missing-source-file": Case(lambda r: _build(r, sources=("bn=data/nope.txt", "en=data/en.txt")), ("nope.txt",)),
    "source-without-label": Case(lambda r: ["build", "--source", str(r / "data/bn.txt"), *_build(r)[5:]],
                                 ("--source",)),
    "label-with-slash": Case(lambda r: _build(r, sources=("b/n=data/bn.txt", "en=data/en.txt"), mix="b/n=0.5,en=0.5"),
                             ("b/n", "--source")),
    "bad-utf8-in-ingest": Case(lambda r: _build(r, sources=("bn=data/bad.txt", "en=data/en.txt")), ("bad.txt:6",)),
    "source-not-parquet": Case(lambda r: _build(r, sources=("bn=data/garbage.parquet", "en=data/en.txt")),
                               ("garbage.parquet", "not a readable parquet file"), _file("data/garbage.parquet")),
    "bad-utf8-in-pool-worker": Case(lambda r: _build(r, "--workers", "2", "--tasks", "2",
                                                     sources=("bn=data/bad.txt", "en=data/en.txt")), ("bad.txt:6",)),
    # --- build: the mixture and the numbers
    "mix-not-lang-share": Case(lambda r: _build(r, mix="bn0.5"), ("--mix",)),
    "mix-unknown-language": Case(lambda r: _build(r, mix="bn=0.5,hi=0.5"), ("--mix", "hi")),
    "mix-missing-language": Case(lambda r: _build(r, mix="bn=1"), ("--mix", "en")),
    "mix-shares-sum-not-1": Case(lambda r: _build(r, mix="bn=0.6,en=0.3"), ("--mix", "sum to 0.9")),
    "tokens-negative": Case(lambda r: _build(r, tokens="-5"), ("--tokens", "-5")),
    "tokens-zero": Case(lambda r: _build(r, tokens="0"), ("--tokens",)),
    "tokens-not-a-number": Case(lambda r: _build(r, tokens="lots"), ("--tokens", "lots")),
    "max-epochs-zero": Case(lambda r: _build(r, "--max-epochs", "0"), ("--max-epochs",)),
    "temperature-negative": Case(lambda r: [a if a != "--mix" else "--temperature" for a in _build(r, mix="-1")],
                                 ("--temperature",)),
    "val-max-share-over-1": Case(lambda r: _build(r, "--val-max-share", "1.5"), ("--val-max-share",)),
    "workers-zero": Case(lambda r: _build(r, "--workers", "0"), ("--workers",)),
    "slurm-without-partition": Case(lambda r: _build(r, "--executor", "slurm"), ("--slurm-partition",)),
    # --- build: tokenizers
    "unknown-tokenizer": Case(lambda r: [a if a != "gpt2" else "no-such-tokenizer" for a in _build(r)],
                              ("no-such-tokenizer",)),
    "unknown-compare-tokenizer": Case(lambda r: _build(r, "--compare-tokenizer", "no-such-tokenizer"),
                                      ("no-such-tokenizer",)),
    # --- build: --out
    "out-existing-file": Case(lambda r: _build(r, out=str(r / "out.txt")), ("out.txt", "not a folder"),
                              _file("out.txt")),
    "out-is-the-sources-folder": Case(lambda r: _build(r, out=str(r / "data")), ("--out", "data")),
    "out-holds-the-sources": Case(lambda r: _build(r, out=str(r)), ("--out", "holds the input")),
    "out-is-the-cwd": Case(lambda r: _build(r, out=str(r.parent / "elsewhere")), ("--out", "current folder")),
    "out-not-ours-not-empty": Case(lambda r: _build(r), ("--out", "did not write"), _file("out/theirs.txt")),
    "out-ours-without-overwrite": Case(lambda r: _build(r), ("--out", "--overwrite"), _ours),
    "out-read-only": Case(lambda r: _build(r, out="/proc/corpus-out"), ("/proc", "not writable")),
    "work-dir-is-a-file": Case(lambda r: _build(r, "--work-dir", str(r / "work.txt")), ("--work-dir", "work.txt"),
                               _file("work.txt")),
    # --- build: --status-file is an output file (issue 28, defect 2)
    "status-file-is-a-source": Case(lambda r: _build(r, "--status-file", str(r / "data/bn.txt")),
                                    ("--status-file", "bn.txt", "input")),
    "status-file-is-the-tokenizer": Case(lambda r: [*_build(r, "--status-file", str(r / "tok/vocab.json")),
                                                    "--tokenizer", str(r / "tok")],
                                         ("--status-file", "vocab.json", "input"), _tokenizer),
    "status-file-a-user-file": Case(lambda r: _build(r, "--status-file", str(r / "notes.json")),
                                    ("--status-file", "notes.json", "--overwrite"), _file("notes.json")),
    "status-file-a-user-file-with-overwrite": Case(
        lambda r: _build(r, "--status-file", str(r / "notes.json"), "--overwrite"),
        ("--status-file", "notes.json", "not written by this project"), _file("notes.json")),
    "status-file-inside-published-shards": Case(
        lambda r: _build(r, "--status-file", str(r / "shards/status.json"), "--overwrite"),
        ("--status-file", "shards", MARKER), _published("shards")),
    "plan-status-file-is-a-source": Case(lambda r: _plan(r, "--status-file", str(r / "data/en.txt")),
                                         ("--status-file", "en.txt")),
    # --- build: --work-dir is a work folder, apart from the inputs and the current folder
    "work-dir-is-the-sources-folder": Case(lambda r: _build(r, "--work-dir", str(r / "data")), ("--work-dir", "data")),
    "work-dir-is-the-cwd": Case(lambda r: _build(r, "--work-dir", str(r.parent / "elsewhere")),
                                ("--work-dir", "current folder")),
    "work-dir-inside-out": Case(lambda r: _build(r, "--work-dir", str(r / "out" / "work")), ("--work-dir", "--out")),
    "append-to-no-shard-set": Case(lambda r: _build(r, "--append"), ("--append", "not a shard set"), _ours),
    # --- plan
    "plan-mix-unknown-language": Case(lambda r: _plan(r, mix="bn=0.5,hi=0.5"), ("hi",)),
    "plan-tokens-zero": Case(lambda r: _plan(r, tokens="0"), ("--tokens",)),
    "plan-out-existing-file": Case(lambda r: _plan(r, out=str(r / "out.txt")), ("out.txt",), _file("out.txt")),
    # --- inspect
    "inspect-missing-folder": Case(lambda r: ["inspect", str(r / "nope")], ("nope", "does not exist")),
    "inspect-a-file": Case(lambda r: ["inspect", str(r / "shards.bin")], ("shards.bin", "not a folder"),
                           _file("shards.bin")),
    "inspect-folder-without-manifest": Case(lambda r: ["inspect", str(r / "shards")], ("manifest.json",),
                                            _file("shards/notes.txt")),
    "inspect-corrupt-manifest": Case(lambda r: ["inspect", str(r / "shards")], ("manifest.json", "line 1"),
                                     _manifest('{"tokenizer": ')),
    "inspect-manifest-not-an-object": Case(lambda r: ["inspect", str(r / "shards")],
                                           ("manifest.json", "is a list", "JSON object"), _manifest("[1, 2]\n")),
    "inspect-manifest-empty-list": Case(lambda r: ["inspect", str(r / "shards")],
                                        ("manifest.json", "is a list", "JSON object"), _manifest("[]\n")),
    "inspect-manifest-shard-of-wrong-type": Case(lambda r: ["inspect", str(r / "shards")],
                                                 ("manifest.json", "shards[0].tokens", "expected int"),
                                                 _manifest(json.dumps(_MANIFEST | {"shards": [_SHARD | {"tokens": "9"}]}))),
    "inspect-manifest-count-of-wrong-type": Case(lambda r: ["inspect", str(r / "shards")],
                                                 ("manifest.json", "shards[0].tokens_by_language.bn", "expected int"),
                                                 _manifest(json.dumps(_MANIFEST | {"shards": [
                                                     _SHARD | {"tokens_by_language": {"bn": "9"}}]}))),
    "inspect-manifest-without-a-field": Case(lambda r: ["inspect", str(r / "shards")],
                                             ("manifest.json", "tokenizer.bos_id", "required"),
                                             _manifest(json.dumps(_MANIFEST | {"tokenizer": {
                                                 "spec": "gpt2", "sha256": "0", "vocab_size": 9}}))),
    "inspect-check-text-huge": Case(lambda r: ["inspect", str(r / "shards"), "--check-text", "1e30"],
                                    ("--check-text", "1e+30", "1 training documents"),
                                    _manifest(json.dumps(_MANIFEST))),
    "inspect-check-text-negative": Case(lambda r: ["inspect", str(r / "shards"), "--check-text", "-1"],
                                        ("--check-text",), _manifest("{}\n")),
}


@pytest.fixture(scope="module")
def texts(sample_dir) -> dict[str, list[bytes]]:
    def head(path: Path, n: int) -> list[bytes]:
        with gzip.open(path, "rb") as f:
            return [next(f) for _ in range(n)]

    return {"bn": head(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz", 30),
            "en": head(sample_dir / "en" / "wiki-en-chinapedia.txt.gz", 30)}


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_touches_nothing(name, texts, tmp_path, monkeypatch, capfd, input_error,
                                                   user_files):
    case = CASES[name]
    root = tmp_path / "case"
    data = root / "data"
    data.mkdir(parents=True)
    (data / "bn.txt").write_bytes(b"".join(texts["bn"]))
    (data / "en.txt").write_bytes(b"".join(texts["en"]))
    (data / "bad.txt").write_bytes(b"".join(texts["bn"][:5] + [b"caf\xe9 \xff broken line\n"] + texts["bn"][5:]))
    case.setup(root)
    folders = [data, root] + [p for p in (root / "out", root / "shards") if p.is_dir()]
    files = user_files(*folders)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    before = _tree(tmp_path)
    capfd.readouterr()
    try:
        code = main(case.argv(root))
    except SystemExit as e:  # argparse's one line and exit 2
        code = e.code
    err = capfd.readouterr().err
    input_error(code, err, *case.names)
    assert files.unchanged()
    assert _tree(tmp_path) == before  # nothing made, moved or removed: no OUT, no staging folder, no work folder


def test_a_finished_ingest_is_kept_when_the_plan_fails_after_it(texts, tmp_path, capfd, input_error):
    """The one input error only the ingest can find: a language with a share in --mix but nothing left after
    cleaning. The staging folder stays, marked as ours, since its ingest is finished work: the rerun with
    another --mix resumes from it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "bn.txt").write_bytes(b"".join(texts["bn"]))
    (data / "en.txt").write_bytes(b"tiny\n")  # dropped by the cleaning (too short)
    argv = _build(tmp_path, "--val-tokens", "0")
    assert main(argv) == 2
    input_error(2, capfd.readouterr().err, "en", "no tokens left")
    staged = tmp_path / ".out.building"
    assert json.loads((staged / MARKER).read_text())["written_by"] == "bangla-tokfair"
    assert (staged / ".work").is_dir() and not (tmp_path / "out").exists()
    assert main(_build(tmp_path, "--val-tokens", "0", mix="bn=1,en=0")) == 0
    assert (tmp_path / "out" / "manifest.json").is_file() and not staged.exists()


def test_no_traceback_from_the_real_entry_point(tmp_path):
    """The same through ``python -m corpus``: what a user runs."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "corpus", "inspect", str(tmp_path / "nope")], cwd=root,
                          capture_output=True, text=True, timeout=300, env=os.environ)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("where", ["a folder of the user's", "the inputs' folder", "the current folder",
                                   "the tokenizer's folder", "a new folder", "an empty folder"])
def test_a_work_dir_loses_nothing_of_the_user(where, texts, tmp_path, monkeypatch, capfd, input_error):
    """A --work-dir must be new, empty or ours: a folder holding anything of the user's is refused before any work
    (it was removed whole after every successful build); the project removes only the files it recorded there,
    and the folder itself only when it made it."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "bn.txt").write_bytes(b"".join(texts["bn"]))
    (data / "en.txt").write_bytes(b"".join(texts["en"]))
    tok = tmp_path / "tok"
    tok.mkdir()
    for name in ("vocab.json", "merges.txt"):
        (tok / name).write_bytes((Path(__file__).resolve().parents[2] / "data" / "tokenizers" / "gpt2" / name).read_bytes())
    (tmp_path / "mine" / "chapters").mkdir(parents=True)
    (tmp_path / "mine" / "thesis.tex").write_text("my thesis\n")
    (tmp_path / "mine" / "chapters" / "1.tex").write_text("chapter one\n")
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "notes.txt").write_text("the user's notes\n")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    work = {"a folder of the user's": str(tmp_path / "mine"), "the inputs' folder": str(data), "the current folder": ".",
            "the tokenizer's folder": str(tok), "a new folder": str(tmp_path / "new" / "work"),
            "an empty folder": str(tmp_path / "empty")}[where]
    argv = _build(tmp_path, "--work-dir", work)
    argv[argv.index("gpt2")] = str(tok / "vocab.json")
    before = _tree(tmp_path)
    capfd.readouterr()
    code = main(argv)
    err = capfd.readouterr().err
    after = _tree(tmp_path)
    if where in ("a new folder", "an empty folder"):
        assert code == 0, err
        assert (tmp_path / "out" / "manifest.json").is_file()
        made = {k: v for k, v in after.items() if k not in before and not k.startswith("out")}
        # The work is gone, no more; so is the folder made to hold it (and its lock), which nothing else is in.
        assert made == {}, made
        assert {k: v for k, v in after.items() if k in before} == before
    else:
        input_error(code, err, "--work-dir", work)
        assert after == before  # byte for byte; no OUT, no staging folder either


def _sources(texts, tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "bn.txt").write_bytes(b"".join(texts["bn"]))
    (tmp_path / "data" / "en.txt").write_bytes(b"".join(texts["en"]))


def test_out_a_symlink_to_an_empty_folder_is_filled_at_its_target(texts, tmp_path, capfd):
    """The user's link stays a link (it was renamed to .LINK.old-PID, then a traceback)."""
    _sources(texts, tmp_path)
    target = tmp_path / "volume" / "shards"
    target.mkdir(parents=True)
    (tmp_path / "out").symlink_to(target)
    assert main(_build(tmp_path)) == 0, capfd.readouterr().err
    assert (tmp_path / "out").is_symlink() and os.readlink(tmp_path / "out") == str(target)
    assert (target / "manifest.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out", "volume"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["shards"]  # the staging folder went with the rename


@pytest.mark.parametrize("kind", ["tmpfs", "read-only tmpfs", "bind mount"])
def test_out_a_mount_point_is_refused_before_any_work(kind, texts, tmp_path, capfd, mount_point, input_error):
    _sources(texts, tmp_path)
    out = mount_point("out", read_only=kind == "read-only tmpfs", bind=kind == "bind mount")
    before = _tree(tmp_path)
    capfd.readouterr()
    code = main(_build(tmp_path))
    input_error(code, capfd.readouterr().err, str(out), "mount point")
    assert _tree(tmp_path) == before  # no staging folder: refused before the ingest


def test_a_rename_refused_with_ebusy_is_one_line_and_keeps_the_build(texts, tmp_path, capfd, busy_rename,
                                                                    input_error):
    _sources(texts, tmp_path)
    busy_rename(tmp_path / "out")
    capfd.readouterr()
    code = main(_build(tmp_path))
    input_error(code, capfd.readouterr().err, str(tmp_path / "out"), "busy", ".out.building")
    assert not (tmp_path / "out").exists() and (tmp_path / ".out.building" / "manifest.json").is_file()
    kept = {p.name: p.stat().st_ino for p in (tmp_path / ".out.building").iterdir() if p.is_file() and p.name != MARKER}
    assert main(_build(tmp_path)) == 0  # the rerun publishes the finished build: the very files it kept
    assert (tmp_path / "out" / "manifest.json").is_file() and not (tmp_path / ".out.building").exists()
    assert {name: (tmp_path / "out" / name).stat().st_ino for name in kept} == kept
    # A finished build of other arguments that could not be published is never wiped by another build.
    other = str(tmp_path / "other")
    busy_rename(tmp_path / "other")
    assert main(_build(tmp_path, out=other)) == 2
    capfd.readouterr()
    assert (tmp_path / ".other.building" / "manifest.json").is_file()
    code = main(_build(tmp_path, out=other, tokens="4000"))
    input_error(code, capfd.readouterr().err, ".other.building", "finished build of other arguments")
    assert (tmp_path / ".other.building" / "manifest.json").is_file()


def test_a_work_dir_an_earlier_plan_made_is_ours_and_loses_only_what_was_recorded(texts, tmp_path, capfd):
    _sources(texts, tmp_path)
    work = tmp_path / "work"
    assert main(_plan(tmp_path, "--work-dir", str(work))) == 0, capfd.readouterr().err
    assert (work / "ingest.json").is_file()
    (work / "mine.txt").write_text("the user's, put there after the plan\n")
    assert main(_build(tmp_path, "--work-dir", str(work))) == 0, capfd.readouterr().err  # resumes the ingest
    assert (tmp_path / "out" / "manifest.json").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["mine.txt"]  # and the folder, which holds it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out", "work"]


def test_a_work_dir_url_of_the_users_is_refused_and_kept(texts, tmp_path, capfd, input_error):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    fs.pipe("/users-bucket/thesis.tex", b"my thesis")
    try:
        _sources(texts, tmp_path)
        before = _tree(tmp_path)
        capfd.readouterr()
        code = main(_build(tmp_path, "--work-dir", "memory://users-bucket"))
        input_error(code, capfd.readouterr().err, "--work-dir", "memory://users-bucket", "did not make")
        assert fs.cat("/users-bucket/thesis.tex") == b"my thesis" and _tree(tmp_path) == before
    finally:
        fs.rm("/users-bucket", recursive=True)
