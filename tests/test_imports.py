"""The project's import graph: data flows one way between the packages, and no module imports itself back
through others (imports inside functions count: a lazy import still ties two modules together)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "fertility", "tokenizers_train", "corpus", "pretrain")
# What each package may import besides itself (pretrain -> corpus -> fertility, tokenizers_train -> corpus, fertility;
# common, the base, below all four and importing none of them).
ALLOWED = {"common": set(), "fertility": {"common"}, "corpus": {"common", "fertility"},
           "tokenizers_train": {"common", "corpus", "fertility"}, "pretrain": {"common", "corpus", "fertility"}}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (``from a import b`` counts ``a.b`` where that is a module, else ``a``)."""
    modules = {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from pkg import submodule` imports the submodule (its package is already being imported);
                # `from module import name` imports the module.
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    targets.add(sub if sub in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_the_project_modules():
    graph = import_graph()
    assert len(graph) > 40
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_packages_import_only_downwards():
    wrong = [(m, t) for m, targets in import_graph().items() for t in targets
             if t.split(".")[0] != m.split(".")[0] and t.split(".")[0] not in ALLOWED[m.split(".")[0]]]
    assert wrong == []


# Inside a package: which of its parts (``package.<part>``) may import which. Each rule is named by what it
# forbids and tells, for an import ``m -> t`` of the graph, whether it is forbidden. A package's own ``__init__``
# and ``__main__`` (the entry point that runs its CLI) are no part.
Rule = Callable[[str, str], bool]


def part(package: str, module: str) -> str | None:
    """The part of ``package`` that ``module`` is in (its first name below the package), else None."""
    parts = module.split(".")
    return parts[1] if parts[0] == package and len(parts) > 1 and parts[1] != "__main__" else None


def rule_violations(rules: dict[str, Rule], graph: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """(rule, importer, imported) for every import of ``graph`` that a rule of ``rules`` forbids."""
    return [(rule, m, t) for m, targets in sorted(graph.items()) for t in sorted(targets)
            for rule, forbids in rules.items() if forbids(m, t)]


def assert_every_rule_fires(rules: dict[str, Rule], planted: dict[str, set[str]], wrong: set[tuple[str, str]]):
    """On the fake graph ``planted``, the rules find exactly the imports ``wrong``, and each rule finds one:
    a rule that never fires could not fail the test of the real graph."""
    found = rule_violations(rules, planted)
    assert {(m, t) for _, m, t in found} == wrong
    assert {rule for rule, _, _ in found} == set(rules)


_pretrain = functools.partial(part, "pretrain")
PRETRAIN_RULES: dict[str, Rule] = {
    "pretrain.model imports nothing else of pretrain":
        lambda m, t: _pretrain(m) == "model" and _pretrain(t) not in (None, "model"),
    "pretrain.train imports only pretrain.model and pretrain.config":
        lambda m, t: _pretrain(m) == "train" and _pretrain(t) not in (None, "train", "model", "config"),
    "pretrain.guard and pretrain.perf never import eval or release":
        lambda m, t: _pretrain(m) in ("guard", "perf") and _pretrain(t) in ("eval", "release"),
    "pretrain.release imports of train only its checkpoint reader, and nothing of guard":
        lambda m, t: _pretrain(m) == "release" and (_pretrain(t) == "guard" or (
            _pretrain(t) == "train" and t != "pretrain.train.checkpoint")),
    "nothing imports pretrain.cli (but pretrain.__main__)":
        lambda m, t: t == "pretrain.cli" and m != "pretrain.__main__",
}


def test_each_pretrain_rule_catches_a_planted_violation():
    planted = {
        "pretrain.model.gpt": {"pretrain.config", "common.cli"},
        "pretrain.train.trainer": {"pretrain.guard.preflight", "pretrain.model.gpt", "pretrain.config"},
        "pretrain.guard.preflight": {"pretrain.eval.run_eval", "pretrain.train.trainer"},
        "pretrain.perf.bench": {"pretrain.release.export", "pretrain.guard.grad_flow"},
        "pretrain.release.export": {"pretrain.train.data", "pretrain.train.checkpoint"},
        "pretrain.release.model_card": {"pretrain.guard.run_plan"},
        "pretrain.eval.run_eval": {"pretrain.cli"},
        "pretrain.__main__": {"pretrain.cli"},
    }
    assert_every_rule_fires(PRETRAIN_RULES, planted, {
        ("pretrain.model.gpt", "pretrain.config"), ("pretrain.train.trainer", "pretrain.guard.preflight"),
        ("pretrain.guard.preflight", "pretrain.eval.run_eval"), ("pretrain.perf.bench", "pretrain.release.export"),
        ("pretrain.release.export", "pretrain.train.data"), ("pretrain.release.model_card", "pretrain.guard.run_plan"),
        ("pretrain.eval.run_eval", "pretrain.cli")})


def test_pretrain_parts_import_only_what_their_rules_allow():
    graph = import_graph()
    assert {_pretrain(m) for m in graph} >= {"model", "train", "guard", "release", "eval", "perf", "config", "cli"}
    assert rule_violations(PRETRAIN_RULES, graph) == []


# fertility: the measuring part (every part but ``present`` and ``cli``) never imports what shows it; scoring
# sits below the analysis that combines it; the tokenizers below everything that uses them.
_fertility = functools.partial(part, "fertility")
FERTILITY_SHOWING = ("present", "cli")
FERTILITY_BELOW_SCORING = ("tokenizers", "graphemes", "scripts", "totals")
FERTILITY_RULES: dict[str, Rule] = {
    "the measuring part of fertility never imports fertility.present":
        lambda m, t: _fertility(m) not in (None, *FERTILITY_SHOWING) and _fertility(t) == "present",
    "fertility.scoring imports of fertility only the parts below it (tokenizers, graphemes, scripts, totals)":
        lambda m, t: _fertility(m) == "scoring" and _fertility(t) not in (None, "scoring", *FERTILITY_BELOW_SCORING),
    "fertility.tokenizers imports nothing else of fertility":
        lambda m, t: _fertility(m) == "tokenizers" and _fertility(t) not in (None, "tokenizers"),
    "nothing imports fertility.cli (but fertility.__main__)":
        lambda m, t: t == "fertility.cli" and m != "fertility.__main__",
}


def test_each_fertility_rule_catches_a_planted_violation():
    planted = {
        "fertility": {"fertility.present.explorer", "fertility.scoring.metrics"},
        "fertility.analysis": {"fertility.scoring.metrics", "fertility.present.report"},
        "fertility.scoring.traps": {"fertility.scoring.metrics", "fertility.present.plots"},
        "fertility.scoring.balance": {"fertility.analysis", "fertility.totals"},
        "fertility.scoring.metrics": {"fertility.premium", "fertility.scripts", "fertility.tokenizers"},
        "fertility.tokenizers.hf": {"fertility.tokenizers.base", "fertility.graphemes"},
        "fertility.present.serve": {"fertility.cli", "fertility.present.explorer", "fertility.analysis"},
        "fertility.cli": {"fertility.present.serve", "fertility.analysis"},
        "fertility.__main__": {"fertility.cli"},
    }
    assert_every_rule_fires(FERTILITY_RULES, planted, {
        ("fertility.analysis", "fertility.present.report"), ("fertility.scoring.traps", "fertility.present.plots"),
        ("fertility.scoring.balance", "fertility.analysis"), ("fertility.scoring.metrics", "fertility.premium"),
        ("fertility.tokenizers.hf", "fertility.graphemes"), ("fertility.present.serve", "fertility.cli")})


def test_fertility_parts_import_only_what_their_rules_allow():
    graph = import_graph()
    assert {_fertility(m) for m in graph} >= {"present", "scoring", "tokenizers", "analysis", "text", "cli"}
    assert rule_violations(FERTILITY_RULES, graph) == []


# Inside corpus: the build's stages at the top (``corpus.check``, ``ingest``, ``pack``, ``report``, ``build``,
# ``cli``), its configuration (``corpus.config``) and one sub-package per concern below them. Each rule names the
# imports it forbids; corpus's own ``__init__`` and ``__main__`` (the entry point that runs the CLI) are not parts.
CORPUS_STAGES = ("check", "ingest", "pack", "report", "build", "cli")
CORPUS_CONCERNS = ("read", "quality", "engine", "mixture", "shards")


def _corpus_part(module: str) -> str | None:
    """``read``, ``quality``, ..., ``config``, or ``stage`` for a module of the build's stages; None outside."""
    parts = module.split(".")
    if parts[0] != "corpus" or len(parts) == 1 or parts[1] == "__main__":
        return None
    return "stage" if parts[1] in CORPUS_STAGES else parts[1]


CORPUS_RULES: dict[str, Rule] = {
    "corpus.read imports nothing else of corpus":
        lambda m, t: _corpus_part(m) == "read" and _corpus_part(t) not in (None, "read"),
    "corpus.quality imports of corpus only corpus.read":
        lambda m, t: _corpus_part(m) == "quality" and _corpus_part(t) not in (None, "quality", "read"),
    "corpus.shards imports of corpus only corpus.read and corpus.quality (no stage)":
        lambda m, t: _corpus_part(m) == "shards" and _corpus_part(t) not in (None, "shards", "read", "quality"),
    "corpus.config imports neither engine, mixture nor the stages":
        lambda m, t: _corpus_part(m) == "config" and _corpus_part(t) in ("engine", "mixture", "stage"),
    "corpus.engine never imports corpus.mixture or the stages":
        lambda m, t: _corpus_part(m) == "engine" and _corpus_part(t) in ("mixture", "stage"),
    "corpus.mixture imports neither corpus.engine nor the stages":
        lambda m, t: _corpus_part(m) == "mixture" and _corpus_part(t) in ("engine", "stage"),
    "a stage imports no other stage (corpus.build runs them, corpus.cli calls corpus.build)":
        lambda m, t: (_corpus_part(m) == "stage" == _corpus_part(t)
                      and m not in ("corpus.build", "corpus.cli") and t != "corpus.cli"),
    "nothing imports corpus.cli (but corpus.__main__)":
        lambda m, t: t == "corpus.cli" and m != "corpus.__main__",
}


# Planted arrows, each with whether a rule must forbid it: every rule's violation beside an allowed neighbour.
CORPUS_PLANTED = [
    ("corpus.read.sources", "corpus.quality.clean", True), ("corpus.read.sources", "fertility.text", False),
    ("corpus.quality.clean", "corpus.read.normalize", False), ("corpus.quality.clean", "corpus.shards.format", True),
    ("corpus.shards.keys", "corpus.quality.clean", False), ("corpus.shards.keys", "corpus.ingest", True),
    ("corpus.config", "corpus.quality.dedup", False), ("corpus.config", "corpus.mixture.plan", True),
    ("corpus.engine.staging", "corpus.config", False), ("corpus.engine.staging", "corpus.shards.format", False),
    ("corpus.engine.staging", "corpus.mixture.plan", True), ("corpus.engine.steps", "corpus.ingest", True),
    ("corpus.mixture.prepare", "corpus.mixture.layout", False), ("corpus.mixture.prepare", "corpus.engine.executors", True),
    ("corpus.mixture.prepare", "corpus.check", True), ("corpus.pack", "corpus.mixture.layout", False),
    ("corpus.pack", "corpus.report", True), ("corpus.build", "corpus.check", False), ("corpus.build", "corpus.pack", False),
    ("corpus.cli", "corpus.build", False), ("corpus.report", "corpus.cli", True), ("corpus.__main__", "corpus.cli", False),
]


def test_each_corpus_rule_catches_a_planted_violation():
    graph: dict[str, set[str]] = {}
    for importer, imported, _ in CORPUS_PLANTED:
        graph.setdefault(importer, set()).add(imported)
    assert_every_rule_fires(CORPUS_RULES, graph, {(m, t) for m, t, forbidden in CORPUS_PLANTED if forbidden})


def test_corpus_parts_import_only_what_their_rules_allow():
    graph = import_graph()
    assert {_corpus_part(m) for m in graph} >= {*CORPUS_CONCERNS, "config", "stage"}
    assert rule_violations(CORPUS_RULES, graph) == []


def test_corpus_has_at_most_14_entries_each_concern_in_its_own_package():
    top = sorted(p.name for p in (ROOT / "corpus").iterdir() if p.name != "__pycache__")
    assert len(top) <= 14, top
    assert {p.removesuffix(".py") for p in top} == {"__init__", "__main__", "config", *CORPUS_STAGES,
                                                    *CORPUS_CONCERNS}
    for concern in CORPUS_CONCERNS:
        doc = ast.get_docstring(ast.parse((ROOT / "corpus" / concern / "__init__.py").read_text(encoding="utf-8")))
        assert doc and "\n" not in doc, f"corpus/{concern}/__init__.py: one line saying its concern"
