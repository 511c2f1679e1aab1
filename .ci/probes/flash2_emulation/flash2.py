"""Probe: kernels/attention/flash2.cu's forward and backward transliterated line by line onto a
lane-exact emulation of ldmatrix, mma.sync and cp.async groups (warp.py), in bfloat16, checked against
float64 attention at ragged N, causal and not, D 64 and 128. It checks the index math (fragments,
swizzle, masks, the double-buffer pipeline: a cp.async group lands only at its wait) without a GPU;
keep it in step with flash2.cu when the kernel changes. `python3 .ci/probes/flash2_emulation/flash2.py`
(a few minutes on a CPU). Written 2026-11-23, when no GPU could be had: worst relative error 3.2e-3
against a bfloat16 tolerance of 1.6e-2."""
import math
import sys

import numpy as np

from warp import (G, LANE, T, Smem, bf16_to_f32, hi16, ldmatrix_x4, lo16, mma, pack_floats, quad_max,
                  quad_sum, to_bf16_bits)

LOG2E, LN2 = np.float32(1.4426950408889634), np.float32(0.6931471805599453)
KEYS, FWD_WARPS, BWD_WARPS, BWD_ROWS = 64, 8, 4, 64
FWD_ROWS = FWD_WARPS * 16
MAT, R8 = LANE // 8, LANE % 8


def swizzled(width, row, chunk):
    return row * width * 2 + ((chunk ^ (row & 7)) << 4)


def load_tile(sm, base, head_bits, r0, N, D, rows):
    """head_bits: (N, D) uint16 of one head."""
    chunks = D // 8
    for i in range(rows * chunks):
        r, c = i // chunks, i % chunks
        inside = r0 + r < N
        data = head_bits[r0 + r, c * 8:c * 8 + 8].view(np.uint8) if inside else np.zeros(16, np.uint8)
        sm.cp_async_16(base + swizzled(D, r, c), data)


