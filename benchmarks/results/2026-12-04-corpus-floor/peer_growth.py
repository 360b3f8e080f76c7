"""How the benchmark's raw tokenization grew with its input before it read a batch at a time: every document held
first, then encoded in batches of 500 (as ``benchmarks/bench_corpus.py`` did), against fresh strings made per batch
(the conversion included in the time), both in one process on one thread; GPT-2, the benchmark's input at scale k.

    python benchmarks/results/2026-12-04-corpus-floor/peer_growth.py K
"""

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import bench_corpus  # noqa: E402

from fertility.text import iter_documents, parse_text_arg  # noqa: E402
from fertility.tokenizers import load_tokenizer, one_thread  # noqa: E402

if __name__ == "__main__":
    k = int(sys.argv[1])
    files = bench_corpus._files(ROOT.parent / "shared" / "data")
    with tempfile.TemporaryDirectory() as t:
        inputs = bench_corpus.copies(files, k, Path(t))
        tok = load_tokenizer("gpt2")
        texts = [d.text for lang, p in inputs
                 for d in iter_documents(parse_text_arg(f"{lang}={p}"), max_chars=2_000_000)]
        with one_thread():
            for _ in range(2):
                fresh = [x.encode("utf-8").decode("utf-8") for x in texts]
                start = time.process_time()
                for i in range(0, len(fresh), 500):
                    tok.encode_ids(fresh[i:i + 500])
                held = time.process_time() - start
                del fresh
                start = time.process_time()
                for i in range(0, len(texts), 500):
                    tok.encode_ids([x.encode("utf-8").decode("utf-8") for x in texts[i:i + 500]])
                per_batch = time.process_time() - start
                print(f"{k}x all fresh first: {held:.2f}  fresh per batch (conversion included): {per_batch:.2f}",
                      flush=True)
