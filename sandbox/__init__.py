"""Build, check and time kernel candidates.

The worker side (problem loading, native builds, correctness, timing) needs
only torch, the standard library and PyYAML, so it runs on a bare GPU host.
The orchestrator side (`evaluator`, `pool`, `verdict`) adds pydantic.
"""

SCHEMA_VERSION = 1
