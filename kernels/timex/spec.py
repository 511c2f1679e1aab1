"""TimeX (RWKV): causal depthwise convolution, the v1 → v5 ladder, timex-fft (any T up to 16384) and
timex-mma (tensor cores, bfloat16/float16) and timex-wgmma (on Hopper's wgmma), forward and backward.

    out[b,c,t] = eps + sum_{u=0..t} w[c, T-1-(t-u)] * k[b,c,u]

w is (C, T), k is (B, C, T), eps a scalar with no gradient. The CUDA backward computes
gk (anti-causal) and gw (summed over the batch); each variant is an autograd.Function.
"""

import torch
import torch.nn.functional as F

from cudabench.errors import NotOnThisGPUError
from cudabench.spec import DTYPES, Baseline, Constraint, Family, Param, Variant, compiled, empty_like

TMAX = 1024
FFT_TMAX = 16384  # timex-fft: one row's packed transform (M = N/2 complex points) in one block
# gw is summed over the batch with float atomics: their order changes from run to run (relative; the
# judge adds two units of roundoff in bfloat16 / float16)
ATOMIC_SUMS = 1e-5
MMA_TMAX = 2048  # timex-mma: 32 rows of k staged in one block's shared memory
WGMMA_TMAX = 768  # timex-wgmma: 12 tiles of 64, the sums of six of them held by a thread
WGMMA_VERSION = 8
LOW_PRECISION = ("bfloat16", "float16")
BF, BB, BB5 = 8, 2, 4  # batch rows per block: v4 forward, v4 backward, v5 backward


FFT_VERSION = 6  # timex-fft


class TimeX(torch.autograd.Function):
    """Autograd wrapper around the extension's forward/backward for one ladder version. timex-fft beyond
    T = 1024 keeps the spectra its forward made (the weights' and each row of k's) for its backward, which
    then makes neither again: what autograd saves a forward's intermediates for."""

    @staticmethod
    def forward(ctx, w, k, eps, ext, version):
        out = empty_like(k)
        spectra = None
        if version == FFT_VERSION:
            spectra = ext.forward_saving(w, k, out, float(eps))  # None where nothing is kept (T <= 1024)
        else:
            ext.forward(w, k, out, float(eps), version)
        ctx.save_for_backward(w, k, *([spectra] if spectra is not None and spectra.numel() else []))
        ctx.ext, ctx.version = ext, version
        return out

    @staticmethod
    def backward(ctx, g):
        w, k, *spectra = ctx.saved_tensors
        gw, gk = empty_like(w), empty_like(k)
        g = g.contiguous()
        if ctx.version == WGMMA_VERSION and g.data_ptr() % 16:  # its rows go by TMA: a view's may not be aligned
            g = g.clone()
        if spectra:
            ctx.ext.backward_saved(w, k, g, gw, gk, spectra[0])
        else:
            ctx.ext.backward(w, k, g, gw, gk, ctx.version)
        return gw, gk, None, None, None


def bind(version):
    def make(ext):
        if version == WGMMA_VERSION and ext.wgmma_not_here():  # skipped on a GPU other than a Hopper one
            raise NotOnThisGPUError(ext.wgmma_not_here())

        def timex(w, k, eps):
            if torch.is_grad_enabled() and (w.requires_grad or k.requires_grad):
                return TimeX.apply(w, k, eps, ext, version)
            out = empty_like(k)  # no graph to record: skip autograd's bookkeeping
            ext.forward(w, k, out, float(eps), version)
            return out

        return timex

    return make


def make_inputs(shape, gen, device, kind="uniform"):
    """uniform: w, k ~ U(-1, 1). rwkv: as in RWKV, w a per-channel exponential decay over the
    distance t-u, w[c, T-1-j] = exp(-d_c j) with log d_c ~ U(-3, 0.5), and k = exp(N(0, 1))."""
    B, C, T = shape["B"], shape["C"], shape["T"]
    if kind == "rwkv":
        decay = torch.empty(C, 1, device=device).uniform_(-3, 0.5, generator=gen).exp()
        distance = torch.arange(T - 1, -1, -1, device=device, dtype=torch.float32)
        w = torch.exp(-decay * distance)
        k = torch.empty(B, C, T, device=device).normal_(0, 1, generator=gen).exp()
    else:
        w = torch.empty(C, T, device=device).uniform_(-1, 1, generator=gen)
        k = torch.empty(B, C, T, device=device).uniform_(-1, 1, generator=gen)
    eps = torch.empty((), device=device).uniform_(0.1, 1.0, generator=gen).item()
    return {"w": w, "k": k, "eps": eps}


