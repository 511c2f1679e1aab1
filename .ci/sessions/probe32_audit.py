"""Who tries to add an audit hook during a first torch.compile (session 32: the sincos torch-compile baseline was
INVALID on process-state, "replaced sys.addaudithook", in a subject process, which refuses audit hooks). Prints
the stack of every attempt."""
import sys
import traceback

import torch


def hook(event, args):
    if event == "sys.addaudithook":
        print("== an audit hook added from:", flush=True)
        traceback.print_stack(limit=12, file=sys.stdout)


sys.addaudithook(hook)
x = torch.rand(1 << 20, device="cuda")
f = torch.compile(lambda x: torch.sin(x) ** 2 + torch.cos(x) ** 2)
print("result", float(f(x).mean()), flush=True)
