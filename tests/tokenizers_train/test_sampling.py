from pathlib import Path

import pytest

from fertility.text import TextSource
from tokenizers_train import sampling


def test_resolve_shares():
    chars = {"bn": 1_000_000, "en": 4_000_000}
    assert sampling.resolve_shares(chars) == {"bn": 0.5, "en": 0.5}
    assert sampling.resolve_shares(chars, {"bn": 3, "en": 1}) == {"bn": 0.75, "en": 0.25}
    t1 = sampling.resolve_shares(chars, temperature=1)
    assert t1["en"] == pytest.approx(0.8)
    t5 = sampling.resolve_shares(chars, temperature=5)
    assert 0.5 < t5["en"] < t1["en"]
    with pytest.raises(ValueError, match="missing"):
        sampling.resolve_shares(chars, {"bn": 1})
    with pytest.raises(ValueError, match="positive"):
        sampling.resolve_shares(chars, temperature=0)


def test_holdout_is_disjoint_and_sample_is_balanced_in_characters(prepared):
    for lt in prepared.languages.values():
        train = lt.train_path.read_text(encoding="utf-8").splitlines()
        assert lt.validation and not set(train) & set(lt.validation)
        assert lt.train_chars == sum(map(len, train))
    budgets = sampling.sample_budgets(prepared, {"bn": 0.8, "en": 0.2}, 300_000, max_repeats=4)
    assert budgets == {"bn": 240_000, "en": 60_000}
    got = {"bn": 0, "en": 0}
    for line in sampling.iter_sample(prepared, budgets):
        got["bn" if any("\u0980" <= c <= "\u09ff" for c in line) else "en"] += len(line)
    # Bangla has less than 240k characters of training text: with --max-repeats 4 it is cycled to its share
    assert prepared.languages["bn"].train_chars < 240_000 <= got["bn"] < 240_000 + 20_000
    assert 60_000 <= got["en"] < 60_000 + 20_000
    # by default (never cycled) it is capped at its text, read once
    bn = prepared.languages["bn"].train_chars
    assert sampling.sample_budgets(prepared, {"bn": 0.8, "en": 0.2}, 300_000)["bn"] == bn


def _prepared_of(chars):
    langs = {k: sampling.LanguageText(k, Path(f"{k}.txt"), n, ["held"]) for k, n in chars.items()}
    return sampling.PreparedText(langs, [], "")


def test_a_language_with_little_text_is_capped_and_the_others_fill_the_sample():
    prepared = _prepared_of({"ur": 1_000, "bn": 100_000, "en": 100_000})
    thirds = dict.fromkeys(prepared.languages, 1 / 3)
    assert sampling.sample_budgets(prepared, thirds, 90_000) == {"ur": 1_000, "bn": 44_500, "en": 44_500}
    described = sampling.describe_sample(prepared, thirds, 90_000)
    assert described["ur"].share == pytest.approx(1_000 / 90_000) and described["ur"].repeats == 1
    assert "ur: capped at 1,000 characters" in described["ur"].note and "1.1% share instead of 33.3%" in described["ur"].note
    assert described["bn"].note == "" and described["bn"].share == pytest.approx(44_500 / 90_000)
    # cycling only when asked, and only up to max_repeats times
    assert sampling.sample_budgets(prepared, thirds, 90_000, max_repeats=3) == {"ur": 3_000, "bn": 43_500, "en": 43_500}
    cycled = sampling.describe_sample(prepared, thirds, 9_000, max_repeats=5)
    assert cycled["ur"].sample_chars == 3_000 and "cycled 3.00 times" in cycled["ur"].note
    # two languages capped in turn (the second only once the first's characters are shared out)
    prepared = _prepared_of({"ur": 1_000, "te": 30_000, "bn": 100_000})
    thirds = dict.fromkeys(prepared.languages, 1 / 3)
    assert sampling.sample_budgets(prepared, thirds, 90_000) == {"ur": 1_000, "te": 30_000, "bn": 59_000}
    # every language capped: the sample is smaller than asked, never cycled
    assert sum(sampling.sample_budgets(prepared, thirds, 10**7).values()) == 131_000


def test_the_scarcest_language_bounds_the_default_sample_and_says_so():
    prepared = _prepared_of({"ur": 1_000, "bn": 100_000})
    shares = {"ur": 0.25, "bn": 0.75}
    assert sampling.sample_budgets(prepared, shares, None) == {"ur": 1_000, "bn": 3_000}
    described = sampling.describe_sample(prepared, shares, None)
    assert "ur: its 1,000 characters bound the sample (4,000 in all)" in described["ur"].note
    assert described["bn"].note == "" and described["bn"].text_chars == 100_000
    with pytest.raises(ValueError, match="at least 1"):
        sampling.sample_budgets(prepared, shares, None, max_repeats=0)


