"""What keeps a run honest around the trainer: the run's plan, the preflight (which runs training steps), the
gradient-flow check and the supervisor process. Above ``pretrain.train``; never imports eval or release."""
