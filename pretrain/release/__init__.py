"""A checkpoint as a ``transformers`` folder (``export``) with its model card. Reads checkpoints through
``pretrain.train.checkpoint`` and imports nothing else of train, nor guard."""
