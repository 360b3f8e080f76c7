"""``NAME=SPEC``: a tokenizer named in every output, parsed only where it cannot be a path; a loaded tokenizer's
``spec`` loads it again under the same name. And special-token strings in a tokenizer.json's input are text."""

from __future__ import annotations

import pytest

from fertility.tokenizers import TokenizerLoadError, load_tokenizer
from fertility.tokenizers.loading import split_label
from tests.fertility.tokenizers.conftest import small_tokenizer_json


@pytest.fixture
def tokenizer_json(tmp_path):
    path = tmp_path / "trained" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(small_tokenizer_json())
    return path


def test_split_label(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k=v.json").write_text("{}")
    assert split_label("mine=gpt2") == ("mine", "gpt2")
    assert split_label("mine=org/name@main") == ("mine", "org/name@main")
    assert split_label("mine=/a/b=c/tokenizer.json") == ("mine", "/a/b=c/tokenizer.json")
    for unlabelled in ("k=v.json", "dir/x=y", "=gpt2", "mine=", "gpt2", "../x=y", "~=y", ".=y"):
        assert split_label(unlabelled) == (None, unlabelled)


def test_a_label_names_a_path_and_a_known_name(tokenizer_json, shipped_tokenizers):
    tok = load_tokenizer(f"ours={tokenizer_json}")
    assert (tok.name, tok.spec) == ("ours", f"ours={tokenizer_json}")
    plain = load_tokenizer(str(tokenizer_json))
    assert plain.name == "trained" and plain is not tok  # the cached tokenizer keeps its own name
    assert load_tokenizer(str(tokenizer_json)).name == "trained"
    gpt2 = load_tokenizer("openai=gpt2", shipped_tokenizers)
    assert (gpt2.name, gpt2.fingerprint) == ("openai", load_tokenizer("gpt2", shipped_tokenizers).fingerprint)


def test_a_labelled_spec_that_loads_nothing_says_what_was_missing(tmp_path):
    with pytest.raises(TokenizerLoadError, match="nope.json: no such tokenizer file"):
        load_tokenizer(f"lab={tmp_path / 'nope.json'}")


def test_every_spec_round_trips_from_another_folder(tokenizer_json, shipped_tokenizers, tmp_path, monkeypatch):
    """What corpus records in its manifest (``Tokenizer.spec``) loads the same file under the same name, without
    the --tokenizer-dir and from another working folder."""
    monkeypatch.chdir(tokenizer_json.parent)
    loaded = [load_tokenizer("tokenizer.json"), load_tokenizer("lab=tokenizer.json"), load_tokenizer("."),
              load_tokenizer("gpt2", shipped_tokenizers)]
    assert [t.name for t in loaded] == ["trained", "lab", "trained", "gpt2"]
    monkeypatch.chdir("/")
    for tok in loaded:
        again = load_tokenizer(tok.spec)
        assert (again.name, again.fingerprint, again.spec) == (tok.name, tok.fingerprint, tok.spec)


def test_special_token_strings_in_a_tokenizer_json_are_text(tokenizer_json):
    """A literal ``<|bos|>`` or ``<|endoftext|>`` in a document is encoded as its characters, never as the control
    token: shards, evaluation and analysis count it as text."""
    tok = load_tokenizer(str(tokenizer_json))
    specials = {tok.token_to_id(s) for s in ("<|bos|>", "<|endoftext|>")}
    assert None not in specials and tok.bos_id in specials
    texts = ["a <|bos|> b", "<|endoftext|>বাংলা"]
    for ids, text in zip(tok.encode_ids(texts), texts, strict=True):
        assert not specials & set(ids) and tok.decode(ids) == text
    spans = tok.encode_spans(texts)
    assert not specials & set(spans.ids.tolist())
    assert spans.counts.tolist() == [len(ids) for ids in tok.encode_ids(texts)]
