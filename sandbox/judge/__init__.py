"""The trusted side of an evaluation: the judge process and what it owns.

The judge generates every input from secret seeds, computes and keeps the reference's
outputs, builds native code, compares every checked output, bounds the runner's timings
with its own clock, computes the statistics and the speed of light, and writes the
verdict. It never imports a candidate: the candidate lives in the runner process
(sandbox/runner/), inside an OS sandbox, and reaches the judge only through JSON messages.
"""
