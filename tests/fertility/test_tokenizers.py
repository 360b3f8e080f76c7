import gzip
import os

import numpy as np
import pytest

from fertility.tokenizers import KNOWN_TOKENIZERS, Tokenizer, TokenizerLoadError, load_tokenizer

SENTENCE = "আমি বাংলায় গান গাই। I sing in Bengali."


def check_contract(tok: Tokenizer, texts):
    """encode_batch and encode_ids agree, and byte spans lie inside each text, in order."""
    encoded = tok.encode_batch(texts)
    assert [e.ids for e in encoded] == tok.encode_ids(texts)
    for text, e in zip(texts, encoded, strict=True):
        n = len(text.encode())
        assert len(e.offsets) == len(e.ids) == len(e.unk) == len(e.byte_fallback)
        assert all(0 <= s <= t <= n for s, t in e.offsets)
        assert [s for s, _ in e.offsets] == sorted(s for s, _ in e.offsets)
    return encoded


def test_shipped_gpt2_byte_spans_tile_the_text(gpt2):
    texts = [SENTENCE, "", "Hello  world\n", "ক্ষ্ম‌ য়"]
    encoded = check_contract(gpt2, texts)
    for text, e in zip(texts, encoded, strict=True):
        raw = text.encode()
        # byte-level BPE: each token's span is exactly its bytes, laid end to end
        assert b"".join(raw[s:t] for s, t in e.offsets) == raw
        assert gpt2.decode(e.ids) == text
    assert gpt2.kind == "hf" and gpt2.vocab_size == 50257
    assert gpt2.bos_id == gpt2.eos_id == gpt2.token_to_id("<|endoftext|>") == 50256


def test_shipped_o200k_matches_tiktoken_and_published_hash(o200k, shipped_tokenizers):
    import tiktoken

    from fertility.tokenizers import O200K_PATTERN, read_tiktoken_ranks

    ranks = read_tiktoken_ranks(shipped_tokenizers / "o200k_base" / "o200k_base.tiktoken.gz")
    ref = tiktoken.Encoding("ref", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    texts = [SENTENCE, "নতুন দিল্লি, ২০২৩ সালে।", "plain English text"]
    encoded = check_contract(o200k, texts)
    for text, e in zip(texts, encoded, strict=True):
        assert e.ids == ref.encode_ordinary(text)
        assert [text.encode()[s:t] for s, t in e.offsets] == [ref.decode_single_token_bytes(i) for i in e.ids]
    assert o200k.fingerprint == "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    assert o200k.kind == "tiktoken" and o200k.vocab_size == 200019 and o200k.bos_id == 199999


def test_special_token_strings_are_plain_text(gpt2, o200k):
    for tok in (gpt2, o200k):
        ids = tok.encode_ids(["a <|endoftext|> b"])[0]
        assert tok.bos_id not in ids and len(ids) > 3
        assert tok.decode(ids) == "a <|endoftext|> b"


def test_pretokenize_spans(o200k, gpt2):
    # o200k's pattern keeps a letter with its vowel signs (\p{M}) in one piece; GPT-2's splits them off.
    word = "বাংলায়"
    assert o200k.pretokenize(word) == [(0, len(word))]
    assert len(gpt2.pretokenize(word)) > 1
    assert [SENTENCE[a:b] for a, b in o200k.pretokenize(SENTENCE)][:3] == ["আমি", " বাংলায়", " গান"]


def test_id_token_round_trip(gpt2, o200k):
    for tok in (gpt2, o200k):
        i = tok.encode_ids([" the"])[0][0]
        assert tok.token_to_id(tok.id_to_token(i)) == i
        assert tok.token_to_id("certainly-not-a-token-@@@") is None


@pytest.mark.shared
@pytest.mark.parametrize(
    "name, kind",
    [("cl100k_base", "tiktoken"), ("llama3", "tiktoken"), ("anthropic-claude-legacy", "hf"),
     ("bnlp-bn-spm", "sentencepiece"), ("llama2", "sentencepiece"), ("bangla-bert-base", "wordpiece")],
)
def test_each_kind_matches_its_own_library(shared_tok, shared_tokenizers, name, kind):
    tok = shared_tok(name)
    assert tok.kind == kind
    texts = [SENTENCE, "কৃষ্ণ র‍্যাব উ‌ৎস ড়"]
    encoded = check_contract(tok, texts)
    path = shared_tokenizers / KNOWN_TOKENIZERS[name]
    if kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(path))
        assert [e.ids for e in encoded] == [sp.encode(t) for t in texts]
        assert tok.bos_id == sp.bos_id()
        if name == "llama2":  # byte fallback: each byte piece covers one byte
            e = encoded[0]
            flagged = [i for i, f in enumerate(e.byte_fallback) if f]
            assert flagged and all(sp.is_byte(e.ids[i]) for i in flagged)
            assert all(e.offsets[i][1] - e.offsets[i][0] == 1 for i in flagged)
    elif kind == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        from fertility.tokenizers import CL100K_PATTERN, LLAMA3_PATTERN

        pattern = CL100K_PATTERN if name == "cl100k_base" else LLAMA3_PATTERN
        ref = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(path)),
                                special_tokens={})
        assert [e.ids for e in encoded] == [ref.encode_ordinary(t) for t in texts]
    elif kind == "hf":
        from tokenizers import Tokenizer as HFTok

        ref = HFTok.from_file(str(path))
        assert [e.ids for e in encoded] == [ref.encode(t, add_special_tokens=False).ids for t in texts]
    else:
        from tokenizers.implementations import BertWordPieceTokenizer

        ref = BertWordPieceTokenizer(str(path))
        assert [e.ids for e in encoded] == [ref.encode(t, add_special_tokens=False).ids for t in texts]
        assert sum(encoded[0].unk) == 3  # "I", "sing", "Bengali": no Latin word pieces in this vocabulary
    assert tok.decode(encoded[1].ids)


