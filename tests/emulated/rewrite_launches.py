"""Turn a CUDA source file into C++ for the CPU emulator (tests/emulated): two mechanical edits.

    kernel<<<grid, block[, smem[, stream]]>>>(args);  ->  emu::launch(kernel, grid, block, smem, stream, args);
    extern __shared__ [__align__(n)] T name[];       ->  T* name = reinterpret_cast<T*>(emu::dynamic_smem);

Line numbers are kept and a #line directive names the original file, so compiler messages and the
emulator's reports point into the .cu source.   usage: python rewrite_launches.py IN.cu OUT.cpp
"""

import re
import sys

SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;")
OPENERS, CLOSERS = "([{", ")]}"


def _split_top_level(text):
    """text split at the commas outside any brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in OPENERS) - (c in CLOSERS)
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _closing_paren(text, open_at):
    """Index of the parenthesis that closes the one at open_at."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += (text[i] in OPENERS) - (text[i] in CLOSERS)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced parentheses after offset {open_at}")


def _kernel_start(text, end):
    """Where the kernel expression that ends at `end` begins: a name, maybe qualified, maybe with
    template arguments (flash1_fwd<D>, row_dots<S, DIM>)."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    if text[i - 1] == ">":
        depth = 0
        while True:
            i -= 1
            depth += (text[i] == ">") - (text[i] == "<")
            if depth == 0:
                break
    while i > 0 and (text[i - 1].isalnum() or text[i - 1] in "_:"):
        i -= 1
    return i


def _launch(text, at):
    """(start, end, replacement) for the launch whose <<< is at `at`."""
    start = _kernel_start(text, at)
    config_end = text.index(">>>", at)
    config = _split_top_level(text[at + 3:config_end])
    if not 2 <= len(config) <= 4:
        raise ValueError(f"a launch needs 2 to 4 configuration arguments: {text[start:config_end + 3]!r}")
    config += [" 0", " nullptr"][len(config) - 2:]
    open_at = config_end + 3 + len(text[config_end + 3:]) - len(text[config_end + 3:].lstrip())
    if text[open_at] != "(":
        raise ValueError(f"no argument list after {text[start:config_end + 3]!r}")
    close_at = _closing_paren(text, open_at)
    args = text[open_at + 1:close_at]
    call = f"emu::launch({text[start:at].strip()}, {','.join(config)}{', ' + args if args.strip() else ''})"
    call += "\n" * (text.count("\n", start, close_at + 1) - call.count("\n"))  # keep the line count
    return start, close_at + 1, call


def rewrite(text):
    """(rewritten text, shared declarations rewritten, launches rewritten)."""
    text, shared = SHARED.subn(r"\1* \2 = reinterpret_cast<\1*>(emu::dynamic_smem);", text)
    launches = 0
    while (at := text.find("<<<")) >= 0:
        start, end, call = _launch(text, at)
        text = text[:start] + call + text[end:]
        launches += 1
    return text, shared, launches


def rewrite_file(src, dst):
    with open(src) as f:
        text, shared, launches = rewrite(f.read())
    with open(dst, "w") as f:
        f.write(f'#line 1 "{src}"\n' + text)
    return shared, launches


if __name__ == "__main__":
    shared, launches = rewrite_file(sys.argv[1], sys.argv[2])
    print(f"{sys.argv[1]}: {shared} shared declarations, {launches} launches rewritten", file=sys.stderr)
