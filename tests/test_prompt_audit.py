"""The prompt audit (bench/prompt_audit.py): every role's prompt holds the facts it needs, on the
bundled seeds and on a grown leader, and a grown kernel's code reaches a prompt once."""

from __future__ import annotations

import pytest

import bench.prompt_audit as audit


@pytest.mark.slow  # loads the embedding model for the primer's store
@pytest.mark.parametrize("fixture", audit.FIXTURES)
def test_every_role_holds_its_facts_and_a_grown_kernel_is_printed_once(fixture: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit, "FIXTURE", fixture)
    rows = audit.audit("cpu")
    assert [r["role"] for r in rows] == list(audit.ROLES)
    assert all(not r["missing"] for r in rows), [(r["role"], r["missing"]) for r in rows]
    researcher = next(r for r in rows if r["role"] == "researcher")
    assert researcher["literature"]["off_target"] == 0
    if fixture == "grown":
        prompts = audit.render_prompts("cpu")
        # The base in full, its reference as a diff; the Coder's plan does not use the reference.
        assert prompts["researcher"].count("static inline __m512 exp512") == 1
        assert prompts["coder"].count("static inline __m512 exp512") == 1
