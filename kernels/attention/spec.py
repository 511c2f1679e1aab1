"""attention: scaled dot-product attention, out = softmax(Q Kᵀ / √D [+ causal mask]) V per batch and
head, forward and backward — the start of the ladder naive → tiled online softmax (FlashAttention v1)
→ tensor cores (v2) → Hopper's TMA and wgmma (v3), against PyTorch's eager math and scaled_dot_product_attention per backend.

q, k, v are (B, H, N, D); causal is a shape parameter (0 or 1). FLOPs follow the usual convention:
4·B·H·N²·D forward (two products), halved when causal; the backward 2.5× the forward.
"""

import math

import torch
import torch.nn.functional as F

from cudabench.errors import CudabenchError, NotOnThisGPUError
from cudabench.spec import DTYPES, Baseline, Constraint, Family, Param, Variant, compiled, empty_like


def make_inputs(shape, gen, device):
    B, H, N, D = shape["B"], shape["H"], shape["N"], shape["D"]
    q, k, v = (torch.empty(B, H, N, D, device=device).normal_(0, 1, generator=gen) for _ in range(3))
    return {"q": q, "k": k, "v": v, "causal": bool(shape["causal"])}


def math_attention(q, k, v, causal):
    """The definition in PyTorch ops: the eager baseline (the reference computes the same by blocks of rows)."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


REFERENCE_TILE = 2**25  # scores per block of query rows in the reference: 256 MiB of float64


class BlockedReference(torch.autograd.Function):
    """The family's reference: the same math as math_attention, a block of query rows at a time, with the
    backward recomputing each block's P (dV = PᵀdO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP)), dQ = dS·K/√D,
    dK = dSᵀ·Q/√D; rowsum(P∘dP) rather than rowsum(dO∘O), as autograd's softmax does, so a row with one key
    gets exactly zero dQ and dK). In float64 the whole score matrix of the sweep's N = 16384 is 16 GiB per (B·H = 8)
    and autograd keeps several; a block keeps the reference within a few hundred MiB beyond its inputs,
    so it never decides whether a subject fits. Causal blocks stop at their last row's key."""

    @staticmethod
    def forward(ctx, q, k, v, causal, rounding=None):
        out = torch.empty_like(q)
        for rows, probs in _reference_blocks(q, k, causal):
            out[..., rows, :] = _rounded(probs, rounding) @ v[..., : probs.shape[-1], :]
        ctx.save_for_backward(q, k, v)
        ctx.causal, ctx.rounding = causal, rounding
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v = ctx.saved_tensors
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        scale = 1 / math.sqrt(q.shape[-1])
        for rows, probs in _reference_blocks(q, k, ctx.causal):
            keys = probs.shape[-1]
            d_out = dout[..., rows, :]
            dv[..., :keys, :] += _rounded(probs, ctx.rounding).transpose(-2, -1) @ d_out
            d_probs = d_out @ v[..., :keys, :].transpose(-2, -1)
            d_scores = _rounded(probs * (d_probs - _delta(probs, d_probs, d_out, v[..., :keys, :], ctx.rounding)),
                                ctx.rounding)
            dq[..., rows, :] = d_scores @ k[..., :keys, :] * scale
            dk[..., :keys, :] += d_scores.transpose(-2, -1) @ q[..., rows, :] * scale
        return dq, dk, dv, None, None


def _delta(probs, d_probs, d_out, v, rounding):
    """rowsum(P∘dP) (= rowsum(dO∘O)); rounding, as a kernel computes it: from the output it stored."""
    if rounding is None:
        return (probs * d_probs).sum(-1, keepdim=True)
    out = _rounded(_rounded(probs, rounding) @ v, rounding)
    return (d_out * out).sum(-1, keepdim=True)


def _rounded(x, dtype):
    """x rounded to `dtype` and back (None: as it is)."""
    return x if dtype is None else x.to(dtype).to(x.dtype)