def direct(w, k, eps):
    """The definition as a padded grouped convolution (conv1d cross-correlates, hence the layout)."""
    T = k.shape[-1]
    return eps + F.conv1d(F.pad(k, (T - 1, 0)), w.unsqueeze(1), groups=k.shape[1])


def reference(w, k, eps):
    """The fp64 reference: the product of spectra (fft_conv below). In float64 it is exact to about
    1e-15 of the output's norm, and it costs O(T log T): the direct convolution in float64 took
    seconds per case at the seed shape, with its backward (cuDNN has no fast float64 path).
    tests/test_references.py checks it against the defining loops.

    Its transforms are a power of two long (any length from 2T - 1 keeps the wrap-around out). A first
    cuFFT plan of another length took 30-460 ms on the H100 (median 43-96 ms), against about 1 ms for a
    power of two, and the random shapes each variant is checked at draw new lengths every run: 1.5 s
    against 0.06 s for the 16 shapes of a sweep (.ci/sessions/probe25_fft_plans.py)."""
    return fft_conv(w, k, eps, n=1 << (2 * k.shape[-1] - 1).bit_length())


def conv1d_baseline():
    return direct  # run in float32 by PyTorch (cuDNN)


def compiled_conv1d_baseline():
    return compiled(direct)  # Inductor, compiled at the first call (the check, before timing)


def fft_conv(w, k, eps, n=None):
    """Causal convolution as a product of spectra: zero-padding to n points (2T by default, at least
    2T - 1) keeps the circular wrap-around out of the first T outputs."""
    T = k.shape[-1]
    n = 2 * T if n is None else n
    spectrum = torch.fft.rfft(k, n=n) * torch.fft.rfft(w.flip(-1), n=n)
    return eps + torch.fft.irfft(spectrum, n=n)[..., :T]


def fft_conv_baseline(w, k, eps):
    """The FFT convolution in any precision: cuFFT has no bfloat16 transforms, and float16 ones only
    of powers of two, so in those the transforms run in float32 between casts, as a user would write it."""
    if k.dtype not in (torch.bfloat16, torch.float16):
        return fft_conv(w, k, eps)
    return fft_conv(w.float(), k.float(), eps).to(k.dtype)


def work(shape, direction):
    B, C, T = shape["B"], shape["C"], shape["T"]
    pass_flops = float(B) * C * T * (T + 1)  # 2 flops per multiply-add, T(T+1)/2 of them per row
    fwd_bytes = 4.0 * (C * T + 2 * B * C * T)
    bwd_bytes = 4.0 * (2 * C * T + 3 * B * C * T)
    return {
        "fwd": (pass_flops, fwd_bytes),
        "bwd": (2 * pass_flops, bwd_bytes),
        "fwdbwd": (3 * pass_flops, fwd_bytes + bwd_bytes),
    }[direction]


def fft_work(shape, direction):
    """What an FFT formulation must compute at least (for the impossible-figure check; the table
    keeps the direct-sum count, so rates stay comparable along the ladder): per row a real
    transform of N = 2T points each way (2.5 N log2 N flops each) and the spectrum product."""
    import math

    B, C, T = shape["B"], shape["C"], shape["T"]
    n = 2 * T
    pass_flops = float(B) * C * (2 * 2.5 * n * math.log2(n) + 3 * n)
    flops = {"fwd": pass_flops, "bwd": 2 * pass_flops, "fwdbwd": 3 * pass_flops}[direction]
    return flops, work(shape, direction)[1]


T_MAX = Constraint(f"T <= {TMAX}", lambda s: s["T"] <= TMAX,
                   f"T must be at most {TMAX}: one thread block holds a whole row")
T_FFT = Constraint(f"T <= {FFT_TMAX}", lambda s: s["T"] <= FFT_TMAX,
                   f"T must be at most {FFT_TMAX}: one row's transform is held in one block's shared memory")
T_MMA = Constraint(f"T <= {MMA_TMAX}", lambda s: s["T"] <= MMA_TMAX,
                   f"T must be at most {MMA_TMAX}: 32 rows of k are staged in one block's shared memory")
T_WGMMA = Constraint(f"T <= {WGMMA_TMAX}, T % 8 == 0", lambda s: s["T"] <= WGMMA_TMAX and s["T"] % 8 == 0,
                     f"T must be at most {WGMMA_TMAX} (a thread holds the sums of six 64-step tiles) and a multiple "
                     "of 8 (rows read in 16-byte pieces by TMA)")
