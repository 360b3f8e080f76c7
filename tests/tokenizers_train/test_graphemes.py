import json

import pytest
from tokenizers import Tokenizer, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from corpus.read.normalize import normalize
from fertility.tokenizers.hf import bytes_to_unicode
from tokenizers_train import backends, graphemes
from tokenizers_train.run import resolve_train


@pytest.fixture(scope="session")
def pair(sample_lines, tmp_path_factory):
    """The same text and vocabulary, byte-level merges vs whole-grapheme merges (both with phrase merges)."""
    root = tmp_path_factory.mktemp("graphemes")
    out = {}
    for whole in (False, True):
        config = backends.TrainConfig(vocab_size=1024, phrase_fraction=0.2, whole_graphemes=whole, show_progress=False)
        out[whole] = Tokenizer.from_file(str(backends.train(config, sample_lines, root / str(whole))))
    return out


def _mark_starts(tok, lines):
    starts = total = 0
    for text, enc in zip(lines, tok.encode_batch(lines), strict=True):
        total += len(enc.offsets)
        starts += sum(graphemes.starts_with_mark(text[a:b]) for a, b in enc.offsets)
    return starts / total


def test_units_keep_marks_and_joiners_with_their_letter():
    assert graphemes.UNIT.findall("ক্ষমা বাংলায়") == ["ক্", "ষ", "মা", " ", "বাং", "লা", "য়"]
    assert graphemes.UNIT.findall("র\u200d্যাব কি\u200cছু") == ["র\u200d্", "যা", "ব", " ", "কি\u200c", "ছু"]
    assert graphemes.UNIT.findall("\u09bfx") == ["\u09bf", "x"]  # a mark with nothing before it: its own unit


def test_byte_level_strings_match_hf_byte_level():
    text = "বাংলা, the 😀 \u00e9 ï\t\x00"
    hf = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str(text)
    assert "".join(p for p, _ in hf) == graphemes.to_byte_level(text)
    assert set(bytes_to_unicode().values()) == set(pre_tokenizers.ByteLevel.alphabet())


def test_no_learned_token_starts_with_a_mark(pair):
    decode = {v: k for k, v in bytes_to_unicode().items()}
    for whole, tok in pair.items():
        bad = []
        for token in tok.get_vocab():
            try:
                text = bytes(decode[c] for c in token).decode("utf-8")
            except (KeyError, UnicodeDecodeError):
                continue  # special tokens; pieces of one character's bytes (the byte fallback)
            if graphemes.starts_with_mark(text) and len(text) > 1:
                bad.append(text)
        # byte-level BPE learns many ("ার", "্য"); whole-grapheme BPE none: a lone mark is its only mark token
        assert (len(bad) == 0) == whole, bad[:10]


def test_whole_graphemes_on_held_out_bangla(pair, prepared):
    lines = prepared.languages["bn"].validation
    byte_level, whole = _mark_starts(pair[False], lines), _mark_starts(pair[True], lines)
    # whole units leave only clusters rarer than the vocabulary's units split (ধোঁ as ধ + ো + ঁ): 0.6 % of tokens
    # on this slice, against 38 % for byte-level units
    assert byte_level > 0.05 and whole < 0.01
    for line in lines:
        assert pair[True].decode(pair[True].encode(line).ids) == normalize(line)


def test_whole_grapheme_tokenizer_is_an_ordinary_hf_byte_level_bpe(pair, tmp_path):
    path = tmp_path / "tokenizer.json"
    pair[True].save(str(path))
    spec = json.loads(path.read_text())
    assert spec["model"]["type"] == "BPE" and spec["decoder"]["type"] == "ByteLevel"
    fast = PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>")
    assert len(fast) == 1024
    assert [fast.bos_token_id, fast.eos_token_id, fast.pad_token_id] == [0, 1, 2]
    text = "বাংলায় গান গাই। The song."
    assert fast.encode(text) == pair[True].encode(text).ids
    assert fast.decode(fast.encode(text)) == text
    assert fast.convert_tokens_to_ids("<|reserved_4|>") == 7


def test_whole_graphemes_default_on_for_text_with_marks(prepared):
    hf = backends.TrainConfig()
    assert resolve_train(hf, None, prepared).whole_graphemes is True
    english = type(prepared)({"en": prepared.languages["en"]}, prepared.sources, prepared.sha256)
    assert resolve_train(hf, None, english).whole_graphemes is False
    assert resolve_train(backends.TrainConfig(backend="spm-unigram"), None, prepared).whole_graphemes is False
    with pytest.raises(backends.TrainingError, match="only for hf-bpe"):
        backends.check_config(backends.TrainConfig(backend="spm-bpe", whole_graphemes=True), 100)
