"""What scores a tokenizer on a text: the per-script counts, their sampled estimates, the balance view and the traps."""
