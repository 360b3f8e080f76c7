"""The model: the GPT (``gpt``) and its weight conversion to and from ``transformers`` Llama (``hf_llama``).
Imports nothing else of ``pretrain``."""
