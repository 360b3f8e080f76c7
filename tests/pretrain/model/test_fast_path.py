"""The GPU fast path, checked on CPU: the chunked linear + cross-entropy, the padded vocabulary that is never
predicted, the bf16 residual stream under autocast with fp32 parameters, and regional compilation (one
block graph for every block, no recompilation for validation). The golden reference against transformers
(test_hf_llama.py) runs with all of it in place."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from pretrain.config import model_config
from pretrain.model.gpt import GPT, GPTConfig, pad_vocab
from pretrain.model.loss import linear_cross_entropy

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def padded_model(real: int = 300, n_layer: int = 3) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=pad_vocab(real), real_vocab_size=real, block_size=32, n_layer=n_layer,
                         n_head=2, n_embd=32))


def _fp32_bound(n: int, magnitude: torch.Tensor) -> torch.Tensor:
    """Worst-case rounding error of an fp32 sum of ``n`` terms whose absolute values add up to ``magnitude``
    (Higham's gamma_n = n*u/(1 - n*u), u = 2**-24): any order of summation, any SIMD width, stays within it.
    Chunking, AVX2 and AVX-512 change the order, so a fixed atol fits one machine only."""
    u = torch.finfo(torch.float32).eps / 2
    return (n * u / (1 - n * u)) * magnitude


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_chunked_linear_cross_entropy_equals_the_full_logits_loss(chunk_rows):
    torch.manual_seed(0)
    h = torch.randn(45, 16, requires_grad=True)
    w = torch.randn(256, 16, requires_grad=True)
    t = torch.randint(0, 200, (45,))
    loss = linear_cross_entropy(h, w, t, 200, chunk_rows=chunk_rows)
    (2.5 * loss).backward()  # the upstream gradient scales both
    # The reference in float64: its own error is ~1e-16, so what is compared is the fp32 path's error alone.
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    logits64 = (h64 @ w64.t())[:, :200]
    ref = F.cross_entropy(logits64, t)
    (2.5 * ref).backward()
    # Each quantity's bound: the dot products (16 terms for a logit, 200 for dh, 45 for dW) plus a few
    # roundings each in exp/log/softmax (10 more terms' worth is generous), times the sum of |terms|.
    dlogits = (torch.softmax(logits64, -1) + F.one_hot(t, 200)).detach() * 2.5 / 45  # |p - y| <= p + y
    logit_mag = (h64.abs() @ w64.abs().t())[:, :200].detach()
    loss_bound = _fp32_bound(16 + 10 + 45, logit_mag.max(-1).values.mean() + ref.detach())
    h_bound = _fp32_bound(200 + 16 + 10, dlogits @ w64[:200].abs().detach())
    w_bound = _fp32_bound(45 + 16 + 10, dlogits.t() @ h64.abs().detach())
    assert abs(loss.double() - ref.detach()) <= loss_bound
    assert torch.all((h.grad.double() - h64.grad).abs() <= h_bound), (h.grad.double() - h64.grad).abs().max()
    assert torch.all((w.grad[:200].double() - w64.grad[:200]).abs() <= w_bound)
    # The bounds are tight enough to catch a real fault: one target row's gradient dropped is far outside.
    assert (h64.grad[0].abs() > h_bound[0]).any()
    assert torch.count_nonzero(w.grad[200:]) == 0  # padded rows: never predicted, never pushed


def test_padded_vocabulary_is_never_predicted():
    model = padded_model(real=300)
    assert (model.cfg.vocab_size, model.cfg.real_vocab_size) == (384, 300)
    assert model_config("tiny", 50257).vocab_size == 50304 and model_config("tiny", 50257).real_vocab_size == 50257
    idx = torch.randint(0, 300, (2, 17))
    logits, _ = model(idx)
    assert logits.shape == (2, 17, 300)  # no padded id can be sampled or counted
    _, loss = model(idx[:, :-1], idx[:, 1:])
    # An untrained model is about uniform over the *real* vocabulary: ln(300), not ln(384).
    assert abs(loss.item() - math.log(300)) < 0.05 < abs(loss.item() - math.log(384))
    torch.testing.assert_close(loss, F.cross_entropy(logits[:, :-1].flatten(0, 1), idx[:, 1:].flatten()))


def test_bf16_residual_stream_with_fp32_parameters():
    model = padded_model()
    seen = []
    for block in model.blocks:
        block.register_forward_hook(lambda _m, _i, out: seen.append(out.dtype))
    idx = torch.randint(0, 300, (2, 17))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, loss = model(idx[:, :-1], idx[:, 1:])
    loss.backward()
    assert seen == [torch.bfloat16] * 3 and loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in model.parameters())
    _, fp32 = model(idx[:, :-1], idx[:, 1:])
    assert abs(loss.item() - fp32.item()) < 0.05 * fp32.item()  # bf16 rounding, not another function


def test_regional_compilation_reuses_one_graph_and_validation_stays_eager():
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = padded_model(n_layer=3)
    eager = copy.deepcopy(model)
    model.compile_blocks(backend="eager")  # dynamo's tracing without inductor: fast on CPU
    idx = torch.randint(0, 300, (2, 17))
    for _ in range(2):
        _, loss = model(idx[:, :-1], idx[:, 1:])
        loss.backward()
    # Three blocks, one graph, and the loss's chunk body (34 rows: one chunk); no recompile on step 2.
    assert counters["stats"]["unique_graphs"] == 2
    with torch.no_grad():
        logits, _ = model(idx)
        model(idx[:, :-1], idx[:, 1:])
    assert counters["stats"]["unique_graphs"] == 2  # the no-grad passes ran eagerly
    _, expected = eager(idx[:, :-1], idx[:, 1:])
    torch.testing.assert_close(loss, expected)
    twin = copy.deepcopy(model)
    assert twin.block_forward is None and twin.loss_chunk is None  # copies (the arbiter's) start eager


@pytest.mark.parametrize("chunk_rows", [7, 64])
def test_the_compiled_loss_chunk_body_computes_what_the_eager_one_does(chunk_rows):
    """The per-chunk body compiled (dynamo with the eager backend: the same ops, so the same bits on CPU;
    inductor's fusion is the GPU check's to measure), over several chunks and a shorter last one."""
    from pretrain.model.loss import compiled_loss_chunk

    torch._dynamo.reset()
    torch.manual_seed(0)
    h = torch.randn(45, 16, requires_grad=True)
    w = torch.randn(256, 16, requires_grad=True)
    t = torch.randint(0, 200, (45,))
    results = []
    for body in (None, compiled_loss_chunk("eager", None)):
        h.grad = w.grad = None
        loss = linear_cross_entropy(h, w, t, 200, chunk_rows=chunk_rows, body=body)
        loss.backward()
        results.append((loss.detach(), h.grad.clone(), w.grad.clone()))
    for eager, compiled in zip(*results, strict=True):
        assert torch.equal(eager, compiled)