def test_prepare_text_normalises_and_hashes(tmp_path):
    src = tmp_path / "bn.txt"
    lines = [f"লাইন {i} য়" for i in range(100)]  # U+09DF: NFC decomposes it
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    a = sampling.prepare_text([TextSource("bn", str(src))], tmp_path / "a", holdout=0.25, progress=False)
    b = sampling.prepare_text([TextSource("bn", str(src))], tmp_path / "b", holdout=0.25, progress=False)
    assert a.sha256 == b.sha256
    lt = a.languages["bn"]
    assert len(lt.validation) == 40 and "\u09df" not in "".join(lt.validation)  # blocks of 20, every 4th
    assert "\u09af\u09bc" in lt.train_path.read_text(encoding="utf-8")
    assert a.sources[0].documents == 100


def test_holdout_split_keeps_big_sources_as_before_and_splits_a_small_one():
    big = [f"d{i}" for i in range(1200)]
    held = [t for h, t in sampling.holdout_split(big, 0.02) if h]
    assert held == big[:20] + big[1000:1020]  # every 50th block of 20, starting with the first, as always
    assert [t for _, t in sampling.holdout_split(big, 0.02)] == big  # order kept
    at_500 = [f"d{i}" for i in range(500)]  # the smallest source split in blocks at 0.02: 4 % held
    assert [t for h, t in sampling.holdout_split(at_500, 0.02) if h] == at_500[:20]
    assert [t for h, t in sampling.holdout_split(at_500[:499], 0.02) if h] == at_500[489:499]  # its last 2 %
    for n in (2, 15, 20, 120):
        small = [f"d{i}" for i in range(n)]
        split = list(sampling.holdout_split(small, 0.02))
        n_held = max(1, round(n * 0.02))
        assert [t for h, t in split if h] == small[-n_held:]  # the last documents measured
        assert [t for h, t in split if not h] == small[:-n_held]
    assert [h for h, _ in sampling.holdout_split(["only"], 0.02)] == [False]


def test_a_source_of_twenty_documents_or_fewer_trains(tmp_path):
    """Finding: a source of 20 documents or fewer could not be trained, whatever --holdout, and the error
    advised changing --holdout."""
    bn = tmp_path / "bn.txt"
    bn.write_text("".join(f"আমার সোনার বাংলা, আমি তোমায় ভালোবাসি {i}।\n" for i in range(15)), encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("bn", str(bn))], tmp_path / "work", progress=False)
    lt = prepared.languages["bn"]
    assert lt.train_chars > 0 and len(lt.validation) == 1
    one = tmp_path / "one.txt"
    one.write_text("একটি মাত্র বাক্য।\n", encoding="utf-8")
    with pytest.raises(ValueError, match="1 non-empty document.*at least two are needed") as e:
        sampling.prepare_text([TextSource("bn", str(one))], tmp_path / "work2", progress=False)
    assert "--holdout" not in str(e.value)


def _words(rng, n):
    return " ".join(rng.choice(["river", "stone", "light", "north", "paper", "green", "quiet", "glass", "ember",
                                "cloud", "field", "sharp", "amber", "wheel", "crown", "storm"]) + str(rng.randrange(50))
                    for _ in range(n))


def test_the_validation_slice_is_drawn_across_all_sources_not_filled_from_the_first(tmp_path):
    """Finding (issue 29): the slice was filled from the sources in the order given, so with en/*.txt.gz it
    was 28 % templated dialogue and 0.1 % Wikipedia, two thirds of the English text."""
    import random

    rng = random.Random(0)
    first, second = tmp_path / "dialogue-a.txt", tmp_path / "wiki-b.txt"
    first.write_text("".join(f"first {_words(rng, 12)}\n" for _ in range(2000)), encoding="utf-8")
    second.write_text("".join(f"second {_words(rng, 12)}\n" for _ in range(6000)), encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("en", str(first)), TextSource("en", str(second))],
                                     tmp_path / "work", holdout=0.1, max_validation_chars=20_000, progress=False)
    slice_ = prepared.languages["en"].validation
    chars = {k: sum(len(t) for t in slice_ if t.startswith(k)) for k in ("first", "second")}
    assert 19_000 <= sum(chars.values()) <= 21_000
    # in proportion to the sources' text (1 : 3), not the first source's held text first
    assert chars["second"] / chars["first"] == pytest.approx(3, rel=0.15)
    a, b = prepared.sources
    assert (a.genre, b.genre) == ("dialogue", "wiki")
    assert a.slice_chars == chars["first"] and b.slice_chars == chars["second"]
    assert a.slice_documents + b.slice_documents == len(slice_)
    # evenly spread over what the second source held aside (its held text is 3x its quota): not its head
    held = [t for h, t in sampling.holdout_split(second.read_text().splitlines(), 0.1) if h]
    got = [held.index(t) for t in slice_ if t.startswith("second")]
    assert max(got) > len(held) / 2


