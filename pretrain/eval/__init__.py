"""Evaluation after training: a run against its random-init twin (``run_eval``), bits per byte on any text
(``text_bits``), lm-evaluation-harness tasks (``harness``, task folders in ``tasks/``), both for any model
(``model_scores``), and the plot. Above ``pretrain.release``: it scores exports."""
