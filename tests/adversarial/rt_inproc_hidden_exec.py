"""Trick (class 1, in-process): hidden patching through base64 + exec.

The payload (decoded at import and exec'd) imports the judge's modules by names built at
run time and replaces their compare function with one that always passes, and patches
torch.testing.assert_close / torch.allclose; it also tries to set the module-level
tolerance of the problem's utils (make_match_reference) to infinity. Then it returns
garbage (the input itself, unchanged).
"""
import base64

PAYLOAD = base64.b64encode(b"""
import importlib, torch
names = ['sand' + 'box.' + 'com' + 'pare', 'sand' + 'box.judge.' + 'che' + 'cks', 'utils']
for n in names:
    try:
        m = importlib.import_module(n)
    except Exception:
        continue
    for a in dir(m):
        if 'compare' in a or 'match' in a:
            try:
                setattr(m, a, lambda *x, **k: (lambda *y, **z: (True, '')))
            except Exception:
                pass
setattr(torch, 'all' + 'close', lambda *a, **k: True)
setattr(torch.testing, 'assert' + '_close', lambda *a, **k: None)
""").decode()

exec(compile(base64.b64decode(PAYLOAD), "<payload>", "exec"), {})


def custom_kernel(data):
    (x,) = data
    return x.clone()
