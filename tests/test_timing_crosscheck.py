"""The whole-device-sync cross-check's decision, apart from the GPU that feeds it."""

from __future__ import annotations

from sandbox.timing import HostSynced


def test_explained_time_is_not_suspicious() -> None:
    # Returned after 60 µs, events saw 5000 µs, device idle after 5080 µs: 20 µs unexplained.
    assert not HostSynced(60.0, 5080.0, 5000.0, 20.0, 5).suspicious()


def test_work_the_events_do_not_see_is_suspicious() -> None:
    # Half the device time ran outside the timed stream.
    check = HostSynced(40.0, 10040.0, 5000.0, 5000.0, 5)
    assert check.suspicious()
    assert "10040.0 µs" in check.describe() and "median of 5" in check.describe()


def test_small_kernels_have_an_absolute_allowance() -> None:
    # 10% of 100 µs is 10 µs, but launch jitter of a few tens of µs is not a cheat.
    assert not HostSynced(10.0, 100.0, 65.0, 25.0, 5).suspicious()
    assert HostSynced(10.0, 200.0, 100.0, 90.0, 5).suspicious()
