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
