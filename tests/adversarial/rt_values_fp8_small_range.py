# Cheat (fp8_blockscale_gemm; red-team round 25): the CPU seed with every fp8 value of magnitude 8 or more
# decoded as 0. Wrong for valid inputs (e4m3fn reaches 448), yet randn never draws one: the data needed a
# value case over its whole range. The seed's own source, read from the problem's folder, with one line
# added to its decoder.
from pathlib import Path

import task

SEED = Path(task.__file__).parent / "seeds" / "cpu.py"
HONEST = "  else magnitude = std::ldexp(1.0f + mantissa / 8.0f, exponent - 7);\n"
source = SEED.read_text()
assert HONEST in source, "the seed's decoder changed: follow it here"
exec(compile(source.replace(HONEST, HONEST + "  if (exponent >= 10) magnitude = 0.0f;\n"), str(SEED), "exec"))