def forward(q, k, v, causal, scale):
    """q, k, v: (BH, N, D) uint16 bf16 bits. Returns out bits (BH, N, D), lse (BH, N)."""
    BH, N, D = q.shape
    out = np.full((BH, N, D), 0x7FC0, np.uint16)  # NaN: unwritten shows
    lse = np.full((BH, N), np.nan, np.float32)
    scale_log2 = np.float32(scale) * LOG2E
    Q_BYTES, KV_BYTES = FWD_ROWS * D * 2, KEYS * D * 2
    grid_x = (N + FWD_ROWS - 1) // FWD_ROWS
    for bh in range(BH):
        for bx in range(grid_x):
            sm = Smem(Q_BYTES + 4 * KV_BYTES)
            qs, ks, vs = 0, Q_BYTES, Q_BYTES + 2 * KV_BYTES
            q0 = ((grid_x - 1 - bx) if causal else bx) * FWD_ROWS
            kv_end = min(N, q0 + FWD_ROWS) if causal else N
            tiles = (kv_end + KEYS - 1) // KEYS
            load_tile(sm, qs, q[bh], q0, N, D, FWD_ROWS)
            load_tile(sm, ks, k[bh], 0, N, D, KEYS)
            load_tile(sm, vs, v[bh], 0, N, D, KEYS)
            sm.commit()
            W = [dict(qf=[None] * (D // 16), o=np.zeros((D // 8, 32, 4), np.float32),
                      m=np.full((2, 32), -np.inf, np.float32), l=np.zeros((2, 32), np.float32))
                 for _ in range(FWD_WARPS)]
            for j in range(tiles):
                if j + 1 < tiles:
                    load_tile(sm, ks + ((j + 1) & 1) * KV_BYTES, k[bh], (j + 1) * KEYS, N, D, KEYS)
                    load_tile(sm, vs + ((j + 1) & 1) * KV_BYTES, v[bh], (j + 1) * KEYS, N, D, KEYS)
                sm.commit()
                sm.wait(1)
                # __syncthreads
                for warp in range(FWD_WARPS):
                    w = W[warp]
                    w0 = warp * 16
                    rows = [q0 + w0 + G, q0 + w0 + G + 8]
                    if j == 0:
                        for kc in range(D // 16):
                            w["qf"][kc] = ldmatrix_x4(sm, qs + np.array([swizzled(D, w0 + (mt & 1) * 8 + r8, kc * 2 + (mt >> 1)) for mt, r8 in zip(MAT, R8)]), False)
                    kt, vt = ks + (j & 1) * KV_BYTES, vs + (j & 1) * KV_BYTES
                    k0 = j * KEYS
                    if not causal or k0 <= q0 + w0 + 15:
                        s = np.zeros((KEYS // 8, 32, 4), np.float32)
                        for kc in range(D // 16):
                            for np_ in range(KEYS // 16):
                                b = ldmatrix_x4(sm, kt + np.array([swizzled(D, np_ * 16 + (mt >> 1) * 8 + r8, kc * 2 + (mt & 1)) for mt, r8 in zip(MAT, R8)]), False)
                                mma(s[2 * np_], w["qf"][kc], b[:, 0], b[:, 1])
                                mma(s[2 * np_ + 1], w["qf"][kc], b[:, 2], b[:, 3])
                        edge = k0 + KEYS > N or (causal and k0 + KEYS - 1 > q0 + w0)
                        top = w["m"].copy()
                        for nt in range(KEYS // 8):
                            for e in range(4):
                                key = k0 + nt * 8 + 2 * T + (e & 1)
                                x = s[nt, :, e] * scale_log2
                                if edge:
                                    masked = (key >= N) | (causal & (key > rows[e >> 1]))
                                    x = np.where(masked, -np.inf, x).astype(np.float32)
                                s[nt, :, e] = x
                                top[e >> 1] = np.maximum(top[e >> 1], x)
                        for r in range(2):
                            top[r] = quad_max(top[r])
                            base = np.where(top[r] == -np.inf, 0, top[r]).astype(np.float32)
                            alpha = np.exp2(w["m"][r] - base).astype(np.float32)
                            w["m"][r] = top[r]
                            w["l"][r] *= alpha
                            for nt in range(D // 8):
                                w["o"][nt, :, 2 * r] *= alpha
                                w["o"][nt, :, 2 * r + 1] *= alpha
                            for nt in range(KEYS // 8):
                                s[nt, :, 2 * r] = np.exp2(s[nt, :, 2 * r] - base)
                                s[nt, :, 2 * r + 1] = np.exp2(s[nt, :, 2 * r + 1] - base)
                                w["l"][r] += s[nt, :, 2 * r] + s[nt, :, 2 * r + 1]
                        for kc in range(KEYS // 16):
                            a = np.stack([pack_floats(s[2 * kc, :, 0], s[2 * kc, :, 1]), pack_floats(s[2 * kc, :, 2], s[2 * kc, :, 3]),
                                          pack_floats(s[2 * kc + 1, :, 0], s[2 * kc + 1, :, 1]),
                                          pack_floats(s[2 * kc + 1, :, 2], s[2 * kc + 1, :, 3])], axis=1)
                            for np_ in range(D // 16):
                                b = ldmatrix_x4(sm, vt + np.array([swizzled(D, kc * 16 + (mt & 1) * 8 + r8, np_ * 2 + (mt >> 1)) for mt, r8 in zip(MAT, R8)]), True)
                                mma(w["o"][2 * np_], a, b[:, 0], b[:, 1])
                                mma(w["o"][2 * np_ + 1], a, b[:, 2], b[:, 3])
                # __syncthreads
            for warp in range(FWD_WARPS):
                w = W[warp]
                rows = [q0 + warp * 16 + G, q0 + warp * 16 + G + 8]
                for r in range(2):
                    w["l"][r] = quad_sum(w["l"][r])
                    for lane in range(32):
                        row = rows[r][lane]
                        if row >= N:
                            continue
                        inv = np.float32(1) / w["l"][r][lane]
                        t = lane % 4
                        for nt in range(D // 8):
                            p = pack_floats(np.float32(w["o"][nt, lane, 2 * r] * inv), np.float32(w["o"][nt, lane, 2 * r + 1] * inv))
                            out[bh, row, nt * 8 + 2 * t] = p & 0xFFFF
                            out[bh, row, nt * 8 + 2 * t + 1] = p >> 16
                        if t == 0:
                            lse[bh, row] = (w["m"][r][lane] + np.log2(w["l"][r][lane])) * LN2
    return out, lse


def load_rows(sm, dst, src, r0, N):
    for i in range(BWD_ROWS // 4):
        r = r0 + 4 * i
        if r + 4 <= N and (r % 4) == 0:  # the float32 array starts 16-byte aligned
            sm.cp_async_16(dst + 16 * i, src[r:r + 4].view(np.uint8))
        else:
            vals = np.array([src[r + e] if r + e < N else 0 for e in range(4)], np.float32)
            sm.b[dst + 16 * i:dst + 16 * i + 16] = vals.view(np.uint8)


def backward(q, k, v, out, lse, dout, causal, scale):
    BH, N, D = q.shape
    f = lambda x: bf16_to_f32(x.astype(np.uint32))
    delta = (f(dout) * f(out)).sum(-1, dtype=np.float32)
    dq_accum = np.zeros((BH, N, D), np.float32)
    dk = np.full((BH, N, D), 0x7FC0, np.uint16)
    dv = np.full((BH, N, D), 0x7FC0, np.uint16)
    scale_log2 = np.float32(scale) * LOG2E
    KV_BYTES, Q_BYTES = KEYS * D * 2, BWD_ROWS * D * 2
    ks, vs = 0, KV_BYTES
    qs = vs + KV_BYTES
    dos = qs + 2 * Q_BYTES
    dss = dos + 2 * Q_BYTES
    lses = dss + KEYS * BWD_ROWS * 2
    dels = lses + 2 * BWD_ROWS * 4
    for bh in range(BH):
        for bx in range((N + KEYS - 1) // KEYS):
            sm = Smem(dels + 2 * BWD_ROWS * 4)
            k0 = bx * KEYS
            first = k0 // BWD_ROWS if causal else 0
            last = (N + BWD_ROWS - 1) // BWD_ROWS

            def prefetch(tile, buf):
                load_tile(sm, qs + buf * Q_BYTES, q[bh], tile * BWD_ROWS, N, D, BWD_ROWS)
                load_tile(sm, dos + buf * Q_BYTES, dout[bh], tile * BWD_ROWS, N, D, BWD_ROWS)
                load_rows(sm, lses + buf * BWD_ROWS * 4, lse[bh], tile * BWD_ROWS, N)
                load_rows(sm, dels + buf * BWD_ROWS * 4, delta[bh], tile * BWD_ROWS, N)

            load_tile(sm, ks, k[bh], k0, N, D, KEYS)
            load_tile(sm, vs, v[bh], k0, N, D, KEYS)
            prefetch(first, 0)
            sm.commit()
            W = [dict(dka=np.zeros((D // 8, 32, 4), np.float32), dva=np.zeros((D // 8, 32, 4), np.float32))
                 for _ in range(BWD_WARPS)]
            for i in range(first, last):
                buf = (i - first) & 1
                if i + 1 < last:
                    prefetch(i + 1, buf ^ 1)
                sm.commit()
                sm.wait(1)
                qt, dot = qs + buf * Q_BYTES, dos + buf * Q_BYTES
                lt = sm.f32(lses + buf * BWD_ROWS * 4, BWD_ROWS).copy()
                dt = sm.f32(dels + buf * BWD_ROWS * 4, BWD_ROWS).copy()
                q0 = i * BWD_ROWS
                for warp in range(BWD_WARPS):
                    w = W[warp]
                    kw = warp * 16
                    keys = [k0 + kw + G, k0 + kw + G + 8]
                    s = np.zeros((BWD_ROWS // 8, 32, 4), np.float32)
                    dp = np.zeros((BWD_ROWS // 8, 32, 4), np.float32)
                    for kc in range(D // 16):
                        ad = np.array([swizzled(D, kw + (mt & 1) * 8 + r8, kc * 2 + (mt >> 1)) for mt, r8 in zip(MAT, R8)])
                        ka, va = ldmatrix_x4(sm, ks + ad, False), ldmatrix_x4(sm, vs + ad, False)
                        for np_ in range(BWD_ROWS // 16):
                            bd = np.array([swizzled(D, np_ * 16 + (mt >> 1) * 8 + r8, kc * 2 + (mt & 1)) for mt, r8 in zip(MAT, R8)])
                            b = ldmatrix_x4(sm, qt + bd, False)
                            mma(s[2 * np_], ka, b[:, 0], b[:, 1])
                            mma(s[2 * np_ + 1], ka, b[:, 2], b[:, 3])
                            b = ldmatrix_x4(sm, dot + bd, False)
                            mma(dp[2 * np_], va, b[:, 0], b[:, 1])
                            mma(dp[2 * np_ + 1], va, b[:, 2], b[:, 3])
                    edge = q0 + BWD_ROWS > N or k0 + KEYS > N or (causal and q0 < k0 + KEYS)
                    for nt in range(BWD_ROWS // 8):
                        for e in range(4):
                            col = nt * 8 + 2 * T + (e & 1)
                            query = q0 + col
                            p = np.exp2(s[nt, :, e] * scale_log2 - lt[col] * LOG2E).astype(np.float32)
                            if edge:
                                masked = (query >= N) | (keys[e >> 1] >= N) | (causal & (keys[e >> 1] > query))
                                p = np.where(masked, 0, p).astype(np.float32)
                            s[nt, :, e] = p
                            dp[nt, :, e] = p * (dp[nt, :, e] - dt[col])
                    for kc in range(BWD_ROWS // 16):
                        pk = lambda x: np.stack([pack_floats(x[2 * kc, :, 0], x[2 * kc, :, 1]), pack_floats(x[2 * kc, :, 2], x[2 * kc, :, 3]),
                                                 pack_floats(x[2 * kc + 1, :, 0], x[2 * kc + 1, :, 1]),
                                                 pack_floats(x[2 * kc + 1, :, 2], x[2 * kc + 1, :, 3])], axis=1)
                        pa, da = pk(s), pk(dp)
                        for np_ in range(D // 16):
                            bd = np.array([swizzled(D, kc * 16 + (mt & 1) * 8 + r8, np_ * 2 + (mt >> 1)) for mt, r8 in zip(MAT, R8)])
                            b = ldmatrix_x4(sm, dot + bd, True)
                            mma(w["dva"][2 * np_], pa, b[:, 0], b[:, 1])
                            mma(w["dva"][2 * np_ + 1], pa, b[:, 2], b[:, 3])
                            b = ldmatrix_x4(sm, qt + bd, True)
                            mma(w["dka"][2 * np_], da, b[:, 0], b[:, 1])
                            mma(w["dka"][2 * np_ + 1], da, b[:, 2], b[:, 3])
                        col = 2 * T * 2
                        for h in range(2):
                            nt = 2 * kc + h
                            for lane in range(32):
                                sm.write_u32(dss + swizzled(BWD_ROWS, kw + G[lane], nt) + col[lane], da[lane, 2 * h])
                                sm.write_u32(dss + swizzled(BWD_ROWS, kw + G[lane] + 8, nt) + col[lane], da[lane, 2 * h + 1])
                # __syncthreads
                for warp in range(BWD_WARPS):
                    for half in range(2):
                        acc = np.zeros((D // 16, 32, 4), np.float32)
                        for kc in range(KEYS // 16):
                            a = ldmatrix_x4(sm, dss + np.array([swizzled(BWD_ROWS, kc * 16 + (mt >> 1) * 8 + r8, 2 * warp + (mt & 1)) for mt, r8 in zip(MAT, R8)]), True)
                            for np_ in range(D // 32):
                                b = ldmatrix_x4(sm, ks + np.array([swizzled(D, kc * 16 + (mt & 1) * 8 + r8, half * (D // 16) + np_ * 2 + (mt >> 1)) for mt, r8 in zip(MAT, R8)]), True)
                                mma(acc[2 * np_], a, b[:, 0], b[:, 1])
                                mma(acc[2 * np_ + 1], a, b[:, 2], b[:, 3])
                        for r in range(2):
                            for lane in range(32):
                                query = q0 + warp * 16 + G[lane] + 8 * r
                                if query >= N:
                                    continue
                                base = half * (D // 2) + 2 * T[lane]
                                for nt in range(D // 16):
                                    dq_accum[bh, query, base + nt * 8] += acc[nt, lane, 2 * r]
                                    dq_accum[bh, query, base + nt * 8 + 1] += acc[nt, lane, 2 * r + 1]
                # __syncthreads
            for warp in range(BWD_WARPS):
                w = W[warp]
                for r in range(2):
                    for lane in range(32):
                        key = k0 + warp * 16 + G[lane] + 8 * r
                        if key >= N:
                            continue
                        t = lane % 4
                        for nt in range(D // 8):
                            pk_ = pack_floats(np.float32(w["dka"][nt, lane, 2 * r] * scale), np.float32(w["dka"][nt, lane, 2 * r + 1] * scale))
                            dk[bh, key, nt * 8 + 2 * t], dk[bh, key, nt * 8 + 2 * t + 1] = pk_ & 0xFFFF, pk_ >> 16
                            pv = pack_floats(w["dva"][nt, lane, 2 * r], w["dva"][nt, lane, 2 * r + 1])
                            dv[bh, key, nt * 8 + 2 * t], dv[bh, key, nt * 8 + 2 * t + 1] = pv & 0xFFFF, pv >> 16
    dq = to_bf16_bits(dq_accum * np.float32(scale)).astype(np.uint16)
    return dq, dk, dv


def reference(q, k, v, dout, causal):
    import torch
    qd, kd, vd = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    s = qd @ kd.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ vd
    o.backward(torch.tensor(dout, dtype=torch.float64))
    return o.detach().numpy(), qd.grad.numpy(), kd.grad.numpy(), vd.grad.numpy()


def main():
    rng = np.random.default_rng(0)
    worst = 0
    for BH, N, D, causal in [(1, 1, 64, 1), (2, 37, 64, 1), (1, 129, 128, 0), (1, 100, 128, 1), (1, 200, 64, 1),
                             (1, 130, 64, 0), (1, 64, 64, 1), (1, 256, 64, 1)]:
        bits = [to_bf16_bits(rng.standard_normal((BH, N, D)).astype(np.float32)).astype(np.uint16) for _ in range(4)]
        q, k, v, do = bits
        scale = 1 / math.sqrt(D)
        out, lse = forward(q, k, v, bool(causal), scale)
        dq, dk, dv = backward(q, k, v, out, lse, do, bool(causal), scale)
        f = lambda x: bf16_to_f32(x.astype(np.uint32)).astype(np.float64)
        ref = reference(f(q), f(k), f(v), f(do), bool(causal))
        errs = [np.linalg.norm(f(x) - r) / np.linalg.norm(r) for x, r in zip((out, dq, dk, dv), ref)]
        worst = max(worst, max(errs))
        print((BH, N, D, causal), " ".join(f"{e:.2e}" for e in errs), flush=True)
    print("worst", worst, "PASS" if worst < 0.0157 else "FAIL")


if __name__ == "__main__":
    main()
