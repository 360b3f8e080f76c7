"""lm-evaluation-harness tasks on an export (`pretrain eval --tasks`), with the offline shipped task."""

from __future__ import annotations

import json

import pytest

from pretrain.cli import main
from pretrain.eval.harness import LOCAL_TASKS, task_result
from pretrain.eval.tasks.bangla_sample_cloze.build import OUT, build_items, render


def test_the_shipped_local_task_is_what_its_builder_makes():
    items = build_items()
    assert OUT.read_text(encoding="utf-8") == render(items)
    assert len(items) == 40 and all(len(i["choices"]) == 4 and i["context"] for i in items)
    assert {i["label"] for i in items} == {0, 1, 2, 3}
    assert (LOCAL_TASKS / "bangla_sample_cloze" / "README.md").read_text().count("CC BY 2.0 FR") == 1


def _sample(choices: int) -> dict:
    return {"arguments": [("ctx", f" c{i}") for i in range(choices)]}


def test_chance_is_measured_on_the_scored_documents_and_weighted_for_groups():
    out = {"results": {"g": {"acc,none": 0.4, "acc_stderr,none": 0.1, "alias": "g"},
                       "a": {"acc,none": 0.5, "acc_norm,none": 0.25, "acc_stderr,none": "N/A", "alias": "a"},
                       "b": {"acc,none": 0.3}, "gen": {"exact_match,strict": 0.1}},
           "samples": {"a": [_sample(4), _sample(2)], "b": [_sample(5)] * 2, "gen": [_sample(1)]},
           "configs": {"a": {"output_type": "multiple_choice"}, "b": {"output_type": "multiple_choice"},
                       "gen": {"output_type": "generate_until"}},
           "group_subtasks": {"g": ["a", "b"]}}
    a = task_result("a", out)
    assert a == {"metric": "acc", "score": 0.5, "chance": pytest.approx(0.375), "documents": 2,
                 "metrics": {"acc": 0.5, "acc_norm": 0.25}, "stderr": {}}
    g = task_result("g", out)
    assert g["chance"] == pytest.approx((0.25 + 0.5 + 0.2 + 0.2) / 4) and g["documents"] == 4
    assert g["stderr"] == {"acc": 0.1}
    gen = task_result("gen", out)
    assert gen["chance"] is None and (gen["metric"], gen["score"]) == ("exact_match", 0.1)


@pytest.mark.slow
def test_the_local_task_runs_through_the_harness_on_an_export_into_eval_json(tiny_export, tmp_path):
    out = tmp_path / "eval.json"
    assert main(["eval", "--hf", str(tiny_export), "--tasks", "bangla_sample_cloze", "--out", str(out),
                 "--device", "cpu"]) == 0
    tasks = json.loads(out.read_text())["tasks"]
    assert tasks["harness"].startswith("lm-eval 0.4.")
    assert tasks["model_args"]["add_bos_token"] is True  # our export: BOS before every document, as in training
    r = tasks["results"]["bangla_sample_cloze"]
    assert r["metric"] == "acc" and 0.0 <= r["score"] <= 1.0 and r["documents"] == 40
    assert r["chance"] == pytest.approx(0.25) and set(r["metrics"]) == {"acc", "acc_norm"}
    assert r["stderr"]["acc"] > 0


@pytest.mark.slow  # indexing the harness's tasks takes seconds
def test_an_unknown_task_is_refused_with_the_closest_names(tiny_export, tmp_path, capsys):
    assert main(["eval", "--hf", str(tiny_export), "--tasks", "bangla_piqa", "--out", str(tmp_path / "e.json")]) == 2
    err = capsys.readouterr().err
    assert "bangla_piqa" in err and "piqa_bn" in err
    assert not (tmp_path / "e.json").exists()
