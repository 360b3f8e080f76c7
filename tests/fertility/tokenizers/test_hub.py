"""Tokenizers named by Hugging Face Hub id, resolved offline through the cache (``hub_cache``: conftest.py)."""

from __future__ import annotations

import json

import pytest

from corpus.shards.format import TokenizerInfo
from fertility.cli import main
from fertility.tokenizers import TokenizerLoadError, load_tokenizer
from tests.fertility.tokenizers.conftest import small_tokenizer_json

COMMIT = "1234567890abcdef1234567890abcdef12345678"


@pytest.fixture
def cached(hub_cache):
    """``org/name`` in the cache (a tokenizer.json at COMMIT, the ref ``main``)."""
    hub_cache.add("org/name", {"tokenizer.json": small_tokenizer_json(), "config.json": "{}"}, COMMIT)
    return hub_cache


def report(args, tmp_path, sample_dir, capsys):
    out = tmp_path / "rep"
    try:
        code = main(["report", "--no-progress", *args, "--text", f"bn={sample_dir / 'bn' / 'literature-bnarchive.txt.gz'}",
                     "--max-chars", "3000", "--out", str(out)])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    names = [t["name"] for t in json.loads((out / "report.json").read_text())["tokenizers"]] if code == 0 else None
    return code, names, captured.err


def test_a_hub_id_loads_from_the_cache_offline_named_by_its_id(cached):
    tok = load_tokenizer("org/name")
    assert (tok.name, tok.kind, tok.spec) == ("org/name", "hf", "org/name")
    assert tok.path.endswith(f"snapshots/{COMMIT}/tokenizer.json")  # the snapshot's name, not the blob's hash
    assert tok.decode(tok.encode_ids(["আমি বাংলায় গান গাই।"])[0]) == "আমি বাংলায় গান গাই।"
    pinned = load_tokenizer(f"org/name@{COMMIT}")
    assert (pinned.name, pinned.fingerprint) == (f"org/name@{COMMIT}", tok.fingerprint)


def test_report_by_hub_id_and_by_labels(cached, tmp_path, sample_dir, capsys):
    local = tmp_path / "mine" / "tokenizer.json"
    local.parent.mkdir()
    local.write_text(small_tokenizer_json(280))
    code, names, err = report(["--tokenizer", "org/name", "--tokenizer", "lab=org/name", "--tokenizer", f"ours={local}"],
                              tmp_path, sample_dir, capsys)
    assert code == 0, err
    assert names == ["org/name", "lab", "ours"]


def test_a_sentencepiece_only_repository(hub_cache):
    """No tokenizer.json: the snapshot's other tokenizer files are looked for (here a WordPiece vocab.txt)."""
    hub_cache.add("org/wp", {"vocab.txt": "[PAD]\n[UNK]\nআমি\nগান\n##ই\n"})
    tok = load_tokenizer("org/wp")
    assert (tok.name, tok.kind) == ("org/wp", "wordpiece")


def test_an_uncached_id_offline_is_one_line_exit_2(hub_cache, tmp_path, sample_dir, capsys):
    with pytest.raises(TokenizerLoadError, match="HF_HUB_OFFLINE=1.*hf download org/missing tokenizer.json"):
        load_tokenizer("org/missing")
    code, _, err = report(["--tokenizer", "org/missing"], tmp_path, sample_dir, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "org/missing" in err and "Traceback" not in err
    assert not (tmp_path / "rep").exists()


def test_a_cached_repository_without_a_tokenizer_file_offline_is_not_cached(hub_cache):
    hub_cache.add("org/model-only", {"config.json": "{}"})
    with pytest.raises(TokenizerLoadError, match="org/model-only.*HF_HUB_OFFLINE=1"):
        load_tokenizer("org/model-only")


@pytest.mark.parametrize(("error", "expected"), [("GatedRepoError", "is gated"),
                                                 ("RepositoryNotFoundError", "no Hugging Face Hub repository")])
def test_a_gated_or_missing_repository_is_one_line(hub_cache, monkeypatch, error, expected):
    import huggingface_hub
    from huggingface_hub import errors

    def refuse(*args, **kwargs):
        cls = getattr(errors, error)
        e = cls.__new__(cls)  # the Hub's answer, without an HTTP response to build it from
        Exception.__init__(e, "401")
        raise e

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    with pytest.raises(TokenizerLoadError, match=expected) as caught:
        load_tokenizer("org/gated")
    assert "\n" not in str(caught.value)


def test_an_existing_local_path_wins_over_a_hub_id(cached, tmp_path, monkeypatch):
    local = tmp_path / "org" / "name"
    local.mkdir(parents=True)
    (local / "tokenizer.json").write_text(small_tokenizer_json(280))
    monkeypatch.chdir(tmp_path)
    tok = load_tokenizer("org/name")
    assert tok.path == str(local / "tokenizer.json") and tok.name == "name"
    assert tok.fingerprint != load_tokenizer(f"org/name@{COMMIT}").fingerprint


@pytest.mark.parametrize("spec", ["data/tok.json", "org/name.model", "a/b/c", "./org/name", "org--x/name"])
def test_paths_that_do_not_exist_are_not_hub_ids(hub_cache, spec):
    with pytest.raises(TokenizerLoadError, match="no such tokenizer file or directory"):
        load_tokenizer(spec)


def test_the_spec_of_a_hub_tokenizer_round_trips_through_the_manifest_record(cached):
    for spec in ("org/name", "lab=org/name"):
        tok = load_tokenizer(spec)
        info = TokenizerInfo(spec=tok.spec, sha256=tok.fingerprint, vocab_size=tok.vocab_size, bos_id=0)
        again = info.load()
        assert (again.name, again.fingerprint) == (tok.name, tok.fingerprint)
