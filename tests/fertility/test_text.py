import gzip
import json

import pytest

from fertility.text import Document, TextError, TextSource, iter_documents, parse_text_arg


def test_parse_text_arg_grammar(tmp_path):
    assert parse_text_arg("bn=data/x.txt.gz") == TextSource("bn", "data/x.txt.gz")
    assert parse_text_arg("bn=data.jsonl:content") == TextSource("bn", "data.jsonl", "content")
    assert parse_text_arg("bn=hf:HuggingFaceFW/fineweb-2:ben_Beng") == TextSource(
        "bn", "hf:HuggingFaceFW/fineweb-2", "text", "ben_Beng", "train")
    assert parse_text_arg("en=hf:org/ds:cfg:validation:body") == TextSource(
        "en", "hf:org/ds", "body", "cfg", "validation")
    odd = tmp_path / "a:b.txt"
    odd.write_text("x\n")
    assert parse_text_arg(f"bn={odd}").spec == str(odd)  # an existing path with a colon is taken whole
    for bad in ("bn", "=x.txt", "bn="):
        with pytest.raises(TextError, match="LANG=PATH"):
            parse_text_arg(bad)


def test_txt_gz_streams_lines_with_numbers(sample_dir):
    docs = list(iter_documents(str(sample_dir / "parallel" / "ben_Beng.txt.gz"), max_chars=200))
    raw = gzip.decompress((sample_dir / "parallel" / "ben_Beng.txt.gz").read_bytes()).decode().split("\n")
    assert [d.text for d in docs] == raw[: len(docs)]
    assert [d.line for d in docs] == list(range(1, len(docs) + 1))
    assert sum(len(d.text) for d in docs[:-1]) < 200 <= sum(len(d.text) for d in docs)


def test_blank_lines_skipped_and_crlf_stripped(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes("\ufeffএক\r\n\n   \nদুই\n".encode())
    counters = {}
    docs = list(iter_documents(TextSource("bn", str(p)), counters=counters))
    assert docs == [Document("এক", str(p), 1), Document("দুই", str(p), 4)]
    assert counters["documents"] == 2 and counters["chars"] == len("এক") + len("দুই") == 5


def test_jsonl_field_and_errors(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text(json.dumps({"content": "আমি", "id": 1}) + "\n" + json.dumps({"content": "তুমি"}) + "\n")
    assert [d.text for d in iter_documents(TextSource("bn", str(p), "content"))] == ["আমি", "তুমি"]
    with pytest.raises(TextError, match=r"d\.jsonl:1: no field 'text'"):
        list(iter_documents(TextSource("bn", str(p))))
    p.write_text(json.dumps({"text": "ok"}) + "\n" + '{"text": "bad \\ud800 half"}' + "\n")
    with pytest.raises(TextError, match=r"d\.jsonl:2: field 'text' holds a lone surrogate"):
        list(iter_documents(str(p)))
    p.write_text(json.dumps({"text": "ok"}) + "\n{broken\n")
    with pytest.raises(TextError, match=r"d\.jsonl:2: not a JSON object"):
        list(iter_documents(str(p)))


def test_parquet_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"body": ["আমি", None, "তুমি"], "n": [1, 2, 3]}), p)
    docs = list(iter_documents(parse_text_arg(f"bn={p}:body")))
    assert [(d.text, d.line) for d in docs] == [("আমি", 1), ("তুমি", 3)]
    with pytest.raises(TextError, match="no column 'text'"):
        list(iter_documents(str(p)))


