"""tokenizers_train: a script-aware tokenizer trainer (HF tokenizers and sentencepiece) measured with fertility.

    tokenizers-train --text bn=bn.txt.gz --text en=en.txt.gz --vocab-size 64000 --out out/tok --naive
"""
