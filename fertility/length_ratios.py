"""How many characters each language needs to say what English says: length ratios from parallel text.

A language's premium (:mod:`fertility.premium`) is what its users pay: the tokens a text costs over the tokens
its translation costs in the reference language. On parallel text it is counted. On a language's own text only
characters per token can be counted; the two meet through the language's *length ratio*, its characters for a
text over English's characters for the same text. A text of ``c`` English characters takes ``ratio * c``
characters, so ``ratio * c / cpt`` tokens, and against a reference language::

    premium(lang) = (ratio(lang) / cpt(lang)) / (ratio(ref) / cpt(ref))

Equal chars/token is therefore fair only between languages of equal length ratios. Tamil and Malayalam take
24-27 % more characters than English for the same Tatoeba sentences (the shipped sample's ratios, 1.268 and
1.242), so a vocabulary that gives them English's chars/token still charges them that much more per sentence.

The ratios come from a small parallel sample shipped with the project (:data:`SAMPLE_DIR`, its ``SOURCES.md``
says what and under which licence): up to 1,000 Tatoeba sentences with their English translations for each of
28 languages. A language's ratio is its total characters over the English side's, on its own pairs. A language
the sample lacks gets no ratio (:func:`length_ratio` says so), and a caller falls back to equal chars/token.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from fertility.text import TextSource, iter_documents

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "data" / "tatoeba"
SAMPLE_NAME = "the shipped Tatoeba sample"
ENGLISH = "eng_Latn"

# The labels that name each sampled language, besides its FLORES code (the sample's folder names): ISO 639-1
# and 639-3 codes. Labels are compared case-folded, and a BCP-47 region or script subtag is ignored (bn-IN).
ALIASES: dict[str, tuple[str, ...]] = {
    "eng_Latn": ("en", "eng"), "ben_Beng": ("bn", "ben"), "hin_Deva": ("hi", "hin"), "mar_Deva": ("mr", "mar"),
    "tam_Taml": ("ta", "tam"), "tel_Telu": ("te", "tel"), "mal_Mlym": ("ml", "mal"), "urd_Arab": ("ur", "urd"),
    "arb_Arab": ("ar", "ara", "arb"), "pes_Arab": ("fa", "fas", "pes"), "rus_Cyrl": ("ru", "rus"),
    "ukr_Cyrl": ("uk", "ukr"), "ell_Grek": ("el", "ell"), "tha_Thai": ("th", "tha"),
    "zho_Hans": ("zh", "zho", "cmn", "zho_Hant"), "heb_Hebr": ("he", "heb"), "kor_Hang": ("ko", "kor"),
    "amh_Ethi": ("am", "amh"), "kat_Geor": ("ka", "kat"), "hye_Armn": ("hy", "hye"), "deu_Latn": ("de", "deu"),
    "fra_Latn": ("fr", "fra"), "spa_Latn": ("es", "spa"), "ita_Latn": ("it", "ita"), "por_Latn": ("pt", "por"),
    "ron_Latn": ("ro", "ron"), "tur_Latn": ("tr", "tur"), "vie_Latn": ("vi", "vie"), "ind_Latn": ("id", "ind"),
}
_CODES = {name.casefold(): code for code, names in ALIASES.items() for name in (code, *names)}


@dataclass(frozen=True)
class LengthRatio:
    """One language's characters for a text over English's for the same text, and where the figure came from."""

    ratio: float
    source: str  # "tatoeba ben_Beng (1,000 pairs)", "English", or why there is none
    estimated: bool  # False: no parallel text, 1.0 assumed (equal chars/token is then the best guess)

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": round(self.ratio, 6)}


def sample_code(label: str) -> str | None:
    """The sample's code for a language label (``bn``, ``BEN``, ``ben_Beng``, ``bn-IN`` -> ``ben_Beng``), or
    None for a language the sample does not have."""
    folded = label.casefold()
    return _CODES.get(folded) or _CODES.get(folded.split("-", 1)[0])


@cache
def _sample_ratio(folder: Path, code: str) -> tuple[float, int]:
    own = [d.text for d in iter_documents(TextSource(code, str(folder / f"{code}.txt.gz")))]
    english = [d.text for d in iter_documents(TextSource(ENGLISH, str(folder / f"{ENGLISH}.txt.gz")))]
    return sum(map(len, own)) / sum(map(len, english)), len(own)


def length_ratio(label: str) -> LengthRatio:
    """``label``'s length ratio against English from the shipped sample; 1.0, not ``estimated``, without one."""
    code = sample_code(label)
    if code == ENGLISH:
        return LengthRatio(1.0, "English", True)
    if code is None or not (SAMPLE_DIR / code).is_dir():
        return LengthRatio(1.0, f"no parallel text for {label} in {SAMPLE_NAME}", False)
    ratio, pairs = _sample_ratio(SAMPLE_DIR / code, code)
    return LengthRatio(ratio, f"tatoeba {code} ({pairs:,} pairs)", True)


def length_ratios(labels: Iterable[str]) -> dict[str, LengthRatio]:
    """:func:`length_ratio` of every label."""
    return {label: length_ratio(label) for label in labels}


def premiums(chars_per_token: Mapping[str, float], ratios: Mapping[str, LengthRatio], reference: str) -> dict[str, float]:
    """Each language's estimated premium against ``reference`` from its chars/token on its own text."""
    cost = {k: ratios[k].ratio / cpt for k, cpt in chars_per_token.items() if cpt > 0}
    return {k: c / cost[reference] for k, c in cost.items()}


def english_chars_per_token(chars_per_token: Mapping[str, float], ratios: Mapping[str, LengthRatio]) -> dict[str, float]:
    """Each language's chars/token counted in English characters (its own over its length ratio): equal values
    are equal premiums, so balancing these balances what the same content costs."""
    return {k: cpt / ratios[k].ratio for k, cpt in chars_per_token.items()}


def describe(ratios: Mapping[str, LengthRatio]) -> str:
    """One line: which estimate each language's premium uses."""
    known = [f"{k} {r.ratio:.2f}" for k, r in ratios.items() if r.estimated]
    missing = [k for k, r in ratios.items() if not r.estimated]
    if not known:
        return f"no parallel text for {', '.join(missing)} in {SAMPLE_NAME}: equal chars/token assumed"
    line = f"length ratios to English from {SAMPLE_NAME}: " + ", ".join(known)
    if missing:
        line += f"; no parallel text for {', '.join(missing)}: equal chars/token assumed for {'it' if len(missing) == 1 else 'them'}"
    return line
