"""What the judge and the runner both use: the message framing and the shared-memory arena.

Nothing here decides anything: the runner may hold a copy of these modules and change it,
and the judge still reads every byte that crosses as untrusted data (JSON, never pickle).
"""

# The library operators the runner's own code uses around a candidate's call (building inputs, the
# digest, copies into the arena). Library use is judged from samples of the runner's whole process
# (sandbox/judge/libwatch.py), so a problem may not forbid one of these (sandbox/problem.py refuses it).
HARNESS_OPS = frozenset({"copy", "copy_", "fill", "fill_", "lerp", "roll", "mul", "bitwise_xor", "rshift",
                         "__rshift__", "empty", "empty_like", "view", "_to_copy", "to", "clone", "zero_"})