@pytest.mark.shared
def test_known_names_resolve_through_env(monkeypatch, shared_tokenizers):
    with pytest.raises(TokenizerLoadError, match="cl100k_base.*not found"):
        load_tokenizer("cl100k_base")  # not shipped
    monkeypatch.setenv("FERTILITY_TOKENIZER_DIR", str(shared_tokenizers))
    tok = load_tokenizer("cl100k_base")
    assert tok.fingerprint == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def test_load_by_path_and_gz(tmp_path, shipped_tokenizers, o200k, gpt2):
    assert load_tokenizer(gpt2) is gpt2
    by_dir = load_tokenizer(str(shipped_tokenizers / "gpt2"))
    assert by_dir.encode_ids([SENTENCE]) == gpt2.encode_ids([SENTENCE])
    # a tiktoken file under a name that says nothing: recognised by content, pattern by its hash
    plain = tmp_path / "tokenizer.model"
    plain.write_bytes(gzip.decompress((shipped_tokenizers / "o200k_base" / "o200k_base.tiktoken.gz").read_bytes()))
    tok = load_tokenizer(str(plain))
    assert tok.kind == "tiktoken" and tok.fingerprint == o200k.fingerprint
    assert tok.encode_ids([SENTENCE]) == o200k.encode_ids([SENTENCE])


def test_unknown_name_lists_known_ones_and_where_it_looked(tmp_path):
    with pytest.raises(TokenizerLoadError) as err:
        load_tokenizer("gpt5", tmp_path)
    msg = str(err.value)
    assert "unknown tokenizer name 'gpt5'" in msg and "o200k_base" in msg and str(tmp_path) in msg


