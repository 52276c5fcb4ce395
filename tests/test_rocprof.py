"""rocprof readers on real profiler output (../shared/fixtures/rocprof beside the checkout,
as CI has it) and on small rocpd SQLite databases built here with the documented schema."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sandbox import rocprof as rp

FIXTURES = Path(__file__).resolve().parent.parent.parent / "shared" / "fixtures" / "rocprof"
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="../shared/fixtures/rocprof not beside the checkout")
UUID = "_00001234abcd"


@needs_fixtures
def test_rocprofv3_kernel_trace_csv() -> None:
    dispatches = rp.read_kernel_trace_csv(FIXTURES / "kernel_trace.csv")
    assert len(dispatches) == 7
    first = dispatches[0]
    assert first.name == "void addition_kernel<float>(float*, float const*, float const*, int, int)"
    assert first.duration_ns == 8819330200116308 - 8819330200067564
    assert first.dispatch_id == 1 and first.correlation_id == 1451 and first.kernel_id == 16
    assert [d.start_ns for d in dispatches] == sorted(d.start_ns for d in dispatches)
    assert {d.name.split("(")[0].split()[-1] for d in dispatches} == {
        "addition_kernel<float>", "subtract_kernel", "multiply_kernel"
    }


@needs_fixtures
def test_columns_are_found_by_name_not_position(tmp_path: Path) -> None:
    # rocpd convert's form: a leading Guid column, other casing, extra columns, another order.
    path = tmp_path / "converted_kernel_trace.csv"
    path.write_text(
        '"Guid","Kind","End_Timestamp","Lds_Block_Size","Kernel_Name","Vgpr_Count","Start_Timestamp",'
        '"Agent_Id","Dispatch_Id"\n'
        '"abc","KERNEL_DISPATCH",2500,0,"my_kernel(float*) [clone .kd]",32,1000,"Agent 1",7\n'
    )
    (only,) = rp.read_kernel_trace_csv(path)
    assert (only.name, only.start_ns, only.end_ns, only.dispatch_id, only.agent_id) == (
        "my_kernel(float*)", 1000, 2500, 7, "Agent 1"
    )
    with pytest.raises(ValueError):
        rp.read_kernel_trace_csv(FIXTURES / "hip_api_stats.csv")


@needs_fixtures
def test_stats_files_new_and_legacy() -> None:
    api = rp.read_stats_csv(FIXTURES / "hip_api_stats.csv")
    assert api[0].name == "hipStreamCreateWithFlags" and api[0].calls == 4
    assert api[0].min_ns == 3991286 and api[0].stddev_ns is not None
    (gemm,) = rp.read_stats_csv(FIXTURES / "legacy_batched_gemm.stats.csv")
    assert gemm.calls == 1 and gemm.average_ns == 331634184678 and gemm.min_ns is None


@needs_fixtures
def test_mi300_fp8_blockscale_stats() -> None:
    stats = rp.read_stats_csv(FIXTURES / "legacy_mi300_fp8_blockscale.stats.csv")
    assert len(stats) == 4 and not any(s.name.endswith(("[clone .kd]", ".kd")) for s in stats)
    ck = stats[0]
    assert "kernel_gemm_xdl_cshuffle_v3_multi_d_blockscale" in ck.name
    assert (ck.calls, ck.total_ns, ck.average_ns) == (3, 105480, 35160)
    # The candidate is the CK GEMM; PyTorch's helper kernels around it are not.
    mean = rp.mean_call_from_stats(stats, include=[r"blockscale"])
    assert mean["calls"] == 3 and mean["mean_us"] == pytest.approx(35.16)
    # The default harness filter drops the fp8 copy kernels by name.
    default = rp.mean_call_from_stats(stats)
    assert not any("float8_copy" in k for k in default["kernels"])


def test_per_call_durations_from_markers() -> None:
    k = rp.KernelDispatch
    dispatches = [
        k("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 0, 500),
        k("gemm_main", 1000, 1400), k("gemm_epilogue", 1450, 1500),
        k("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", 2000, 2500),
        k("gemm_main", 3000, 3300), k("gemm_epilogue", 3320, 3400),
    ]
    markers = [rp.Marker("ks_call", 900, 1600), rp.Marker("ks_call", 2900, 3500), rp.Marker("other", 0, 9000)]
    calls = rp.per_call_durations(dispatches, markers=markers)
    assert calls.method == "markers"
    assert calls.durations_ns == [450, 380] and calls.durations_us == [0.45, 0.38]
    assert calls.spans_ns == [500, 400]
    assert calls.kernels_per_call == [["gemm_main", "gemm_epilogue"]] * 2
    # Without markers the harness's fills split the calls.
    runs = rp.per_call_durations(dispatches)
    assert runs.method == "runs" and runs.durations_ns == [450, 380] and runs.notes
    assert sum(runs.excluded.values()) == 2
    # include= keeps only named kernels.
    only_main = rp.per_call_durations(dispatches, markers=markers, include=["gemm_main"])
    assert only_main.durations_ns == [400, 300]
    assert only_main.to_dict()["durations_us"] == [0.4, 0.3]


def _make_rocpd(path: Path, inline_times: bool) -> None:
    """A minimal rocpd database: the tables and columns per_call_durations reads.

    Two layouts exist in rocprofiler-sdk's schema: start/end stored in the rows
    (with views named without the uuid), or start_id/end_id into rocpd_timestamp.
    """
    conn = sqlite3.connect(path)
    s = UUID
    conn.executescript(
        f"""
        CREATE TABLE rocpd_string{s} (id INTEGER PRIMARY KEY, guid TEXT, string TEXT NOT NULL UNIQUE);
        CREATE TABLE rocpd_info_kernel_symbol{s} (
            id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, code_object_id INTEGER,
            kernel_name TEXT, display_name TEXT, sgpr_count INTEGER, arch_vgpr_count INTEGER,
            accum_vgpr_count INTEGER, extdata JSONB DEFAULT '{{}}');
        """
    )
    if inline_times:
        conn.executescript(
            f"""
            CREATE TABLE rocpd_kernel_dispatch{s} (
                id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER,
                agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER,
                stream_id INTEGER, start BIGINT NOT NULL, "end" BIGINT NOT NULL,
                private_segment_size INTEGER, group_segment_size INTEGER,
                workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER,
                grid_size_x INTEGER, grid_size_y INTEGER, grid_size_z INTEGER,
                region_name_id INTEGER, event_id INTEGER, extdata JSONB DEFAULT '{{}}');
            CREATE TABLE rocpd_region{s} (
                id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER,
                start BIGINT NOT NULL, "end" BIGINT NOT NULL, name_id INTEGER NOT NULL,
                event_id INTEGER, extdata JSONB DEFAULT '{{}}');
            CREATE VIEW rocpd_string AS SELECT * FROM rocpd_string{s};
            CREATE VIEW rocpd_info_kernel_symbol AS SELECT * FROM rocpd_info_kernel_symbol{s};
            CREATE VIEW rocpd_kernel_dispatch AS SELECT * FROM rocpd_kernel_dispatch{s};
            CREATE VIEW rocpd_region AS SELECT * FROM rocpd_region{s};
            """
        )
    else:
        conn.executescript(
            f"""
            CREATE TABLE rocpd_timestamp{s} (id INTEGER PRIMARY KEY, guid TEXT, value BIGINT NOT NULL,
                phase INTEGER, track_id INTEGER);
            CREATE TABLE rocpd_kernel_dispatch{s} (
                id INTEGER PRIMARY KEY, guid TEXT, track_id INTEGER NOT NULL, kernel_id INTEGER NOT NULL,
                dispatch_id INTEGER NOT NULL, start_id INTEGER NOT NULL, end_id INTEGER NOT NULL,
                private_segment_size INTEGER, group_segment_size INTEGER,
                workgroup_size_x INTEGER, workgroup_size_y INTEGER, workgroup_size_z INTEGER,
                grid_size_x INTEGER, grid_size_y INTEGER, grid_size_z INTEGER,
                region_name_id INTEGER, event_id INTEGER, extdata JSONB DEFAULT '{{}}');
            CREATE TABLE rocpd_region{s} (
                id INTEGER PRIMARY KEY, guid TEXT, track_id INTEGER NOT NULL, name_id INTEGER NOT NULL,
                start_id INTEGER NOT NULL, end_id INTEGER NOT NULL, event_id INTEGER,
                extdata JSONB DEFAULT '{{}}');
            """
        )
    strings = ["ks_call", "hipLaunchKernel"]
    conn.executemany(f"INSERT INTO rocpd_string{s} (id, guid, string) VALUES (?, 'g', ?)",
                     [(i + 1, v) for i, v in enumerate(strings)])
    symbols = [
        (1, "_Z9ks_l2_flushPfl.kd", "ks_l2_flush(float*, long)"),
        (2, "_Z10fp8_gemm_kPKhS0_Pt.kd", "fp8_gemm_k(unsigned char const*, unsigned char const*, unsigned short*)"),
        (3, "_Z6reduceP.kd", "reduce(float*)"),
    ]
    conn.executemany(
        f"INSERT INTO rocpd_info_kernel_symbol{s} (id, guid, kernel_name, display_name) VALUES (?, 'g', ?, ?)",
        symbols,
    )
    # (kernel, start, end, region): flush, gemm + reduce in call 1, flush, gemm + reduce in call 2.
    rows = [(1, 0, 900, None), (2, 1000, 1800, 1), (3, 1810, 1850, 1),
            (1, 2000, 2900, None), (2, 3000, 3700, 1), (3, 3720, 3770, 1)]
    ranges = [(1, 950, 1900), (1, 2950, 3800)]
    if inline_times:
        conn.executemany(
            f'INSERT INTO rocpd_kernel_dispatch{s} (id, guid, nid, pid, agent_id, kernel_id, dispatch_id, '
            'queue_id, stream_id, start, "end", workgroup_size_x, workgroup_size_y, workgroup_size_z, '
            'grid_size_x, grid_size_y, grid_size_z, region_name_id) '
            "VALUES (?, 'g', 1, 1, 2, ?, ?, 1, 0, ?, ?, 256, 1, 1, 65536, 1, 1, ?)",
            [(i + 1, kid, i + 1, st, en, reg) for i, (kid, st, en, reg) in enumerate(rows)],
        )
        conn.executemany(
            f'INSERT INTO rocpd_region{s} (id, guid, nid, pid, tid, start, "end", name_id) '
            "VALUES (?, 'g', 1, 1, 1, ?, ?, ?)",
            [(i + 1, st, en, name) for i, (name, st, en) in enumerate(ranges)],
        )
    else:
        stamp = 0

        def ts(value: int) -> int:
            nonlocal stamp
            stamp += 1
            conn.execute(f"INSERT INTO rocpd_timestamp{s} (id, guid, value) VALUES (?, 'g', ?)", (stamp, value))
            return stamp

        for i, (kid, st, en, reg) in enumerate(rows):
            conn.execute(
                f"INSERT INTO rocpd_kernel_dispatch{s} (id, guid, track_id, kernel_id, dispatch_id, start_id, "
                "end_id, workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, "
                "grid_size_z, region_name_id) VALUES (?, 'g', 1, ?, ?, ?, ?, 256, 1, 1, 65536, 1, 1, ?)",
                (i + 1, kid, i + 1, ts(st), ts(en), reg),
            )
        for i, (name, st, en) in enumerate(ranges):
            conn.execute(
                f"INSERT INTO rocpd_region{s} (id, guid, track_id, name_id, start_id, end_id) "
                "VALUES (?, 'g', 1, ?, ?, ?)",
                (i + 1, name, ts(st), ts(en)),
            )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("inline_times", [True, False], ids=["inline-start-end", "timestamp-table"])
def test_rocpd_database(tmp_path: Path, inline_times: bool) -> None:
    db = tmp_path / "host" / "1234_results.db"
    db.parent.mkdir()
    _make_rocpd(db, inline_times)
    trace = rp.read_rocpd(db)
    assert trace.source == "rocpd" and len(trace.dispatches) == 6
    assert trace.dispatches[1].name == "_Z10fp8_gemm_kPKhS0_Pt"  # '.kd' dropped
    assert trace.dispatches[1].region == "ks_call" and trace.dispatches[0].region is None
    assert [m.name for m in trace.markers] == ["ks_call", "ks_call"]
    calls = rp.per_call_durations(tmp_path)  # a profiler's output folder
    assert calls.method == "regions"
    assert calls.durations_ns == [800 + 40, 700 + 50]
    assert all(len(names) == 2 for names in calls.kernels_per_call)
    gemm_only = rp.per_call_durations(db, include=["fp8_gemm"])
    assert gemm_only.durations_ns == [800, 700]
    # Without markers, the flush kernels (ks_l2_flush) separate the calls.
    runs = rp.per_call_durations(trace.dispatches)
    assert runs.method == "runs" and runs.durations_ns == [840, 750]


@needs_fixtures
def test_profiler_output_folder_with_csv(tmp_path: Path) -> None:
    (tmp_path / "ks_kernel_trace.csv").write_text((FIXTURES / "kernel_trace.csv").read_text())
    (tmp_path / "ks_marker_api_trace.csv").write_text(
        '"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'
        '"MARKER_CORE_API","ks_call",1,1,1,8819330200060000,8819330200125000\n'
    )
    trace = rp.load_trace(tmp_path)
    assert len(trace.dispatches) == 7 and trace.markers[0].name == "ks_call"
    calls = rp.per_call_durations(trace)
    # Only the first dispatch (48744 ns) lies inside the range.
    assert calls.method == "markers" and calls.durations_ns == [48744]


def test_timing_falls_back_to_device_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rp, "find_profiler", lambda: None)
    method = rp.timing_method()
    assert method["method"] == "device_events" and "device events" in method["note"]
    monkeypatch.setattr(rp, "find_profiler", lambda: ("rocprofv3", "/opt/rocm/bin/rocprofv3"))
    assert rp.timing_method()["method"] == "rocprofv3"
    command = rp.profile_command(["python", "run.py"], "/tmp/out")
    assert command[:2] == ["rocprofv3", "--kernel-trace"] and command[-3:] == ["--", "python", "run.py"]
    assert "csv" in command
