"""token_segments: one text's tokens with the character and grapheme-cluster boundary flags, hand-checked."""

from fertility import load_tokenizer, token_segments


def test_o200k_cuts_the_vowel_sign_from_its_letter():
    # বাংলায় = ব া ং ল া য ় ; o200k splits it after ল, so the vowel sign া starts a token inside the cluster লা.
    segments = token_segments(load_tokenizer("o200k_base"), "বাংলায়")
    assert [s.label for s in segments] == ["বাংল", "ায়"]
    assert all(s.whole_chars for s in segments)
    assert [s.cuts_cluster for s in segments] == [False, True]


def test_gpt2_cuts_bangla_characters_into_bytes():
    word = "কিন্তু"
    segments = token_segments(load_tokenizer("gpt2"), word)
    assert b"".join(bytes.fromhex(s.label.replace(" ", "")) for s in segments) == word.encode()
    assert not any(s.whole_chars for s in segments)
    # The second token starts at byte 2, inside ক (bytes 0-2): a cut inside a character is a cut inside its cluster.
    assert segments[1].byte_start == 2 and segments[1].cuts_cluster
    assert segments[0].byte_start == 0 and not segments[0].cuts_cluster


def test_whole_english_word_is_one_clean_token():
    (segment,) = token_segments(load_tokenizer("gpt2"), "language")
    assert (segment.label, segment.whole_chars, segment.cuts_cluster) == ("language", True, False)
