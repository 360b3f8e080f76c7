import numpy as np
import pytest

from fertility.scripts import SCRIPT_NAMES, codepoints, is_mark, script_runs, scripted_batch


def names(ids):
    return [SCRIPT_NAMES[i] for i in ids]


def test_code_mixed_sentence_splits_at_the_words():
    # digits, comma, spaces and the danda (all Common) take the script of what precedes them
    assert script_runs("আমি Python শিখি, ১২৩ 42।") == [
        ("Bengali", "আমি "), ("Latin", "Python "), ("Bengali", "শিখি, ১২৩ 42।")]
    # at the start of a document, the following script is used
    assert script_runs("42, আমি") == [("Bengali", "42, আমি")]
    assert script_runs("!!") == [("Common", "!!")]


def test_clusters_take_the_script_of_their_base():
    # e + COMBINING ACUTE (Inherited) is one Latin cluster; ZWNJ/hasanta/nukta stay with their Bengali letter
    assert script_runs("cafe\u0301") == [("Latin", "cafe\u0301")]
    batch = scripted_batch(["ক্\u200cষ য়"])
    assert batch.cluster_start.tolist() == [0, 3, 4, 5]  # ক্‌ | ষ | space | য়
    assert set(names(batch.char_script)) == {"Bengali"}


def test_conjunct_is_one_cluster_and_zwnj_breaks_it():
    assert scripted_batch(["ক্ষ"]).cluster_start.tolist() == [0]
    assert scripted_batch(["ক্\u200cষ"]).cluster_start.tolist() == [0, 3]


def test_neighbours_do_not_cross_documents():
    batch = scripted_batch(["123", "abc", "", "১ কি"])
    assert names(batch.char_script) == ["Common"] * 3 + ["Latin"] * 3 + ["Bengali"] * 4
    assert batch.doc_char_start.tolist() == [0, 3, 6, 6, 10]
    assert batch.doc_byte_start.tolist() == [0, 3, 6, 6, 6 + 3 + 1 + 6]


def test_marks():
    assert is_mark(codepoints("কি়্a\u0301")).tolist() == [False, True, True, True, False, True]


EDGE_CASES = ["", "a", "\r\n", "a\r\nb", "ক্ষ", "ক্\u200cষ", "র\u200d্যাব", "অ্যা", "্ক", "👍🏽x", "🇧🇩🇮🇳", "한국어",
              "\u0600١", "e\u0301\u0301", "ক\u09cd", "\u200dক", "ক্\u200d্ষ", "\tি", "a\u0308\u200d\u0915", "ি়ক"]


def sequential_cluster_starts(texts):
    """Cluster starts from the one-code-point-at-a-time rules, document by document."""
    from fertility.graphemes import _classify, _gcb_table, _incb_table, _pict_table, cluster_starts_sequential

    starts, offset = [], 0
    for t in texts:
        cps = codepoints(t)
        _classify(cps)
        local = cluster_starts_sequential(_gcb_table[cps], _incb_table[cps], _pict_table[cps])
        starts += (offset + np.flatnonzero(local)).tolist()
        offset += len(t)
    return starts


def test_array_clusters_equal_the_sequential_rules_on_edge_cases_and_the_sample(sample_dir):
    import gzip

    assert scripted_batch(EDGE_CASES).cluster_start.tolist() == sequential_cluster_starts(EDGE_CASES)
    for path in sorted(sample_dir.glob("*/*.txt.gz")):
        lines = [x for x in gzip.decompress(path.read_bytes()).decode().split("\n")[:300] if x]
        assert scripted_batch(lines).cluster_start.tolist() == sequential_cluster_starts(lines), path


@pytest.mark.shared
def test_array_clusters_equal_the_sequential_rules_on_other_scripts(shared_dir):
    import gzip

    for path in sorted((shared_dir / "data" / "multi").glob("*/*.txt.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = [next(f).rstrip("\n") for _ in range(40)]
        assert scripted_batch(lines).cluster_start.tolist() == sequential_cluster_starts(lines), path
