import gzip
import json

import pytest
import sentencepiece as spm
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

import fertility
from corpus.read.normalize import normalize
from tokenizers_train import backends, spm_convert


def _sample_lines(sample_dir):
    for path in sorted(sample_dir.rglob("*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


EXTRA = ["র\u200d্যাব কি\u200cছু", "  two  spaces ", "漢字 😀 \u09dc\u09dd\u09df", "<|bos|> literal"]


def _roundtrip_failures(encode, decode, lines):
    return [x for x in lines if decode(encode(x)) != normalize(x)]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["hf-bpe", "hf-unigram"])
def test_hf_tokenizer_loads_both_ways_and_round_trips_the_sample(trained, sample_dir, backend):
    path = trained[backend]
    assert path.name == "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    fast = PreTrainedTokenizerFast(tokenizer_file=str(path))
    assert tok.get_vocab_size() == 1024 == len(fast)
    for special in backends.SPECIAL_TOKENS:
        assert tok.token_to_id(special) is not None
    assert tok.token_to_id("<|bos|>") == fast.convert_tokens_to_ids("<|bos|>")
    lines = list(_sample_lines(sample_dir)) + EXTRA
    text = "বাংলায় গান গাই। The song."
    assert fast.encode(text) == tok.encode(text).ids
    assert _roundtrip_failures(lambda x: tok.encode(x).ids, lambda ids: tok.decode(ids, skip_special_tokens=False),
                               lines) == []


def test_hf_bpe_uses_our_split_without_the_gpt2_resplit(trained):
    spec = json.loads(trained["hf-bpe"].read_text())
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    assert split["type"] == "Split" and byte_level == {**byte_level, "type": "ByteLevel", "use_regex": False}
    assert spec["normalizer"]["type"] == "NFC"
    # phrase merges exist: some token spans a space between two words
    vocab = Tokenizer.from_file(str(trained["hf-bpe"])).get_vocab()
    assert any("Ġ" in t[1:] and t.strip("Ġ") != "" for t in vocab)


@pytest.mark.parametrize("backend", ["spm-unigram", "spm-bpe"])
def test_spm_round_trips_the_sample_and_keeps_zwnj(trained, sample_dir, backend):
    path = trained[backend]
    assert path.name == "tokenizer.model"
    sp = spm.SentencePieceProcessor(model_file=str(path))
    assert sp.get_piece_size() == 1024
    lines = list(_sample_lines(sample_dir)) + EXTRA
    assert _roundtrip_failures(lambda x: backends.spm_encode(sp, x), sp.decode, lines) == []
    pieces = sp.encode(normalize("কি\u200cছু"), out_type=str)
    assert "\u200c" in "".join(pieces) and " " not in "".join(pieces)
    assert sp.piece_to_id("<|bos|>") != sp.unk_id()


@pytest.mark.parametrize("backend", ["spm-unigram", "spm-bpe"])
def test_spm_runs_also_write_an_equivalent_tokenizer_json(trained, sample_dir, backend):
    sp = spm.SentencePieceProcessor(model_file=str(trained[backend]))
    path = trained[backend].with_name("tokenizer.json")
    fast = PreTrainedTokenizerFast(tokenizer_file=str(path), bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>")
    assert len(fast) == 1024
    assert [fast.bos_token_id, fast.eos_token_id, fast.pad_token_id] == [sp.piece_to_id(t) for t in backends.SPECIAL_TOKENS[:3]]
    lines = list(_sample_lines(sample_dir)) + EXTRA + ["a  b", "   ", " lead", "trail "]
    differ = [x for x in lines if fast.encode(x) != backends.spm_encode(sp, x)]
    if backend == "spm-unigram":
        # sentencepiece sums a whole line's piece scores in float32, so deep into a long line (a score near -5000,
        # whose float32 step is 5e-4) it can take a path 3e-4 less likely ("l en" for "le n", measured on the
        # sample): the tokenizer.json's Viterbi, per word in float64, keeps the likelier one. It must never be
        # less likely than sentencepiece's, and sentencepiece may fall short of it only by what float32 sums
        # can lose: at most 2**-24 of the running sum per piece added.
        def score(ids):
            return sum(sp.get_score(i) for i in ids)

        for x in differ:
            ours, theirs = fast.encode(x), backends.spm_encode(sp, x)
            assert score(ours) >= score(theirs), x
            assert score(ours) - score(theirs) <= len(theirs) * 2**-24 * abs(score(theirs)), x
    else:
        assert differ == []
    assert [x for x in lines if fast.decode(fast.encode(x)) != normalize(x)] == []


def test_a_converter_that_encodes_differently_is_refused(trained, tmp_path, monkeypatch):
    model = tmp_path / "tokenizer.model"
    model.write_bytes(trained["spm-unigram"].read_bytes())
    real = spm_convert.to_hf

    def broken(path, specials):
        tok = real(path, specials)
        tok.normalizer = None  # spaces stay spaces: nothing matches the "▁" pieces
        return tok

    monkeypatch.setattr(spm_convert, "to_hf", broken)
    with pytest.raises(spm_convert.ConversionError, match="encodes"):
        spm_convert.convert(model, backends.SPECIAL_TOKENS, ["আমি বাংলায় গান গাই।"])
    assert not (tmp_path / "tokenizer.json").exists()


def test_naive_baseline_falls_into_the_trap(sample_lines, tmp_path):
    path = backends.train_naive(1024, sample_lines, tmp_path / "naive", show_progress=False)
    with open(path) as f:
        assert json.load(f)["pre_tokenizer"]["type"] == "ByteLevel"
    bn = ["আমি বাংলায় গান গাই। আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।"] * 20
    report = fertility.analyze([str(path)], {"bn": bn, "en": ["The quick brown fox jumps over the lazy dog."] * 20},
                               progress=False)
    m = report.tokenizers[0].languages["bn"]
    assert m.chars_per_token <= 1.5 and m.pretoken_ceiling < 2.5


@pytest.mark.parametrize("config, message", [
    (backends.TrainConfig(backend="wordpiece"), "unknown backend"),
    (backends.TrainConfig(vocab_size=1000), "multiple of 64"),
    (backends.TrainConfig(vocab_size=256), "smaller than the alphabet"),
    (backends.TrainConfig(backend="spm-unigram", vocab_size=320), "smaller than the alphabet"),
    (backends.TrainConfig(backend="spm-bpe", phrase_fraction=0.2), "only for hf-bpe"),
])
def test_bad_configs_are_refused(config, message):
    with pytest.raises(backends.TrainingError, match=message):
        backends.check_config(config, alphabet_size=120)


SHARED_LINES_PER_FILE = 1000


@pytest.mark.slow
@pytest.mark.shared
def test_every_backend_round_trips_the_shared_bangla_and_english(trained, shared_dir):
    """The first SHARED_LINES_PER_FILE lines of every shared bn/en file (the full files were checked once with
    the 64k tokenizers: benchmarks/results/2026-11-30-tokenizers-train-64k-bn-en)."""
    lines = []
    for path in sorted((shared_dir / "data").glob("[be][nn]/*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines += [line.rstrip("\n") for _, line in zip(range(SHARED_LINES_PER_FILE), f, strict=False)]
    assert len(lines) >= 4 * SHARED_LINES_PER_FILE
    for backend in ("hf-bpe", "hf-unigram"):
        tok = Tokenizer.from_file(str(trained[backend]))
        decoded = tok.decode_batch([e.ids for e in tok.encode_batch(lines)], skip_special_tokens=False)
        assert [x for x, y in zip(lines, decoded, strict=True) if y != normalize(x)] == []
    for backend in ("spm-unigram", "spm-bpe"):
        sp = spm.SentencePieceProcessor(model_file=str(trained[backend]))
        assert _roundtrip_failures(lambda x, sp=sp: backends.spm_encode(sp, x), sp.decode, lines) == []


def test_a_backend_is_one_entry_in_trainers(sample_lines, tmp_path, monkeypatch, capsys):
    """A toy backend made here and added to TRAINERS (as its one entry in backends.py would be) is checked,
    trained and offered by --backend through the normal entry points, and listed where backends are listed."""
    from collections import Counter

    from tokenizers import models, pre_tokenizers

    from tokenizers_train import cli

    def train_words(config, lines):
        counts = Counter(w for line in lines() for w in line.split())
        n_words = config.vocab_size - len(backends.SPECIAL_TOKENS) - 1
        words = ["<|unk|>"] + [w for w, _ in counts.most_common(n_words)]
        tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<|unk|>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        tok.add_special_tokens(backends.SPECIAL_TOKENS)
        return tok

    toy = backends.Backend("toy-words", backends.hf_trainer(train_words),
                           lambda n: (n + len(backends.SPECIAL_TOKENS), f"the {n} characters"))
    monkeypatch.setitem(backends.TRAINERS, toy.name, toy)
    with pytest.raises(backends.TrainingError, match="expected one of hf-bpe, hf-unigram, spm-unigram, spm-bpe, "
                       "toy-words$"):
        backends.check_config(backends.TrainConfig(backend="wordpiece"), 120)
    with pytest.raises(backends.TrainingError, match="phrase merges exist only for hf-bpe, not toy-words"):
        backends.check_config(backends.TrainConfig(backend="toy-words", phrase_fraction=0.2), 120)
    with pytest.raises(backends.TrainingError, match="the 120 characters and 8 special tokens need more than 128"):
        backends.check_config(backends.TrainConfig(backend="toy-words", vocab_size=128), 120)
    config = backends.TrainConfig(backend="toy-words", vocab_size=1024, show_progress=False)
    backends.check_config(config, 120)
    path = backends.train(config, sample_lines, tmp_path / "toy")
    tok = fertility.load_tokenizer(str(path))
    assert path == tmp_path / "toy" / "tokenizer.json" and tok.vocab_size == 1024  # padded like every HF backend
    (word, _), = Counter(w for line in sample_lines() for w in line.split()).most_common(1)
    assert tok.encode_ids([word]) == [[1]] and tok.id_to_token(1) == word  # trained: the commonest word after UNK
    args = cli.build_parser().parse_args(["--text", "bn=x.txt", "--out", "o", "--backend", "toy-words"])
    assert cli.config_from(args).train.backend == "toy-words"
    with pytest.raises(SystemExit) as exit_:
        cli.build_parser().parse_args(["--text", "bn=x.txt", "--out", "o", "--backend", "nope"])
    assert exit_.value.code == 2 and "'spm-bpe', 'toy-words'" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["hf-bpe", "hf-unigram", "spm-unigram", "spm-bpe"])
def test_the_output_folder_is_a_transformers_tokenizer_folder(trained, backend):
    """The finding: AutoTokenizer loaded tokenizer.json, but bos/eos/pad were None although the vocabulary has
    them. The folder now says which special tokens play which role, for every backend."""
    from transformers import AutoTokenizer

    folder = trained[backend].parent
    tok = AutoTokenizer.from_pretrained(str(folder))
    vocab = Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab()
    assert [tok.bos_token, tok.eos_token, tok.pad_token] == ["<|bos|>", "<|eos|>", "<|pad|>"]
    assert [tok.bos_token_id, tok.eos_token_id, tok.pad_token_id] == [vocab[t] for t in ("<|bos|>", "<|eos|>", "<|pad|>")]
    # a byte-level model has no unknown token; the character models have one, and say it
    assert tok.unk_token == {"hf-bpe": None, "hf-unigram": "<|unk|>"}.get(backend, "<unk>")
    if tok.unk_token is not None:
        assert tok.unk_token_id == vocab[tok.unk_token]
    assert len(tok) == 1024
    for text in ["আমি বাংলায় গান গাই। The song, sung.", *EXTRA[:3], "a  b ."]:
        ids = tok(text)["input_ids"]
        assert ids == Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text).ids
        assert tok.decode(ids) == normalize(text)
    batch = tok(["আমি", "আমি বাংলায় গান গাই।"], padding=True)["input_ids"]
    assert batch[0][-1] == tok.pad_token_id and len(batch[0]) == len(batch[1])


def test_stage_two_symbols_cover_any_vocabulary_the_command_accepts():
    """Stage 2 of phrase merges spells each stage-1 token as one character: there are enough of them, one
    per id, for every vocabulary up to MAX_VOCAB_SIZE (the finding: 131,070 at most, so 262,144 was refused)."""
    n = backends.MAX_VOCAB_SIZE
    symbols = backends.stage2_symbols(n)
    assert len(symbols) == n > 2 * 131_070 and len(set(symbols)) == n
    assert all(len(c) == 1 and not 0xD800 <= ord(c) < 0xE000 and not c.isspace() for c in symbols)
    assert symbols[:131_070] == [chr(0xF0000 + i) for i in range(131_070)]  # the ids every vocabulary used so far
    with pytest.raises(backends.TrainingError, match="more than the .* stage-2 symbols"):
        backends.stage2_symbols(1_100_000)  # a Python caller past check_config: an error, never a wrong symbol
    backends.check_config(backends.TrainConfig(vocab_size=262_144, phrase_fraction=0.25), alphabet_size=120)
    with pytest.raises(backends.TrainingError, match="over the largest trained, 1048576"):
        backends.check_config(backends.TrainConfig(vocab_size=n + 64), alphabet_size=120)


def _renumbered(tok: Tokenizer, shift: int) -> Tokenizer:
    """``tok``'s stage-1 model with ``shift`` unused tokens before its own, so that its ids are all >= shift."""
    model = json.loads(tok.to_str())["model"]
    vocab = {f"<|unused_{i}|>": i for i in range(shift)}
    vocab.update({t: i + shift for t, i in model["vocab"].items()})
    merges = [tuple(m) for m in model["merges"]]
    return backends._byte_level(models.BPE(vocab=vocab, merges=merges))


def test_phrase_merges_over_a_stage_one_vocabulary_past_the_private_use_planes(sample_lines):
    """Phrase merges learned over stage-1 ids past 131,070 (placed there by unused tokens, without training a
    262k vocabulary) are the very merges learned over the same tokens at small ids."""
    config = backends.TrainConfig(vocab_size=1024, show_progress=False)
    words = backends._train_byte_bpe_words(config, sample_lines, 768)
    small = backends._add_phrase_merges(words, sample_lines, 256, config)
    big = backends._add_phrase_merges(_renumbered(words, 140_000), sample_lines, 256, config)

    def phrase_merges(tok):
        merges = json.loads(tok.to_str())["model"]["merges"]
        return [tuple(m) for m in merges if "Ġ" in "".join(m)[1:]]

    assert len(phrase_merges(small)) >= 20
    assert phrase_merges(big) == phrase_merges(small)
    assert big.get_vocab_size() == small.get_vocab_size() + 140_000
