"""Issue 15's goals read off recorded runs (`python3 .ci/attention_goals.py GOAL.json [SWEEP.json]`):
attn-flash2 against sdpa-flash at the goal shape (bfloat16, forward >= 60 % and forward+backward >= 45 %
of its TFLOP/s), attn-flash1 against eager at every N >= 1024 of the sweep (float32), and every
attention result's check against its tolerance. Prints a verdict per goal; exit 1 if one is missed or
cannot be read off."""

import json
import sys


def results(path):
    return json.load(open(path))["results"]


def median(rs, subject, dtype, direction, N=None):
    for r in rs:
        c = r["case"]
        if (r["subject"], c["dtype"], c["direction"]) == (subject, dtype, direction) and r["status"] == "ok" \
                and (N is None or c["shape"]["N"] == N):
            return r["stats"]["median"]
    return None


def goal_shape(rs):
    verdicts = []
    for direction, share in (("fwd", 0.60), ("fwdbwd", 0.45)):
        ours, theirs = median(rs, "attn-flash2", "bfloat16", direction), median(rs, "sdpa-flash", "bfloat16", direction)
        if ours is None or theirs is None:
            verdicts.append((f"attn-flash2 {direction} >= {share:.0%} of sdpa-flash", False, "not measured"))
            continue
        reached = theirs / ours  # equal FLOP counts: the TFLOP/s ratio is the inverse time ratio
        verdicts.append((f"attn-flash2 {direction} >= {share:.0%} of sdpa-flash", reached >= share,
                         f"{reached:.0%} ({ours * 1e3:.3f} ms against {theirs * 1e3:.3f} ms)"))
    return verdicts


def sweep(rs):
    verdicts = []
    sizes = sorted({r["case"]["shape"]["N"] for r in rs if r["case"]["shape"]["N"] >= 1024})
    for direction in ("fwd", "fwdbwd"):
        for n in sizes:
            ours, eager = median(rs, "attn-flash1", "float32", direction, n), median(rs, "eager", "float32", direction, n)
            ok = ours is not None and eager is not None and ours < eager
            detail = "not measured" if ours is None or eager is None else f"{eager / ours:.2f}x eager"
            verdicts.append((f"attn-flash1 ahead of eager, {direction}, N={n}", ok, detail))
    return verdicts


def checks(rs):
    wrong = [f"{r['subject']} {r['case']['key']}" for r in rs if r["status"] in ("FAIL", "INVALID", "ERROR")]
    return [("every result within tolerance and trusted", not wrong, "; ".join(wrong) or f"{len(rs)} results")]


def main(paths):
    goal = results(paths[0])
    verdicts = goal_shape(goal) + checks(goal)
    if len(paths) > 1:
        swept = results(paths[1])
        verdicts += sweep(swept) + checks(swept)
    for name, ok, detail in verdicts:
        print(f"{'met   ' if ok else 'MISSED'}  {name}: {detail}")
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
