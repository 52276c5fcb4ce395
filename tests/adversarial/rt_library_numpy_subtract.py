"""Class 4, by-name gap: vector_add through numpy's subtract ufunc: out = a - (-b), bitwise a + b.
vector_add forbids torch's add/sub/sum/... and numpy's *_add loops by symbol; FLOAT_subtract and
FLOAT_negative are neither. Same family as the defeated rt_library_numpy_add (np.add)."""
import numpy as np


def custom_kernel(data):
    a, b, out = data
    o = out.numpy()
    np.negative(b.numpy(), out=o)
    np.subtract(a.numpy(), o, out=o)
    return out
