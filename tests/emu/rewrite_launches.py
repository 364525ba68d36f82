#!/usr/bin/env python3
"""Rewrites CUDA kernel launches for the emulator: kernel<<<grid, block, smem, stream>>>(args)
becomes ::emu::launch("kernel", ::emu::LaunchConfig(grid, block, smem, stream),
[=](auto... a) { kernel(a...); }, args), and each __shared__ declaration is followed by
::emu::poison_shared on the same line. The lambda lets a template kernel deduce its
parameters from the arguments, as the launch did; everything else is left as it is, line for
line. Every file of cuda/ goes through it (most unchanged) into one folder, so that a quoted
#include always finds the rewritten copy.
Usage: rewrite_launches.py IN OUT"""
import re
import sys

LAUNCH = re.compile(r"([A-Za-z_][\w:]*(?:<[^<>;()]*>)?)\s*<<<(.*?)>>>\s*\(\s*(\)?)", re.S)


# A __shared__ array or variable, declared alone on its line: its name is the last word
# before the optional dimensions.
SHARED = re.compile(r"(__shared__\s+[^;=]*?\b(\w+)\s*(?:\[[^;]*\])?\s*;)")


def rewrite(text: str) -> str:
    # Shared memory is poisoned (0xff bytes) once per block, so a read of a slot no thread of
    # the block wrote gives NaN or -1 instead of the previous block's value.
    text = SHARED.sub(lambda m: f"{m.group(1)} ::emu::poison_shared(&{m.group(2)}, sizeof({m.group(2)}));", text)

    def one(m: re.Match) -> str:
        kernel, config, closes = m.group(1), " ".join(m.group(2).split()), m.group(3)
        head = f'::emu::launch("{kernel}", ::emu::LaunchConfig({config}), [=](auto... emu_a) {{ {kernel}(emu_a...); }}'
        # The same number of lines, so compiler messages point at the original line.
        return head + (")" if closes else ", ") + "\n" * m.group(0).count("\n")
    return LAUNCH.sub(one, text)


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    # No #line: GCC would then look for quoted includes next to the original file.
    out = rewrite(text)
    if "<<<" in out:
        sys.exit(f"{src}: a kernel launch the rewrite did not recognise")
    with open(dst, "w", encoding="utf-8") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
