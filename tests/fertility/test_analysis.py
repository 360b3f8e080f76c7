"""The programmatic API, parallel premium, balance view and traps."""

import pytest

import fertility
from fertility.premium import ParallelError, premium, read_parallel
from fertility.scoring.balance import balance
from fertility.scoring.metrics import Metrics
from fertility.scoring.traps import find_traps
from fertility.scripts import SCRIPT_NAMES


def test_analyze_raw_strings_per_language(gpt2, o200k, sample_dir):
    bn = [d.text for d in fertility.iter_documents(str(sample_dir / "parallel" / "ben_Beng.txt.gz"), max_chars=3000)]
    en = [d.text for d in fertility.iter_documents(str(sample_dir / "parallel" / "eng_Latn.txt.gz"), max_chars=3000)]
    report = fertility.analyze([gpt2, o200k], {"bn": bn, "en": en}, progress=False)
    assert [t.name for t in report.tokenizers] == ["gpt2", "o200k_base"]
    for tok, t in zip((gpt2, o200k), report.tokenizers, strict=True):
        m = t.languages["bn"]
        assert m.tokens == sum(map(len, tok.encode_ids(bn)))
        assert m.chars == sum(map(len, bn)) and m.documents == len(bn)
        assert m.chars_per_token == pytest.approx(m.chars / m.tokens)
        # per-script counts add up to the language's
        assert sum(s.chars for s in t.scripts.values()) == sum(x.chars for x in t.languages.values())
        assert sum(s.tokens for s in t.scripts.values()) == pytest.approx(sum(x.tokens for x in t.languages.values()))
    d = report.to_dict()
    assert d["tokenizers"][0]["languages"]["bn"]["chars_per_token"] == round(report.tokenizers[0].languages["bn"].chars_per_token, 6)
    assert report.tokenizer("o200k_base").languages["bn"].chars_per_token > 1.5


def test_parallel_premium_and_misalignment(tmp_path, o200k):
    bn = tmp_path / "bn.txt"
    en = tmp_path / "en.txt"
    bn.write_text("আমি গান গাই।\nসে বই পড়ে।\n")
    en.write_text("I sing.\nShe reads a book.\n")
    text = read_parallel({"bn": str(bn), "en": str(en)})
    result = premium(o200k, text, "en")
    counts = {lang: [len(x) for x in o200k.encode_ids(s)] for lang, s in text.sentences.items()}
    assert result["bn"].tokens == sum(counts["bn"])
    assert result["bn"].premium == pytest.approx(sum(counts["bn"]) / sum(counts["en"]))
    ratios = sorted(b / e for b, e in zip(counts["bn"], counts["en"], strict=True))
    assert result["bn"].median_premium == pytest.approx((ratios[0] + ratios[1]) / 2)
    en.write_text("I sing.\n\nShe reads a book.\n")  # same count of sentences, but not on the same lines
    with pytest.raises(ParallelError, match=r"bn\.txt has 2 .*en\.txt has 2 .*last line 3"):
        read_parallel({"bn": str(bn), "en": str(en)})
    en.write_text("I sing.\n")
    with pytest.raises(ParallelError, match=r"bn\.txt has 2 non-blank lines.*en\.txt has 1"):
        read_parallel({"bn": str(bn), "en": str(en)})
    with pytest.raises(ParallelError, match="reference language 'fr'"):
        premium(o200k, text, "fr")


def test_balance_inversion_warning():
    langs = {"en": Metrics(chars=600, bytes=600, tokens=150.0), "bn": Metrics(chars=400, bytes=1000, tokens=400.0)}
    b = balance(langs)
    assert b.char_share == {"en": 0.6, "bn": 0.4}
    assert b.token_share["bn"] == pytest.approx(400 / 550)
    assert len(b.warnings) == 1 and "en has 60.0% of the characters but 27.3% of the tokens" in b.warnings[0]
    fair = balance({"en": Metrics(chars=600, tokens=150.0), "bn": Metrics(chars=400, tokens=100.0)})
    assert fair.warnings == []


