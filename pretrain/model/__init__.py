"""The model: the GPT (``gpt``), its chunked loss (``loss``) and its weight conversion to and from
``transformers`` Llama (``hf_llama``). Imports nothing else of ``pretrain``."""