def test_validation_documents_that_duplicate_training_lines_are_dropped(tmp_path):
    """The slice must not be learnable from the sample: a held-aside line that a training line repeats
    exactly (case and punctuation aside) or nearly (one word of sixty changed: Jaccard 0.96 on word
    5-grams, which the corpus build's bands catch with probability 0.996) is not measured."""
    import random

    rng = random.Random(1)
    template = _words(rng, 60)
    lines = []
    for i in range(1200):
        if i % 3 == 0:
            lines.append(template.upper() + "!" if i % 2 else template)  # the same words
        elif i % 3 == 1:
            lines.append(template.rsplit(" ", 1)[0] + f" word{i}")  # near: the last of sixty words differs
        else:
            lines.append(_words(rng, 60))
    src = tmp_path / "dialogue-sgd.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("en", str(src))], tmp_path / "work", holdout=0.1, progress=False)
    lt, info = prepared.languages["en"], prepared.sources[0]
    train = set(lt.train_path.read_text(encoding="utf-8").splitlines())
    assert lt.validation and not any(t.startswith(template.rsplit(" ", 1)[0]) for t in lt.validation)
    assert not set(lt.validation) & train
    held = sum(1 for h, _ in sampling.holdout_split(lines, 0.1) if h)
    assert info.duplicates_dropped == held - len(lt.validation) >= held // 2


def test_validation_quotas_fill_the_cap_from_the_sources_that_have_text():
    # proportional, the small source at its 5 % floor; a source short of its quota gives the rest away
    assert sampling.validation_quotas([900, 100], [1000, 1000], 1000) == [900, 100]
    assert sampling.validation_quotas([990, 10], [1000, 1000], 1000) == pytest.approx([952, 47], abs=1)
    assert sampling.validation_quotas([500, 500], [100, 5000], 1000) == [100, 900]
    assert sampling.validation_quotas([500, 500], [100, 0], 1000) == [100, 0]