T_VEC = Constraint("T % 4 == 0", lambda s: s["T"] % 4 == 0,
                   "T must be a multiple of 4: each thread handles four outputs with float4 loads")
T_PAIRS = Constraint("T % 8 == 0", lambda s: s["T"] % 8 == 0,
                     "T must be a multiple of 8: a v5 thread pairs output quads q and T/4-1-q")
B_GROUP = Constraint(f"B % {BF} == 0", lambda s: s["B"] % BF == 0,
                     f"B must be a multiple of {BF}: one v4 block serves {BF} batch rows "
                     f"forward ({BB} backward)")


def reduction(shape, direction: str) -> int:
    """The longest sum an output takes: out[t] sums T products; gw sums over the batch and time."""
    return shape["T"] * (1 if direction == "fwd" else shape["B"])


FAMILY = Family(
    name="timex",
    summary="RWKV TimeX causal depthwise convolution, forward and backward",
    sources=("timex.cu", "timex_fft.cu", "timex_fft_warp.cu", "timex_fft_long.cu", "timex_mma.cu", "timex_wgmma.cu",
             "timex_wgmma_gw.cu",
             "timex.cpp"),
    params=(Param("B", 32, "batch"), Param("C", 768, "channels"), Param("T", 768, "time steps")),
    make_inputs=make_inputs,
    reference=reference,
    grad_inputs=("w", "k"),
    variants=(
        Variant("timex-v1", "one thread per output, global memory", bind(1)),
        Variant("timex-v2", "w and k rows staged in shared memory", bind(2), (T_MAX,)),
        Variant("timex-v3", "four outputs per thread, float4 loads/stores", bind(3), (T_MAX, T_VEC)),
        Variant("timex-v4", f"v3 + {BF} batch rows per block share one staged w row "
                            f"(backward: {BB})", bind(4), (T_MAX, T_VEC, B_GROUP)),
        Variant("timex-v5", f"v4 with equal work per thread (output quads q and T/4-1-q); backward "
                            f"{BB5} rows per block", bind(5), (T_MAX, T_PAIRS, B_GROUP)),
        Variant("timex-fft", "products of spectra, FFTs on chip, two rows per FFT up to T = 1024 (from T = 193 "
                             "one warp per transform held in registers, radix-16/32 passes; shorter T a Stockham "
                             "radix-8 in a block's shared memory), beyond one row packed into a half-length FFT "
                             "held in a block's registers; gw summed over the batch in frequency space; "
                             "bfloat16/float16 in and out, float32 inside", bind(FFT_VERSION), (T_FFT,),
                work=fft_work, dtypes=DTYPES, nondeterminism=ATOMIC_SUMS),
        Variant("timex-mma", "Toeplitz products on tensor cores (mma.sync m16n8k16): 32 batch rows of a channel "
                             "times w's Toeplitz matrix, read from packed pairs of w; gw from diagonal bands of "
                             "G^T K; bfloat16/float16 only, float32 sums", bind(7), (T_MMA,),
                dtypes=LOW_PRECISION, nondeterminism=ATOMIC_SUMS),
        Variant("timex-wgmma", "the forward on Hopper (sm_90a): wgmma m64n32k16 with w's Toeplitz tiles from "
                               "registers, k's tiles by TMA, persistent blocks fetching the next channel meanwhile; "
                               "gk the same way (the tiles transposed), gw from wgmma on G's and K's tiles with a fixed-order "
                               "fold of the diagonals; bfloat16/float16 only, float32 sums",
                bind(WGMMA_VERSION), (T_WGMMA,), dtypes=LOW_PRECISION),  # no atomics: the same bits every run
    ),
    baselines=(
        Baseline("conv1d", "eps + conv1d(pad(k, (T-1, 0)), w.unsqueeze(1), groups=C)", conv1d_baseline,
                 dtypes=DTYPES),
        Baseline("torch-compile", "torch.compile of the conv1d expression (Inductor)", compiled_conv1d_baseline,
                 default=False, dtypes=DTYPES),
        Baseline("fft", "eps + irfft(rfft(k, 2T) · rfft(flip(w), 2T))[:T] (cuFFT; in bfloat16/float16 the "
                        "transforms run in float32 between casts)", lambda: fft_conv_baseline,
                 default=False, work=fft_work, dtypes=DTYPES),
    ),
    dtypes=DTYPES,
    work=work,
    bound="fma",
    input_kinds=("uniform", "rwkv"),
    tolerance=1e-5,
    reduction=reduction,
    feature_archs=("sm_90a",),  # timex-wgmma's wgmma and TMA exist only there
)
