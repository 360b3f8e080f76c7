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
    budgets = sampling.sample_budgets(prepared, {"bn": 0.8, "en": 0.2}, 300_000)
    assert budgets == {"bn": 240_000, "en": 60_000}
    got = {"bn": 0, "en": 0}
    for line in sampling.iter_sample(prepared, budgets):
        got["bn" if any("\u0980" <= c <= "\u09ff" for c in line) else "en"] += len(line)
    # Bangla has less than 240k characters of training text, so it is cycled to reach its share
    assert prepared.languages["bn"].train_chars < 240_000 <= got["bn"] < 240_000 + 20_000
    assert 60_000 <= got["en"] < 60_000 + 20_000


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


def test_holdout_split_keeps_big_sources_as_before_and_splits_a_single_block():
    big = [f"d{i}" for i in range(120)]
    held = [t for h, t in sampling.holdout_split(big, 0.02) if h]
    assert held == big[:sampling.HOLDOUT_BLOCK]  # the first block, as always
    assert [t for _, t in sampling.holdout_split(big, 0.02)] == big  # order kept
    for n in (2, 15, 20):
        small = [f"d{i}" for i in range(n)]
        split = list(sampling.holdout_split(small, 0.02))
        assert [t for h, t in split if h] == small[-1:]  # the last document measured
        assert [t for h, t in split if not h] == small[:-1]
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
