"""The untrusted side: the process that imports a candidate and calls it.

Everything in this package runs beside candidate code, which can read and replace any of
it. So it decides nothing: it answers the judge's requests (load, call) and reports what
happened; the judge checks every answer against what it observes itself. A test proves
that nothing here imports the judge's modules.
"""