def test_trap_rules_and_causes():
    latin = Metrics(chars=10_000, tokens=2_200.0, pretokens=2_000.0)
    marks_cut = Metrics(chars=10_000, tokens=20_000.0, pretokens=7_000.0, mark_splits=2_500, boundaries=19_000,
                        broken_boundaries=12_000, split_char_boundaries=9_000)
    traps = find_traps({"Latin": latin, "Bengali": marks_cut})
    rules = {t.rule: t for t in traps if t.script == "Bengali"}
    assert set(rules) == {"low_chars_per_token", "low_pretoken_ceiling", "broken_graphemes"}
    assert "splits combining marks" in rules["low_pretoken_ceiling"].cause
    assert "raw UTF-8 bytes" in rules["broken_graphemes"].cause
    assert not [t for t in traps if t.script == "Latin"]
    # a good pre-tokenizer but a vocabulary with few merges for the script: the vocabulary is named instead
    sparse = Metrics(chars=10_000, tokens=9_000.0, pretokens=1_800.0)
    (trap,) = find_traps({"Latin": latin, "Bengali": sparse})
    assert trap.rule == "low_chars_per_token" and "vocabulary has few tokens" in trap.cause
    # too little text to judge
    assert find_traps({"Latin": latin, "Bengali": Metrics(chars=50, tokens=100.0, pretokens=90.0)}) == []


def test_progress_moves_on_one_endless_line(tmp_path, gpt2, monkeypatch):
    import fertility.analysis
    import fertility.text

    monkeypatch.setattr(fertility.text, "PIECE_BYTES", 2048)
    monkeypatch.setattr(fertility.analysis, "BATCH_CHARS", 3000)
    p = tmp_path / "one-line.txt"
    p.write_text(" ".join(["আমি বাংলায় গান গাই"] * 2000))  # about 100 kB, no newline
    updates = []
    monkeypatch.setattr(fertility.analysis, "tqdm", lambda **kw: _Bar(updates))
    report = fertility.analyze([gpt2], [fertility.TextSource("bn", str(p))], progress=True)
    assert len(updates) > 10 and sum(updates) == report.tokenizers[0].languages["bn"].chars


class _Bar:
    def __init__(self, updates):
        self.updates = updates

    def update(self, n):
        self.updates.append(n)

    def close(self):
        pass


def test_sampled_detail_keeps_exact_totals_and_states_its_error(gpt2, sample_dir):
    docs = [d.text for d in fertility.iter_documents(str(sample_dir / "bn" / "literature-bnarchive.txt.gz"),
                                                     max_chars=200_000)]
    exact = fertility.analyze([gpt2], {"bn": docs}, progress=False).tokenizers[0]
    sampled = fertility.analyze([gpt2], {"bn": docs}, progress=False, detail_every=4).tokenizers[0]
    e, s = exact.languages["bn"], sampled.languages["bn"]
    # every document is encoded: the totals and chars/token are exact
    assert (s.documents, s.chars, s.bytes, s.tokens) == (e.documents, e.chars, e.bytes, e.tokens)
    assert s.chars_per_token == e.chars_per_token and s.bytes_per_token == e.bytes_per_token
    assert e.sample_share == 1.0 and e.ci95 == {}
    assert 0.15 < s.sample_share < 0.5
    assert "chars_per_token" not in s.ci95 and s.ci95["pretoken_ceiling"] > 0
    for rate in ("pretoken_ceiling", "graphemes_per_token", "broken_grapheme_rate", "tokens_per_word"):
        # the estimate lies within a few of its stated half-widths of the exact value
        assert abs(getattr(s, rate) - getattr(e, rate)) <= 3 * s.ci95[rate] + 1e-9, rate
    # per-script counts are scaled to add up to the exact totals
    assert sum(m.tokens for m in sampled.scripts.values()) == pytest.approx(e.tokens)
    assert sum(m.chars for m in sampled.scripts.values()) == pytest.approx(e.chars, abs=len(sampled.scripts))
    assert sampled.scripts["Bengali"].ci95["chars_per_token"] is not None


