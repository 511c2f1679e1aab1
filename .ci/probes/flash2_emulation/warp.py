"""Probe helper: a lane-exact emulation of the warp-level pieces of cudabench/tensor_core.cuh (ldmatrix, mma.sync
m16n8k16 bf16, cp.async groups) over a byte-addressed shared memory, to run flash2.cu's index math on
a CPU. Registers are (32, ...) numpy arrays, one row per lane."""
import numpy as np

LANE = np.arange(32)
G, T = LANE // 4, LANE % 4


def to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (as __float2bfloat16_rn)."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint32)
    nan = np.isnan(np.asarray(x, np.float32))
    return np.where(nan, 0x7FC0, r).astype(np.uint32)


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def pack_floats(lo, hi):
    return to_bf16_bits(lo) | (to_bf16_bits(hi) << 16)


def lo16(r):
    return bf16_to_f32(r & 0xFFFF)


def hi16(r):
    return bf16_to_f32(r >> 16)


class Smem:
    def __init__(self, nbytes):
        self.b = np.full(nbytes, 0xAB, np.uint8)  # garbage until written
        self.groups, self.current = [], []

    def h(self, byte, count):  # 16-bit values
        assert byte % 2 == 0 and 0 <= byte and byte + 2 * count <= len(self.b), byte
        return self.b[byte:byte + 2 * count].view(np.uint16)

    def cp_async_16(self, dst, src_bytes):
        assert dst % 16 == 0 and len(src_bytes) == 16
        self.current.append((dst, src_bytes.copy()))

    def commit(self):
        self.groups.append(self.current)
        self.current = []

    def wait(self, n):
        while len(self.groups) > n:
            for dst, data in self.groups.pop(0):
                self.b[dst:dst + 16] = data

    def write_u32(self, byte, value):
        assert byte % 4 == 0
        self.b[byte:byte + 4] = np.array([value], np.uint32).view(np.uint8)

    def f32(self, byte, count):
        assert byte % 4 == 0
        return self.b[byte:byte + 4 * count].view(np.float32)


def ldmatrix_x4(smem, addrs, trans):
    """addrs: (32,) byte offsets; lane l addresses row l%8 of matrix l//8. Returns (32, 4) uint32."""
    out = np.zeros((32, 4), np.uint32)
    for i in range(4):
        M = np.stack([smem.h(int(addrs[8 * i + r]), 8) for r in range(8)]).astype(np.uint32)  # 8 x 8
        assert all(int(addrs[8 * i + r]) % 16 == 0 for r in range(8))
        if trans:
            lo, hi = M[2 * T, G], M[2 * T + 1, G]
        else:
            lo, hi = M[G, 2 * T], M[G, 2 * T + 1]
        out[:, i] = lo | (hi << 16)
    return out


def mma(d, a, b0, b1):
    """d (32, 4) float32 += A(a) . B(b0, b1)."""
    A = np.zeros((16, 16), np.float32)
    A[G, 2 * T], A[G, 2 * T + 1] = lo16(a[:, 0]), hi16(a[:, 0])
    A[G + 8, 2 * T], A[G + 8, 2 * T + 1] = lo16(a[:, 1]), hi16(a[:, 1])
    A[G, 2 * T + 8], A[G, 2 * T + 9] = lo16(a[:, 2]), hi16(a[:, 2])
    A[G + 8, 2 * T + 8], A[G + 8, 2 * T + 9] = lo16(a[:, 3]), hi16(a[:, 3])
    B = np.zeros((16, 8), np.float32)
    B[2 * T, G], B[2 * T + 1, G] = lo16(b0), hi16(b0)
    B[2 * T + 8, G], B[2 * T + 9, G] = lo16(b1), hi16(b1)
    C = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    d[:, 0] += C[G, 2 * T]
    d[:, 1] += C[G, 2 * T + 1]
    d[:, 2] += C[G + 8, 2 * T]
    d[:, 3] += C[G + 8, 2 * T + 1]


def quad_sum(x):  # __shfl_xor 1 then 2, (32,) per lane
    x = x + x[LANE ^ 1]
    return x + x[LANE ^ 2]


def quad_max(x):
    x = np.maximum(x, x[LANE ^ 1])
    return np.maximum(x, x[LANE ^ 2])
