"""Speed: our training step against ``transformers`` Llama (``bench``) and which attention kernel runs
(``attention_probe``). May import ``pretrain.train``, never eval or release."""