@pytest.mark.slow  # importing `datasets` alone takes seconds
def test_datasets_folder_and_hub_layout(tmp_path):
    import datasets

    folder = tmp_path / "saved"
    datasets.Dataset.from_dict({"text": ["এক", "দুই", "তিন"]}).save_to_disk(str(folder))
    assert [d.text for d in iter_documents(str(folder))] == ["এক", "দুই", "তিন"]
    # hf:NAME goes through datasets.load_dataset(..., streaming=True); a local folder laid out like a hub repo
    hub = tmp_path / "hubrepo" / "ben_Beng"
    hub.mkdir(parents=True)
    (hub / "train.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ["আমি", "গান"]))
    docs = list(iter_documents(TextSource("bn", f"hf:{tmp_path / 'hubrepo'}", config=None, split="train")))
    assert [d.text for d in docs] == ["আমি", "গান"]


def test_non_utf8_strict_and_skip(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes("ভালো\n".encode() + b"caf\xe9\n" + "শেষ\n".encode())
    with pytest.raises(TextError, match=r"bad\.txt:2: not valid UTF-8"):
        list(iter_documents(str(p)))
    counters = {}
    assert [d.text for d in iter_documents(str(p), errors="skip", counters=counters)] == ["ভালো", "শেষ"]
    assert counters["bad_utf8"] == 1


def test_truncated_gzip(tmp_path):
    p = tmp_path / "cut.txt.gz"
    data = gzip.compress(("বাংলা লেখা\n" * 5000).encode())
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TextError, match=r"cut\.txt\.gz:\d+: the gzip stream is truncated"):
        list(iter_documents(str(p)))


def test_missing_and_empty(tmp_path):
    with pytest.raises(TextError, match=r"nope\.txt: no such file"):
        list(iter_documents(str(tmp_path / "nope.txt")))
    empty = tmp_path / "empty.txt.gz"
    empty.write_bytes(gzip.compress(b"\n\n"))
    with pytest.raises(TextError, match=r"empty\.txt\.gz: no documents"):
        list(iter_documents(str(empty)))


def test_a_line_with_no_newline_is_read_in_bounded_pieces(tmp_path, monkeypatch):
    import fertility.text

    monkeypatch.setattr(fertility.text, "PIECE_BYTES", 4096)
    words = [f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(20_000)]
    text = " ".join(words)  # about 200 kB, one line, no newline at the end
    p = tmp_path / "one-line.txt"
    p.write_bytes(text.encode())
    docs = list(iter_documents(str(p)))
    assert len(docs) > 20 and all(d.line == 1 for d in docs)
    assert max(len(d.text.encode()) for d in docs) <= 2 * 4096
    assert "".join(d.text for d in docs) == text  # every piece ends after a space: nothing lost, no word cut
    assert all(d.text.endswith(" ") for d in docs[:-1])


def test_a_long_line_without_whitespace_is_cut_between_characters(tmp_path, monkeypatch):
    import fertility.text

    monkeypatch.setattr(fertility.text, "PIECE_BYTES", 1000)
    text = "অআইঈউ" * 3000
    p = tmp_path / "no-space.txt.gz"
    p.write_bytes(gzip.compress(text.encode() + b"\nnext line\n"))
    docs = list(iter_documents(str(p)))
    assert "".join(d.text for d in docs[:-1]) == text and docs[-1].text == "next line" and docs[-1].line == 2
    assert max(len(d.text.encode()) for d in docs) <= 2000


def test_non_utf8_column_in_a_later_piece_counts_characters(tmp_path, monkeypatch):
    import fertility.text

    monkeypatch.setattr(fertility.text, "PIECE_BYTES", 64)
    p = tmp_path / "bad.txt"
    p.write_bytes(("ক " * 100).encode() + b"\xff")
    with pytest.raises(TextError, match=r"bad\.txt:1: not valid UTF-8 \(byte 0xff at character 201\)"):
        list(iter_documents(str(p)))


def test_a_jsonl_record_over_the_limit_is_refused_not_read(tmp_path, monkeypatch):
    import fertility.text

    monkeypatch.setattr(fertility.text, "PIECE_BYTES", 1024)
    monkeypatch.setattr(fertility.text, "MAX_RECORD_BYTES", 8192)
    p = tmp_path / "big.jsonl"
    p.write_text('{"text": "ok"}\n{"text": "' + "x" * 20_000 + '"}\n')
    with pytest.raises(TextError, match=r"big\.jsonl:2: a line longer than"):
        list(iter_documents(str(p)))


def test_a_5_mib_line_comes_as_pieces_of_at_most_2_mib(tmp_path):
    """At the real piece size: the line is never held whole."""
    p = tmp_path / "one-line.txt"
    p.write_bytes(("শব্দ word " * 400_000).encode())  # 5.6 MB, no newline
    sizes = [len(d.text.encode()) for d in iter_documents(str(p))]
    assert len(sizes) >= 3 and max(sizes) <= 2 << 20 and sum(sizes) == p.stat().st_size


def test_max_chars_holds_within_one_long_line(tmp_path):
    """A one-line file longer than the cap: the document is cut at the cap (it was one 1 MiB piece, ten times
    --max-chars 100000), and only the head of the file is read."""
    words = [f"শব্দ{i}" if i % 3 else f"word{i}" for i in range(400_000)]
    p = tmp_path / "one-line.txt"
    p.write_bytes(" ".join(words).encode())  # about 4.6 MB, no newline
    counters = {}
    docs = list(iter_documents(str(p), max_chars=100_000, counters=counters))
    assert sum(len(d.text) for d in docs) <= 100_000 and sum(len(d.text) for d in docs) > 99_000
    assert counters["chars"] == sum(len(d.text) for d in docs)
    assert docs[-1].text.endswith(" ") and " ".join(words).startswith("".join(d.text for d in docs))
    # whole documents stay whole: a line shorter than the cap is kept, even past the cap
    short = tmp_path / "lines.txt"
    short.write_text("a" * 60 + "\n" + "b" * 60 + "\n" + "c" * 60 + "\n")
    assert [len(d.text) for d in iter_documents(str(short), max_chars=100)] == [60, 60]


def test_a_field_on_a_text_file_is_refused(tmp_path):
    p = tmp_path / "x.txt"
    p.write_text("আমি\n")
    for spec in (f"bn={p}:text", f"bn={p}.gz:body"):
        with pytest.raises(TextError, match=r"a \.txt file has no fields"):
            parse_text_arg(spec)
    assert parse_text_arg(f"bn={tmp_path / 'x.jsonl'}:body").field == "body"


def test_a_symlink_loop_is_not_called_missing(tmp_path):
    loop = tmp_path / "loop.txt"
    loop.symlink_to(loop)
    with pytest.raises(TextError) as e:
        list(iter_documents(str(loop)))
    assert "loop.txt" in str(e.value) and "no such file" not in str(e.value)
    assert "symbolic links" in str(e.value)


def test_a_hub_dataset_offline_fails_at_once_in_one_line(monkeypatch):
    """No network: a quick check of the hub's address fails before datasets' retries (11 lines, 25 s);
    with HF_HUB_OFFLINE set the check is skipped (datasets looks in its cache only). No network is used."""
    import socket

    import datasets

    def unreachable(*args, **kwargs):
        raise OSError("network is unreachable")

    def not_called(*args, **kwargs):
        pytest.fail("datasets.load_dataset was called")

    import urllib.request

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(urllib.request, "getproxies", dict)  # no proxy: the direct check applies
    monkeypatch.setattr(socket, "create_connection", unreachable)
    monkeypatch.setattr(datasets, "load_dataset", not_called)
    with pytest.raises(TextError) as e:
        list(iter_documents("hf:no-such/dataset"))
    message = str(e.value)
    assert "\n" not in message and "hf:no-such/dataset" in message and "HF_HUB_OFFLINE" in message
    checked = []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: pytest.fail("network checked offline"))
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: checked.append(a) or iter([{"text": "আমি"}]))
    assert [d.text for d in iter_documents("hf:some/dataset")] == ["আমি"] and checked
    # Behind a proxy a direct connection proves nothing: datasets (which uses the proxy) is left to try.
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(urllib.request, "getproxies", lambda: {"https": "http://proxy.invalid:3128"})
    assert [d.text for d in iter_documents("hf:other/dataset")] == ["আমি"] and len(checked) == 2