def test_sampled_blocks_are_systematic_and_carry_across_batches():
    from fertility.analysis import _sampled_blocks
    from fertility.scoring.sampling import BLOCK_CHARS

    docs = ["x" * (BLOCK_CHARS // 2)] * 12  # two documents per block: blocks 0..5
    state = [0, 0]
    first = _sampled_blocks(docs[:5], state, 3)  # blocks 0, 1 and half of 2
    rest = _sampled_blocks(docs[5:], state, 3)
    assert [(b, len(u)) for b, u in first] == [(0, 2)] and [(b, len(u)) for b, u in rest] == [(3, 2)]
    assert state == [6, 0]
    # a sampled block that straddles two batches comes in two parts under one index
    state = [0, 0]
    assert [(b, len(u)) for b, u in _sampled_blocks(docs[:1], state, 3)] == [(0, 1)]
    assert [(b, len(u)) for b, u in _sampled_blocks(docs[1:7], state, 3)] == [(0, 1), (3, 1)]


def _one_script_counts(vocab_size: int, sid: int, chars: float, tokens: float):
    from fertility.scoring.metrics import Counts

    c = Counts(vocab_size)
    for name in ("chars", "graphemes", "bytes", "words", "word_tokens", "boundaries", "pretokens"):
        c.arrays[name][sid] = chars
    c.arrays["tokens"][sid] = tokens
    c.token_total = tokens
    return c


def test_a_quantity_held_by_one_sampled_block_has_no_interval():
    from fertility.scoring.sampling import BlockStats

    greek, latin = SCRIPT_NAMES.index("Greek"), SCRIPT_NAMES.index("Latin")
    stats = BlockStats()
    stats.add_block(_one_script_counts(10, latin, 100, 40), 0)
    stats.add_block(_one_script_counts(10, greek, 30, 10), 4)  # the only block with Greek
    stats.add_block(_one_script_counts(10, latin, 120, 40), 8)
    assert stats.half_width("chars_per_token", greek, 0.25) is None  # one block: no spread, not "± 0"
    assert stats.half_width("chars_per_token", latin, 0.25) > 0
    # two parts of one block (it straddled two batches) are one block: still no interval for Greek
    split = BlockStats()
    split.add_block(_one_script_counts(10, greek, 30, 10), 0)
    split.add_block(_one_script_counts(10, greek, 20, 10), 0)
    split.add_block(_one_script_counts(10, latin, 100, 40), 4)
    assert split.half_width("chars_per_token", greek, 0.25) is None and split.blocks == 2
    assert split.sums["chars"][greek] == 50


def test_sampled_intervals_cover_exact_mode_on_real_text(gpt2, sample_dir):
    """Every interval of a sampled report against the exact report on the same real text (bn literature and
    en wiki, where Greek and a few other scripts appear in a handful of blocks): a stated interval is never
    0 where the estimate is off, and most of them hold the exact value."""
    texts = {lang: [d.text for d in fertility.iter_documents(str(sample_dir / lang / name), max_chars=150_000)]
             for lang, name in (("bn", "literature-bnarchive.txt.gz"), ("en", "wiki-en-chinapedia.txt.gz"))}
    exact = fertility.analyze([gpt2], texts, progress=False).tokenizers[0]
    sampled = fertility.analyze([gpt2], texts, progress=False, detail_every=4).tokenizers[0]
    pairs = [(m, exact.scripts[name]) for name, m in sampled.scripts.items()]
    pairs += [(m, exact.languages[lang]) for lang, m in sampled.languages.items()]
    stated = covered = 0
    for est, ex in pairs:
        for rate, hw in est.ci95.items():
            if hw is None:
                continue
            stated += 1
            off = abs(getattr(est, rate) - getattr(ex, rate))
            assert hw > 0 or off < 1e-9, (rate, getattr(est, rate), getattr(ex, rate))
            covered += off <= 1.96 * hw + 1e-9
    assert sum(hw is None for m, _ in pairs for hw in m.ci95.values()) > 0  # the rare scripts: null
    assert stated > 20 and covered / stated >= 0.8, (covered, stated)


def test_an_estimate_without_an_interval_says_so_in_the_tables():
    from fertility.present.report import _estimate

    m = Metrics(chars=30, tokens=10, sample_share=0.25, ci95={"chars_per_token": None, "tokens_per_word": 0.5})
    assert _estimate(m, "chars_per_token", "{:.2f}") == "3.00 ±?"
    assert _estimate(m, "tokens_per_word", "{:.2f}").endswith(" ±0.50")
    assert _estimate(Metrics(chars=30, tokens=10), "chars_per_token", "{:.2f}") == "3.00"  # exact: no ±
