"""Training: the loop (``trainer``), its optimizer and schedules (``optim``), data, checkpoints, devices, the
run directory it shares with the supervisor (``rundir``), test faults and the in-loop validation. Imports only
``pretrain.model`` and ``pretrain.config`` of the rest of ``pretrain``."""
