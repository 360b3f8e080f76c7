"""The build report: ``report.json`` (stable schema), ``report.md`` and ``shares.png`` in the shard directory.

It shows what cleaning and dedup removed per source, the corpus side by side in characters, bytes and tokens
(of the build's tokenizer and any comparison tokenizers), the plan, and what the shards hold.
"""

from __future__ import annotations

import io
from dataclasses import asdict
from pathlib import Path

import numpy as np

from common.fileio import atomic_write_bytes, atomic_write_text, write_json
from corpus.mixture.measure import shares
from corpus.mixture.plan import format_plan
from corpus.mixture.prepare import Prepared
from corpus.shards.format import ShardInfo
from fertility.totals import Totals

REPORT_SCHEMA_VERSION = 1


def _jsonable(totals: dict[str, Totals]) -> dict:
    return {k: asdict(v) for k, v in totals.items()}


def report_dict(prepared: Prepared, new_shards: list[ShardInfo], shards_in_manifest: int) -> dict:
    """Everything the report shows, as JSON-ready data: ``prepared`` (its sizes measured once) and the shards
    this build wrote, ``new_shards``, of the ``shards_in_manifest``."""
    sizes, tokenizer = prepared.sizes, prepared.checked.tokenizer.name
    new_train = [s for s in new_shards if s.split == "train"]
    shard_tokens: dict[str, int] = {}
    for s in new_train:
        for lang, n in s.tokens_by_language.items():
            shard_tokens[lang] = shard_tokens.get(lang, 0) + n
    total = sum(shard_tokens.values())
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "tokenizer": asdict(prepared.checked.info),
        "compare_tokenizers": prepared.checked.compare_names,
        "sources": [{"name": s.name, "language": s.language, "counters": dict(sorted(s.counters.items())),
                     "kept": asdict(sizes.corpus_by_source[s.name])} for s in prepared.states],
        # lines, not documents (the counters' other unit): said on its own, as well as per source
        "markup_lines_dropped": sum(s.counters.get("markup_lines_dropped", 0) for s in prepared.states),
        "corpus": _jsonable(sizes.corpus),
        "corpus_shares": shares(sizes.corpus, tokenizer),
        "train": _jsonable(sizes.train),
        "train_shares": shares(sizes.train, tokenizer),
        "validation": _jsonable(sizes.validation),
        "plan": prepared.plan.to_dict(),
        "shards": {"train_tokens_by_language": shard_tokens,
                   "train_shares_with_bos": {k: v / total for k, v in shard_tokens.items()} if total else {},
                   "train_shards": len(new_train), "val_shards": len(new_shards) - len(new_train),
                   "total_shards_in_manifest": shards_in_manifest},
    }


def _md_table(title: str, totals: dict[str, Totals], label: str) -> list[str]:
    if not totals:
        return [f"_{title}: empty_", ""]
    share = shares(totals, label)
    units = list(next(iter(totals.values())).units(label))
    lines = [f"| {title} | " + " | ".join(units) + " |", "|---|" + "---:|" * len(units)]
    for key, t in totals.items():
        cells = [f"{n:,} ({share[u][key]:.1%})" for u, n in t.units(label).items()]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines + [""]


def report_markdown(data: dict, prepared: Prepared) -> str:
    """The report as Markdown."""
    tok, sizes = data["tokenizer"], prepared.sizes
    name, compare = prepared.checked.tokenizer.name, prepared.checked.compare_names
    lines = ["# Corpus build report", "",
             f"Tokenizer `{tok['spec']}` (sha256 `{tok['sha256'][:16]}…`, vocabulary {tok['vocab_size']:,}, "
             f"BOS {tok['bos_id']}); `tokens:{name}` counts its tokens without BOS"
             + (f"; comparison: {', '.join(f'`tokens:{c}`' for c in compare)}" if compare else "") + ".", "",
             "## Cleaning and dedup per source", "",
             "| source | lang | " + " | ".join(_counter_keys(data)) + " |",
             "|---|---|" + "---:|" * len(_counter_keys(data))]
    for s in data["sources"]:
        lines.append(f"| {s['name']} | {s['language']} | "
                     + " | ".join(f"{s['counters'].get(k, 0):,}" for k in _counter_keys(data)) + " |")
    lines += ["", f"Markup/punctuation-only lines dropped inside documents (`markup_lines_dropped`): "
              f"{data['markup_lines_dropped']:,}.",
              "", "## The kept corpus, side by side (share of the column in brackets)", ""]
    lines += _md_table("source", sizes.corpus_by_source, name)
    lines += _md_table("language", sizes.corpus, name)
    lines += ["## The training split (documents repeated as planned)", ""]
    lines += _md_table("language", sizes.train, name)
    lines += ["## Plan", "", "```", format_plan(prepared.plan), "```", "",
              "## Shards", "",
              f"{data['shards']['train_shards']} training shards, shares with BOS: "
              + ", ".join(f"{k}={v:.4f}" for k, v in data["shards"]["train_shares_with_bos"].items())
              + f"; {data['shards']['val_shards']} validation shards.", "", "![shares](shares.png)", ""]
    return "\n".join(lines)


def _counter_keys(data: dict) -> list[str]:
    keys = sorted({k for s in data["sources"] for k in s["counters"]})
    first = [k for k in ("documents_in", "bad_utf8") if k in keys]
    last = [k for k in ("documents_kept",) if k in keys]
    return first + [k for k in keys if k not in first + last] + last


def plot_shares(data: dict, path: Path) -> None:
    """Stacked bars: each language's share of the corpus and of the training split, in every unit."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4), layout="constrained")  # constrained: room for the legend outside the bars
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key, title in ((axes[0], "corpus_shares", "kept corpus"), (axes[1], "train_shares", "training split")):
        table = {u: v for u, v in data[key].items() if u != "documents"}
        units = list(table)
        bottom = np.zeros(len(units))
        languages = sorted({lang for v in table.values() for lang in v})
        for lang in languages:
            values = np.array([table[u].get(lang, 0.0) for u in units])
            ax.bar(units, values, bottom=bottom, label=lang)
            for x, (b, v) in enumerate(zip(bottom, values, strict=True)):
                if v > 0.04:
                    ax.text(x, b + v / 2, f"{v:.0%}", ha="center", va="center", fontsize=8)
            bottom += values
        ax.set_title(title)
        # "tokens:name" on two lines: one tokenizer's label does not run into the next
        ax.set_xticks(range(len(units)), [u.replace(" (", "\n(").replace("tokens:", "tokens:\n") for u in units])
    axes[0].set_ylabel("share")
    # the stacked bars fill each axes to 1.0: a legend inside would cover them
    fig.legend(*axes[1].get_legend_handles_labels(), loc="outside right center", fontsize=8)
    fig.suptitle("The same text in characters, bytes and tokens")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    atomic_write_bytes(path, buf.getvalue())


def write_report(out_dir: Path, prepared: Prepared, new_shards: list[ShardInfo], shards_in_manifest: int) -> dict:
    """Write ``report.json``, ``report.md`` and ``shares.png`` into ``out_dir``; returns the JSON data."""
    data = report_dict(prepared, new_shards, shards_in_manifest)
    write_json(out_dir / "report.json", data)
    atomic_write_text(out_dir / "report.md", report_markdown(data, prepared))
    plot_shares(data, out_dir / "shares.png")
    return data