def test_a_part_of_a_language_is_drawn_from_all_its_sources_not_the_first(tmp_path):
    """Finding (issue 29): the sample read each language's training file from its head, so at a 50 % share of
    every shared bn and en file English was its first sources (dialogue, fiction, news) and almost no
    Wikipedia, two thirds of its text."""
    import random

    rng = random.Random(2)
    first, second = tmp_path / "dialogue.txt", tmp_path / "wiki.txt"
    first.write_text("".join(f"first {_words(rng, 10)}\n" for _ in range(1000)), encoding="utf-8")
    second.write_text("".join(f"second {_words(rng, 10)}\n" for _ in range(3000)), encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("en", str(first)), TextSource("en", str(second))],
                                     tmp_path / "work", progress=False)
    total = prepared.languages["en"].train_chars
    lines = list(sampling.iter_sample(prepared, {"en": total // 4}))
    got = {k: sum(len(x) for x in lines if x.startswith(k)) for k in ("first", "second")}
    assert total // 4 <= sum(got.values()) < total // 4 + 200
    assert got["second"] / got["first"] == pytest.approx(3, rel=0.05)  # the sources' 1 : 3, not all "first"
    assert len(set(lines)) == len(lines)  # no line twice while the file has more


@pytest.mark.parametrize("holdout", [0.02, 0.1])
@pytest.mark.parametrize("n", [21, 50, 100, 500, 1000, 5000])
def test_the_holdout_is_proportional_to_a_source_of_any_size(n, holdout):
    """Finding: a source of 21 to 1,000 documents held its first block of 20 aside, so at the default
    holdout (0.02) a 21-document source trained on 1."""
    docs = [f"d{i}" for i in range(n)]
    split = list(sampling.holdout_split(iter(docs), holdout))
    assert [t for _, t in split] == docs  # each document once, in order
    held = sum(h for h, _ in split)
    assert 1 <= held <= max(1, 2 * holdout * n) + 1e-9  # every language has something to measure
    assert n - held >= n / 2


def _paragraphs(rng, n):
    return "\n".join(_words(rng, 12) for _ in range(n))


def test_a_multi_paragraph_document_in_training_is_not_measured(tmp_path):
    """Finding: held-aside documents were compared with single training lines, so a JSONL document with
    newlines was never found in training: with every document present twice, the whole bn and en slices
    were also trained on."""
    import json
    import random

    rng = random.Random(3)
    docs = [_paragraphs(rng, 3 + i % 3) + ("\n\n" + _words(rng, 4) if i % 2 else "") for i in range(90)]
    src = tmp_path / "news.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs + docs), encoding="utf-8")
    prepared = sampling.prepare_text([TextSource("en", str(src))], tmp_path / "work", holdout=0.25, progress=False)
    lt = prepared.languages["en"]
    train = "\n" + lt.train_path.read_text(encoding="utf-8")
    trained = [d for d in lt.validation if "\n" + "\n".join(x for x in d.splitlines() if x.strip()) + "\n" in train]
    assert lt.validation and trained == []
    # exactly the held documents whose other copy was trained on are dropped: of the 90 documents, 0-9 and
    # 80-89 have both copies held, 10-19 (the first copy) and 70-79 (the second) only one
    held = [i for i, (h, _) in enumerate(sampling.holdout_split(docs + docs, 0.25)) if h]
    once = [i for i in held if (i + 90) % 180 not in held]
    assert prepared.sources[0].duplicates_dropped == len(once) == 20 and len(lt.validation) == len(held) - 20


def test_a_held_document_is_dropped_when_training_lines_make_up_most_of_it(tmp_path):
    import random

    rng = random.Random(4)
    paras = [_words(rng, 20) for _ in range(12)]
    train = tmp_path / "en.txt"
    train.write_text("".join(p + "\n" for p in paras[:8]) + " ".join(paras[8:10]) + "\n", encoding="utf-8")
    held = ["\n".join(paras[:4]),  # every paragraph trained on
            "\n".join(paras[4:8]) + "\n" + _words(rng, 3),  # four long paragraphs trained on, one short line new
            "\n\n".join(paras[8:10]),  # trained on as one line: the same words
            "\n".join([paras[0], paras[10], paras[11]]),  # a third trained on: measured
            paras[11]]  # a new line: measured
    kept = sampling.drop_duplicates_of_training([held], train, sampling.DedupConfig())
    assert kept == [held[3:]]


def test_the_default_cycles_only_a_sample_too_small_for_the_vocabulary_and_keeps_the_shares(prepared):
    shares = {"bn": 0.7, "en": 0.3}
    text = {k: lt.train_chars for k, lt in prepared.languages.items()}
    once = sampling.sample_budgets(prepared, shares, None, 1)
    assert max(once[k] / text[k] for k in once) == pytest.approx(1, abs=1e-4)  # the scarce language bounds it
    total = sum(once.values())
    # big enough: as never cycled
    assert sampling.sample_budgets(prepared, shares, None, None, min_chars=total) == once
    # too small: grown to the floor, every share kept, nobody past AUTO_REPEATS
    grown = sampling.sample_budgets(prepared, shares, None, None, min_chars=int(total * 1.5))
    assert sum(grown.values()) == pytest.approx(total * 1.5, rel=1e-4)
    assert all(grown[k] / sum(grown.values()) == pytest.approx(shares[k], rel=1e-4) for k in shares)
    # a floor past what AUTO_REPEATS allows: the scarce language cycled at most that often, and the sample no
    # larger than the one in which the other language is used whole (cycling both gains no text)
    most = sampling.sample_budgets(prepared, shares, None, None, min_chars=total * 100)
    assert max(most[k] / text[k] for k in most) <= sampling.AUTO_REPEATS * (1 + 1e-4)
    assert min(most[k] / text[k] for k in most) == pytest.approx(1, abs=1e-4)
    assert sum(most.values()) > total * 1.5
    # asked for never (1) or a sample size: no cycling, whatever the floor
    assert sampling.sample_budgets(prepared, shares, None, 1, min_chars=total * 100) == once
    fixed = sampling.sample_budgets(prepared, shares, 50_000, None, min_chars=total * 100)
    assert fixed == sampling.sample_budgets(prepared, shares, 50_000, 1)
    # and the report says why the text was cycled
    notes = [v.note for v in sampling.describe_sample(prepared, shares, None, None, total * 100).values() if v.note]
    assert notes and all("cycled" in n and "--max-repeats 1 never cycles" in n for n in notes)