def test_missing_and_corrupt_files_name_the_file(tmp_path):
    with pytest.raises(TokenizerLoadError, match="nothere.json: no such"):
        load_tokenizer(str(tmp_path / "nothere.json"))
    cases = {
        "tokenizer.json": b'{"model": {"type": "BPE", "vocab": ',
        "x.tiktoken": b"not base64 at all!\n",
        "x.tiktoken.gz": gzip.compress(b"QQ== 0\nQg== 1\n")[:12],
        "spm.model": b"\x00\x01garbage that is no protobuf",
        "vocab.txt": b"",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(TokenizerLoadError, match=name.replace(".", r"\.")):
            load_tokenizer(str(path))


def library_pieces(tok, text):
    return [span for _, span in tok._tok.pre_tokenizer.pre_tokenize_str(text)]


TRICKY = ["a\u00a0b  c\t\td\n\ne", "it's  I'LL 12345 x\u2028y", "ক্ষ\u200c়  ১২৩ টাকা।", "  trailing   ", "\u3000全角 テキスト"]


def test_regex_pretokenizer_equals_the_library(gpt2, sample_dir):
    from fertility.text import iter_documents

    docs = TRICKY + [d.text for d in iter_documents(str(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"),
                                                     max_chars=20_000)]
    docs += [d.text for d in iter_documents(str(sample_dir / "en" / "wiki-en-chinapedia.txt.gz"), max_chars=20_000)]
    assert gpt2._piece_pattern is not None
    starts, ends, counts = gpt2.pretokenize_batch(docs)
    expected = [library_pieces(gpt2, d) for d in docs]
    assert counts.tolist() == [len(e) for e in expected]
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == [s for e in expected for s in e]


def test_whitespace_pieces_equal_the_pattern_one_text_at_a_time(sample_dir):
    """A sentencepiece model's pieces from a table of characters, as its pattern's matches: the characters
    where str.isspace and the pattern's \\s disagree (U+001C-U+001F, U+0085), empty texts, edges."""
    from fertility.text import iter_documents
    from fertility.tokenizers.base import WHITESPACE_PIECES, whitespace_pieces

    docs = ["", " ", "x", *TRICKY, "a\u001cb\u001f c\u0085d", "\u200bzero\u200cwidth", ""]
    docs += [d.text for d in iter_documents(str(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"), max_chars=20_000)]
    starts, ends, counts = whitespace_pieces(docs)
    expected = [[m.span() for m in WHITESPACE_PIECES.finditer(d)] for d in docs]
    assert counts.tolist() == [len(e) for e in expected]
    assert list(zip(starts.tolist(), ends.tolist(), strict=True)) == [s for e in expected for s in e]


def test_split_regex_pretokenizer_equals_the_library(sample_dir):
    """Qwen's layout: Split(Regex, Isolated) then ByteLevel without its own regex."""
    import json

    from tokenizers import Regex, pre_tokenizers

    from fertility.text import iter_documents
    from fertility.tokenizers import QWEN_PATTERN
    from fertility.tokenizers.hf import _pretokenizer_regex

    library = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    ours = _pretokenizer_regex(json.loads(library.__getstate__()))
    assert ours is not None
    docs = TRICKY + [d.text for d in iter_documents(str(sample_dir / "bn" / "literature-bnarchive.txt.gz"),
                                                     max_chars=10_000)]
    assert [[m.span() for m in ours.finditer(d)] for d in docs] == [
        [span for _, span in library.pre_tokenize_str(d)] for d in docs]


def test_every_kind_without_shared_files(tmp_path, gpt2, sample_dir):
    """tokenizer.json, sentencepiece and WordPiece files made here, so a fresh clone tests every kind."""
    import io

    import sentencepiece as spm

    from fertility.text import iter_documents

    docs = [d.text for d in iter_documents(str(sample_dir / "parallel" / "ben_Beng.txt.gz"), max_chars=30_000)]
    # HF tokenizer.json (the shipped GPT-2, saved in that format)
    gpt2._tok.save(str(tmp_path / "tokenizer.json"))
    hf = load_tokenizer(str(tmp_path / "tokenizer.json"))
    assert hf.kind == "hf" and hf.encode_ids(docs[:50]) == gpt2.encode_ids(docs[:50])
    # sentencepiece with byte fallback, under a file name that says nothing
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(docs), model_writer=model, vocab_size=400,
                                   byte_fallback=True, character_coverage=1.0)
    (tmp_path / "tiny.bin").write_bytes(model.getvalue())
    sp = load_tokenizer(str(tmp_path / "tiny.bin"))
    ref = spm.SentencePieceProcessor(model_proto=model.getvalue())
    text = "আমি বাংলায় গান গাই। 漢"
    (e,) = check_contract(sp, [text])
    assert sp.kind == "sentencepiece" and e.ids == ref.encode(text)
    flagged = [i for i, f in enumerate(e.byte_fallback) if f]
    assert len(flagged) == 3  # 漢 is not in the vocabulary: its three UTF-8 bytes, one piece each
    assert [e.offsets[i] for i in flagged] == [(len(text.encode()) - 3 + k, len(text.encode()) - 2 + k)
                                               for k in range(3)]
    assert sp.decode(e.ids) == text
    # WordPiece vocab.txt with BERT's defaults: the nukta (a combining mark) is stripped before lookup
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "আমি", "বাংলা",
                                                   "##য", "গান", "।"]) + "\n")
    wp = load_tokenizer(str(tmp_path / "vocab.txt"))
    (e,) = check_contract(wp, ["আমি বাংলায় গান গাই।"])
    assert wp.kind == "wordpiece" and [wp.id_to_token(i) for i in e.ids] == ["আমি", "বাংলা", "##য", "গান", "[UNK]", "।"]
    assert e.unk == [False, False, False, False, True, False]
    assert wp.bos_id == wp.token_to_id("[CLS]") and wp.eos_id == wp.token_to_id("[SEP]")


def test_forked_child_encodes_with_its_own_threads(o200k):
    import multiprocessing as mp

    text = "বাংলা লেখা and English " * 20
    o200k.encode_spans([text])  # the parent's worker threads now exist; a forked child does not inherit them
    with mp.get_context("fork").Pool(1) as pool:
        child = pool.apply_async(_count_in_child, (o200k, text)).get(timeout=60)
    assert child == len(o200k.encode_ids([text])[0])


def _count_in_child(tok, text):
    return int(tok.encode_spans([text]).counts.sum())


@pytest.mark.shared
@pytest.mark.parametrize("name", ["bnlp-bn-spm", "gemma3", "llama2", "mistral-v1"])
def test_sentencepiece_spans_from_lengths_equal_the_librarys_offsets(shared_tok, sample_dir, name):
    import numpy as np

    from fertility.text import iter_documents

    tok = shared_tok(name)
    docs = [d.text for p in ("bn/literature-bnarchive.txt.gz", "en/wiki-en-chinapedia.txt.gz")
            for d in iter_documents(str(sample_dir / p), max_chars=20_000)]
    # normalised away (NFKC ligature, full-width, doubled and leading spaces), UNK, byte fallback
    docs += ["  two  spaces ", "ﬁne ＡＢＣ", "漢字 emoji 👍🏽", " lead", "\tx", "a\u00a0b", "x"]
    fast, library = tok.encode_spans(docs), tok._library_spans(docs)
    for field in ("ids", "starts", "ends", "counts"):
        assert np.array_equal(getattr(fast, field), getattr(library, field)), field


@pytest.mark.shared
@pytest.mark.parametrize("name", ["gpt2", "o200k_base", "bnlp-bn-spm", "qwen2.5", "bangla-bert-base"])
def test_spans_given_the_texts_bytes_equal_those_counted_by_the_adapter(shared_tok, sample_dir, name):
    import numpy as np

    from fertility.scoring.metrics import prepare_batch
    from fertility.text import iter_documents
    from fertility.tokenizers.base import byte_lengths

    tok = shared_tok(name)
    docs = [d.text for p in ("bn/literature-bnarchive.txt.gz", "en/wiki-en-chinapedia.txt.gz")
            for d in iter_documents(str(sample_dir / p), max_chars=20_000)]
    docs += ["  two  spaces ", "ﬁne ＡＢＣ", "漢字 emoji 👍🏽", " lead", "\tx", "a\u00a0b", "x", "", "Ｑé"]
    layout = np.diff(prepare_batch(docs).scripted.doc_byte_start).astype(np.int64)  # what count_tokens passes
    assert np.array_equal(layout, byte_lengths(docs))
    given, counted = tok.encode_spans(docs, layout), tok.encode_spans(docs)
    for field in ("ids", "starts", "ends", "counts", "unk", "byte_fallback"):
        assert np.array_equal(getattr(given, field), getattr(counted, field)), field


def test_one_thread_encodes_the_same_ids_on_the_calling_thread(gpt2, o200k, monkeypatch):
    from fertility.tokenizers import base, one_thread

    texts = ["বাংলা লেখা and English", "second text"]
    want = [gpt2.encode_ids(texts), o200k.encode_ids(texts)]
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    with one_thread():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"  # what HF tokenizers reads at each batch call
        # tiktoken's batch call runs a thread pool: inside the block the adapter must not use it
        monkeypatch.setattr(o200k._enc, "encode_ordinary_batch", None)
        assert [gpt2.encode_ids(texts), o200k.encode_ids(texts)] == want
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true" and not base.in_one_thread()  # restored


def test_a_format_is_one_entry_in_formats(tmp_path, monkeypatch):
    """A toy format made here and added to FORMATS (as its one entry in loading.py would be) loads by file and
    by folder through load_tokenizer, and the messages that list the formats name it."""
    from tokenizers import Tokenizer as HFTok
    from tokenizers import models, pre_tokenizers

    from fertility.tokenizers import FORMATS, Format, HFTokenizer, loading

    def load_words(path, name, preset):
        words = path.read_text(encoding="utf-8").split()
        tok = HFTok(models.WordLevel({w: i for i, w in enumerate(["[UNK]", *words])}, unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return HFTokenizer(tok, name, "words", [path])

    words = Format("word list", load_words, in_folder=("tokenizer.words",), suffixes=(".words",))
    monkeypatch.setattr(loading, "FORMATS", (*FORMATS, words))
    folder = tmp_path / "bn-words"
    folder.mkdir()
    (folder / "tokenizer.words").write_text("আমি বাংলায় গান গাই।\n", encoding="utf-8")
    by_folder = load_tokenizer(str(folder))
    assert by_folder.kind == "words" and by_folder.name == "bn-words"  # a layout's file name: the folder's name
    (e,) = check_contract(by_folder, ["আমি গান lost"])
    assert e.ids == [1, 3, 0] and e.unk == [False, False, True]
    (tmp_path / "list.words").write_text("a b c\n", encoding="utf-8")
    by_file = load_tokenizer(str(tmp_path / "list.words"))
    assert by_file.name == "list.words" and by_file.encode_ids(["c a"]) == [[3, 1]]
    (tmp_path / "bad.words").write_bytes(b"\xff\xfe not UTF-8")
    with pytest.raises(TokenizerLoadError, match=r"bad\.words: not a valid word list \(UnicodeDecodeError"):
        load_tokenizer(str(tmp_path / "bad.words"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(TokenizerLoadError, match=r"empty: no tokenizer file found \(expected tokenizer\.json, "
                       r"vocab\.json \+ merges\.txt, vocab\.txt, tokenizer\.model, \*\.tiktoken or tokenizer\.words\)"):
        load_tokenizer(str(tmp_path / "empty"))
    # the shipped formats still win their own files: sentencepiece takes what no other format claims
    assert load_tokenizer(str(tmp_path / "list.words")) is by_file
    monkeypatch.setattr(loading, "FORMATS", (words,))  # without a format that takes any file
    (tmp_path / "x.bin").write_bytes(b"\x00")
    with pytest.raises(TokenizerLoadError, match=r"x\.bin: not a file of a known tokenizer format \(word list\)"):
        load_tokenizer(str(tmp_path / "x.bin"))


@pytest.fixture(scope="module")
def nfc_bpe(tmp_path_factory, sample_dir):
    """A byte-level BPE with an NFC normaliser, as every tokenizer tokenizers-train makes (and qwen2.5),
    trained here in well under a second on the sample's Bangla poems."""
    from tokenizers import Tokenizer as HfTokenizer
    from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

    import fertility

    docs = [d.text for d in fertility.iter_documents(str(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"),
                                                     max_chars=60_000)]
    t = HfTokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=2000, show_progress=False,
                                                    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path_factory.mktemp("nfc_bpe") / "tokenizer.json"
    t.save(str(path))
    return load_tokenizer(str(path)), docs


def test_overlapping_spans_put_their_boundary_inside_the_character():
    """Byte pieces of one character (each given the whole character's span) and a character a normaliser
    split: the boundaries fall inside it, one byte apart, and the spans tile the text."""
    from fertility.tokenizers.base import close_gaps

    starts, ends = np.array([0, 0, 0, 3, 6]), np.array([3, 3, 3, 6, 9])  # ক as 3 byte pieces, then two tokens
    s, e = close_gaps(starts, ends, np.array([5]), np.array([9]))
    assert s.tolist() == [0, 1, 2, 3, 6] and e.tolist() == [1, 2, 3, 6, 9]
    # an NFC ো (3 bytes at 3..6) decomposed by the normaliser, a token boundary between its halves
    s, e = close_gaps(np.array([0, 3]), np.array([6, 9]), np.array([2]), np.array([9]))
    assert s.tolist() == [0, 4] and e.tolist() == [4, 9]


def test_spans_of_a_normalising_tokenizer_tile_decomposed_text(nfc_bpe):
    """NFD input: the folded vowel sign lies inside the token that absorbed it, not in a gap between tokens."""
    import unicodedata

    tok, _ = nfc_bpe
    text = unicodedata.normalize("NFD", "কোথায় আছো")
    assert text != unicodedata.normalize("NFC", text)
    spans = tok.encode_spans([text, "", text])
    assert spans.counts[1] == 0
    for i in (0, 2):
        lo = int(spans.counts[:i].sum())
        s, e = spans.starts[lo:lo + spans.counts[i]], spans.ends[lo:lo + spans.counts[i]]
        assert s[0] == 0 and e[-1] == len(text.encode()) and (s[1:] == e[:-1]).all(), (s, e)


def test_nfc_and_nfd_text_give_the_same_tokens_and_broken_grapheme_rate(nfc_bpe):
    import unicodedata

    import fertility

    tok, docs = nfc_bpe
    forms = {form: [unicodedata.normalize(form, d) for d in docs] for form in ("NFC", "NFD")}
    assert sum(a != b for a, b in zip(forms["NFC"], forms["NFD"], strict=True)) > len(docs) // 2
    m = {form: fertility.analyze([tok], {"bn": texts}, progress=False).tokenizers[0].languages["bn"]
         for form, texts in forms.items()}
    assert tok.encode_ids(forms["NFC"]) == tok.encode_ids(forms["NFD"])
    assert m["NFC"].tokens == m["NFD"].tokens and m["NFC"].boundaries == m["NFD"].boundaries
    assert m["NFD"].broken_grapheme_rate == pytest.approx(m["NFC"].broken_grapheme_rate)
    assert m["NFD"].broken_boundaries == m["NFC"].broken_boundaries


@pytest.mark.parametrize("name", ["qwen2.5", "bangla-bert-base"])
def test_nfd_text_breaks_the_same_clusters_as_nfc(shared_tok, sample_dir, name):
    """qwen2.5 normalises to NFC and its byte-level tokens often end inside a character: NFD input (through
    the library's offsets) must count those boundaries as NFC input (through byte lengths) does. BERT's
    normaliser decomposes instead: a boundary between the two halves of an NFC ``ো`` is inside it."""
    import itertools
    import unicodedata

    import fertility

    tok = shared_tok(name)
    docs = [d.text for d in itertools.islice(fertility.iter_documents(
        str(sample_dir / "bn" / "poems-pd-banglakosh.txt.gz"), max_chars=40_000), 40)]
    m = {form: fertility.analyze([tok], {"bn": [unicodedata.normalize(form, d) for d in docs]},
                                 progress=False).tokenizers[0].languages["bn"] for form in ("NFC", "NFD")}
    assert m["NFC"].tokens == m["NFD"].tokens and m["NFC"].boundaries == m["NFD"].boundaries
    assert m["NFD"].broken_boundaries == m["NFC"].broken_boundaries


def test_a_tokenizer_folder_that_is_not_one_and_a_link_loop_are_named(tmp_path, shipped_tokenizers):
    from fertility.tokenizers import available_known

    for call in (lambda: load_tokenizer("gpt2", tmp_path / "missing"), lambda: available_known(tmp_path / "missing"),
                 lambda: load_tokenizer(str(shipped_tokenizers / "gpt2"), tmp_path / "missing")):
        with pytest.raises(TokenizerLoadError, match=r"--tokenizer-dir .*missing: no such folder"):
            call()
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    with pytest.raises(TokenizerLoadError, match=r"loop\.json: cannot be read \(Too many levels of symbolic links"):
        load_tokenizer(str(loop))


def test_whitespace_pieces_split_where_str_isspace_does_but_at_the_separators():
    """The analyzer takes a whitespace pre-tokenizer's pieces from its words (runs of non-``str.isspace``)
    unless a batch holds one of ``SEPARATORS_IN_PIECES``: they must be all the code points the two disagree on."""
    from fertility.tokenizers.base import SEPARATORS_IN_PIECES, WHITESPACE_PIECES

    differ = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000
              and (WHITESPACE_PIECES.fullmatch(chr(c)) is None) != chr(c).isspace()]
    first, last = SEPARATORS_IN_PIECES
    assert differ == list(range(first, last + 1))