def _reference_blocks(q, k, causal):
    """(row slice, softmax probabilities over the keys it sees) per block of query rows."""
    *batch, n, _ = q.shape
    block = max(1, REFERENCE_TILE // max(1, math.prod(batch) * n))
    for start in range(0, n, block):
        rows = slice(start, min(n, start + block))
        keys = rows.stop if causal else n
        scores = (q[..., rows, :] @ k[..., :keys, :].transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if causal:
            row = torch.arange(rows.start, rows.stop, device=q.device)[:, None]
            scores = scores.masked_fill(torch.arange(keys, device=q.device) > row, float("-inf"))
        yield rows, torch.softmax(scores, dim=-1)


def blocked_reference(q, k, v, causal):
    return BlockedReference.apply(q, k, v, causal)


def rounded_reference(q, k, v, causal):
    """The math as every flash kernel does it in bfloat16 or float16: float32, with P (for P·V and PᵀdO)
    and dS (for dQ and dK) rounded to the inputs' precision, as its tensor-core products need them, and
    the backward's rowsum(dO∘O) taken from the output as stored."""
    return BlockedReference.apply(q.float(), k.float(), v.float(), causal, q.dtype).to(q.dtype)


class NaiveAttention(torch.autograd.Function):
    """attn-naive: P saved for the backward (memory grows as N²)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, ext):
        B, H, N, _ = q.shape
        out = empty_like(q)
        P = torch.empty(B, H, N, N, device=q.device)
        ext.naive_forward(q, k, v, out, P, causal)
        ctx.save_for_backward(q, k, v, out, P)
        ctx.ext = ext
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, P = ctx.saved_tensors
        B, H, N, _ = q.shape
        dq, dk, dv = empty_like(q), empty_like(k), empty_like(v)
        dP = torch.empty(B, H, N, N, device=q.device)
        rows = torch.empty(B, H, N, device=q.device)
        ctx.ext.naive_backward(q, k, v, out, P, dout.contiguous(), dq, dk, dv, dP, rows)
        return dq, dk, dv, None, None


def bind_naive(ext):
    def attention(q, k, v, causal):
        return NaiveAttention.apply(q, k, v, causal, ext)

    return attention


class FlashAttention(torch.autograd.Function):
    """attn-flash1 and attn-flash2: only out and each row's log-sum-exp are kept (memory grows as N)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, ext, version):
        B, H, N, _ = q.shape
        out = empty_like(q)
        lse = torch.empty(B, H, N, device=q.device)
        ext.flash_forward(version, q, k, v, out, lse, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ext, ctx.version, ctx.causal = ext, version, causal
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = empty_like(q), empty_like(k), empty_like(v)
        ctx.ext.flash_backward(ctx.version, q, k, v, out, lse, dout.contiguous(), dq, dk, dv, ctx.causal)
        return dq, dk, dv, None, None, None


def bind_flash(version):
    def bind(ext):
        def attention(q, k, v, causal):
            return FlashAttention.apply(q, k, v, causal, ext, version)

        return attention

    return bind


def bind_flash3(ext):
    """attn-flash3's op; on a GPU other than a Hopper one the subject is skipped with the reason."""
    why = ext.flash3_not_here()
    if why:
        raise NotOnThisGPUError(why)
    return bind_flash(3)(ext)


def eager():
    return math_attention


def compiled_eager():
    return compiled(math_attention)


SDPA_BACKENDS = {"sdpa-flash": "FLASH_ATTENTION", "sdpa-efficient": "EFFICIENT_ATTENTION",
                 "sdpa-cudnn": "CUDNN_ATTENTION", "sdpa-math": "MATH"}


def sdpa(name):
    """torch.nn.functional.scaled_dot_product_attention restricted to one backend, so each is named."""
    def make():
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, SDPA_BACKENDS[name], None)
        if backend is None:
            raise CudabenchError(f"this torch has no SDPA backend {SDPA_BACKENDS[name]}")

        def attention(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return attention

    return make


def work(shape, direction):
    B, H, N, D = shape["B"], shape["H"], shape["N"], shape["D"]
    fwd = 4.0 * B * H * N * N * D / (2 if shape["causal"] else 1)
    tensor_bytes = 4.0 * B * H * N * D
    return {"fwd": (fwd, 4 * tensor_bytes), "bwd": (2.5 * fwd, 8 * tensor_bytes),
            "fwdbwd": (3.5 * fwd, 11 * tensor_bytes)}[direction]


CAUSAL_FLAG = Constraint("causal in (0, 1)", lambda s: s["causal"] in (0, 1), "causal must be 0 or 1")
SCORES_FIT = Constraint("B*H*N*N < 2^31", lambda s: s["B"] * s["H"] * s["N"] ** 2 < 2**31,
                        "attn-naive keeps the whole score matrix: B·H·N² must stay under 2^31 floats (8 GiB; "
                        "twice that with the backward's)")
HEAD_DIM = Constraint("D in (64, 128)", lambda s: s["D"] in (64, 128),
                      "the flash kernels are built for head dimension 64 or 128")
HEADS_FIT = Constraint("B*H <= 65535", lambda s: s["B"] * s["H"] <= 65535,
                       "B·H must be at most 65535: one grid row per batch and head")


def reduction(shape, direction: str) -> int:
    """The longest sum an output takes: P·V over the keys (the gradients over the queries), Q·Kᵀ over D."""
    return max(shape["N"], shape["D"])


FAMILY = Family(
    name="attention",
    summary="scaled dot-product attention softmax(QKᵀ/√D)·V, causal or not, forward and backward",
    sources=("attention.cu", "flash1.cu", "flash2.cu", "flash3.cu", "flash3_bwd.cu", "attention.cpp"),
    params=(Param("B", 4, "batch"), Param("H", 16, "heads"), Param("N", 1024, "sequence length"),
            Param("D", 64, "head dimension"), Param("causal", 1, "1: causal mask, 0: none", minimum=0)),
    make_inputs=make_inputs,
    reference=blocked_reference,
    grad_inputs=("q", "k", "v"),
    variants=(
        Variant("attn-naive", "three kernels: the score matrix in global memory, softmax per row, P·V "
                              "(P kept for the backward's five more)", bind_naive, (SCORES_FIT,)),
        Variant("attn-flash1", "one kernel: K/V tiles through shared memory past a query tile, online softmax, "
                               "float32 (backward: dK/dV per key tile, dQ per query tile, from the log-sum-exp)",
                bind_flash(1), (HEAD_DIM,)),
        Variant("attn-flash2", "FlashAttention-2 split on tensor cores (mma.sync), bfloat16/float16 with float32 "
                               "sums; P stays in registers; backward per key tile with dQ summed by atomics",
                bind_flash(2), (HEAD_DIM,), dtypes=("bfloat16", "float16"),
                nondeterminism=1e-5),  # dQ's atomics add in a different order each run
        Variant("attn-flash3", "Hopper (sm_90a): TMA boxes of Q/K/V into swizzled shared memory, mbarriers, "
                               "wgmma for Q·Kᵀ and P·V (P from registers), a loading and two computing "
                               "warpgroups taking turns; backward the same way, dQ in a kernel of its own (no "
                               "atomics)", bind_flash3, (HEAD_DIM,), dtypes=("bfloat16", "float16")),
    ),
    baselines=(
        Baseline("eager", "softmax(q @ kᵀ / √D, masked) @ v in PyTorch ops", eager, dtypes=DTYPES),
        Baseline("torch-compile", "torch.compile of the eager form (Inductor)", compiled_eager, default=False,
                 dtypes=DTYPES),
        *(Baseline(name, f"scaled_dot_product_attention, {backend} backend only", sdpa(name),
                   default=name in ("sdpa-flash", "sdpa-efficient"),
                   dtypes=("bfloat16", "float16") if name in ("sdpa-flash", "sdpa-cudnn") else DTYPES,
                   # their backwards sum dQ with atomics (seen on the H100: 8e-6 flash, 1e-8 cuDNN)
                   nondeterminism=1e-5 if name != "sdpa-math" else 0.0)
          for name, backend in SDPA_BACKENDS.items()),
    ),
    constraints=(CAUSAL_FLAG, HEADS_FIT),
    dtypes=DTYPES,
    work=work,
    bound="sgemm",
    feature_archs=("sm_90a",),  # attn-flash3's TMA, wgmma and setmaxnreg exist only there
    # float32 sums over N keys (up to 16384: about √N·u ≈ 1e-5 typical), and the backward's softmax
    # gradient subtracts rowsum(dO∘O) from dO·Vᵀ, which cancels: 5e-5 leaves room for both and still
    # fails any wrong index or missing mask by orders of magnitude.
    tolerance=5e-5,
    reduction=reduction,
    # `large` scales v only: logits near overflow make every flash kernel's stored log-sum-exp cancel
    # (exp of a difference of two 1e36 numbers) in the backward, a limit of the algorithm, not a bug
    large_inputs=("v",),
    # every flash kernel rounds P and dS to the case's precision for its tensor-core products: on outliers
    # that alone takes bfloat16 dK or dQ past the tolerance (attn-flash2 and attn-flash3 alike, tests/emulated)
    rounded_reference=rounded_reference,
)
