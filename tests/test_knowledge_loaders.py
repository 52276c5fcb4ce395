"""Knowledge base without the model: loaders, chunking, targets, keyword search, fusion."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from knowledge.chunking import chunk_document, embedding_text
from knowledge.loaders import LoadError, load_document, parse_markdown, parse_rst
from knowledge.retrieval import BM25, rrf, tokenize
from knowledge.targets import infer_targets, matches_target, parse_targets, target_where


def make_pdf(pages: list[str], title: str = "", outline: tuple[tuple[str, int], ...] = ()) -> bytes:
    """A small text PDF (Helvetica, one line per text line), then title and bookmarks via pypdf."""
    from pypdf import PdfReader, PdfWriter

    objects: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(len(pages)))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, text in enumerate(pages):
        lines = " ".join(f"({ln}) Tj 0 -16 Td" for ln in text.splitlines())
        stream = f"BT /F1 12 Tf 72 720 Td {lines} ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(out.getvalue())))
    if title:
        writer.add_metadata({"/Title": title})
    for name, page in outline:
        writer.add_outline_item(title=name, page_number=page)
    result = io.BytesIO()
    writer.write(result)
    return result.getvalue()


# --- Markdown, RST, HTML, PDF, text ---------------------------------------------------


def test_markdown_sections_follow_headings_not_code_fences() -> None:
    text = (
        "---\ntags: x\n---\n<!--- licence header\n# Not a heading\n--->\n# Tiling on MI300\n\n"
        "Intro text.\n\n## LDS\n\nUse the LDS.\n\n```cpp\n#define TILE 64\n# not a heading either\n```\n\n"
        "### Bank conflicts\n\n"
        "Pad rows.\n\nSetext section\n--------------\n\nUnderlined.\n"
    )
    doc = parse_markdown(text, "fallback")
    assert doc.title == "Tiling on MI300"
    paths = [s.path for s in doc.sections if s.text.strip()]
    assert paths == [(), ("LDS",), ("LDS", "Bank conflicts"), ("Setext section",)]
    lds = next(s for s in doc.sections if s.path == ("LDS",))
    assert "#define TILE 64" in lds.text and "# not a heading either" in lds.text
    assert "licence" not in doc.text and "Not a heading" not in doc.text


def test_markdown_front_matter_title_and_targets(tmp_path: Path) -> None:
    path = tmp_path / "note.md"
    path.write_text('---\ntitle: "My note"\ntargets: nvidia\n---\n\n## Part\n\nText about tiles.\n')
    doc = load_document(path)
    assert doc.title == "My note"
    assert doc.front_matter["targets"] == "nvidia"
    assert doc.sections[0].path == ("Part",)


def test_rst_headings_with_over_and_underlines() -> None:
    text = (
        "=======\nGuide\n=======\n\nIntro.\n\nInstall\n-------\n\nSteps.\n\n"
        "Details\n~~~~~~~\n\nMore.\n\nUsage\n-----\n\nRun.\n"
    )
    doc = parse_rst(text, "f")
    assert doc.title == "Guide"
    assert [s.path for s in doc.sections if s.text.strip()] == [
        (),
        ("Install",),
        ("Install", "Details"),
        ("Usage",),
    ]


def test_html_headings_become_sections(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>HIP memory</title><style>p{}</style></head><body><nav>menu</nav>"
        "<h1>HIP memory</h1><p>Overview.</p><h2>Pinned memory</h2><p>Page-locked host memory.</p>"
        "<pre>hipHostMalloc(&amp;p, n);</pre><h2>Managed memory</h2><p>One pointer.</p>"
        "<script>x()</script></body></html>"
    )
    doc = load_document(path)
    assert doc.kind == "html" and doc.title == "HIP memory"
    by_path = {s.path: s.text for s in doc.sections}
    assert "hipHostMalloc(&p, n);" in by_path[("Pinned memory",)]
    assert "One pointer." in by_path[("Managed memory",)]
    assert "menu" not in doc.text and "x()" not in doc.text


def test_pdf_pages_named_after_bookmarks(tmp_path: Path) -> None:
    path = tmp_path / "paper.pdf"
    path.write_bytes(
        make_pdf(
            ["Occupancy and waves\nMore text", "Spills go to scratch", "LDS banks"],
            title="A GPU paper",
            outline=(("Background", 0), ("Registers", 1)),
        )
    )
    doc = load_document(path)
    assert doc.kind == "pdf" and doc.title == "A GPU paper"
    assert [s.path for s in doc.sections] == [
        ("Background", "page 1"),
        ("Registers", "page 2"),
        ("Registers", "page 3"),
    ]
    assert "Spills go to scratch" in doc.sections[1].text


def test_bad_files_raise_clear_errors(tmp_path: Path) -> None:
    cases = {
        "empty.md": b"",
        "binary.txt": b"\x00\x01\x02binary",
        "broken.pdf": b"%PDF-1.4 this is not a pdf",
        "data.xyz": b"whatever",
    }
    messages = {}
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(LoadError) as info:
            load_document(tmp_path / name)
        messages[name] = str(info.value)
    assert messages["empty.md"] == "no text found"
    assert "binary" in messages["binary.txt"]
    assert "PDF" in messages["broken.pdf"]
    assert "unsupported file type" in messages["data.xyz"]


def test_plain_text_splits_by_paragraph(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("\n\n".join(f"Paragraph {i} " + "word " * 60 for i in range(12)))
    chunks = chunk_document(load_document(path), size=500, overlap=50)
    assert len(chunks) > 3 and all(len(c.text) <= 500 for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


# --- code -------------------------------------------------------------------------------

CUDA = """#include <cuda_runtime.h>

template <int BLOCK>
__global__ void __launch_bounds__(256) row_softmax(const float* x, float* y, int n) {
    int row = blockIdx.x;
%s
}

extern "C" void launch_softmax(const float* x, float* y, int rows, int n) {
    row_softmax<256><<<rows, 256>>>(x, y, n);
}
""" % "\n".join(f"    float v{i} = x[row * n + {i}];  // unrolled load {i}" for i in range(40))  # noqa: UP031


def test_cuda_chunks_name_their_kernel_and_lines(tmp_path: Path) -> None:
    path = tmp_path / "softmax.cu"
    path.write_text(CUDA)
    doc = load_document(path)
    assert doc.kind == "code" and doc.language == "cuda" and doc.title == "softmax.cu"
    chunks = chunk_document(doc, size=800, overlap=80)
    assert len(chunks) >= 3
    kernel = next(c for c in chunks if c.section_path[0] == "row_softmax")
    assert kernel.text.startswith(
        "template <int BLOCK>\n__global__"
    )  # the template line stays with its kernel
    assert kernel.section_path[-1] == "lines 3-17"
    assert any(c.section_path[0] == "in row_softmax" for c in chunks)
    assert chunks[-1].section_path == ("launch_softmax", "lines 48-50")


def test_python_and_assembly_symbols(tmp_path: Path) -> None:
    py = tmp_path / "kernel.py"
    py.write_text(
        "import triton\n\n\n@triton.jit\ndef gelu_kernel(x_ptr):\n    pass\n\n\nclass Runner:\n    pass\n"
    )
    assert chunk_document(load_document(py))[0].section_path == ("gelu_kernel, Runner", "lines 1-10")
    asm = tmp_path / "kernel.s"
    asm.write_text(
        "\t.text\n\t.globl\tvector_add\nvector_add:\n"
        "\ts_load_dwordx4 s[0:3], s[4:5], 0x0\n.LBB0_1:\n\ts_endpgm\n"
    )
    assert chunk_document(load_document(asm))[0].section_path[0] == "vector_add"


def test_embedding_text_prefers_prose_to_code() -> None:
    text = (
        "Pad the LDS tile by one element per row so that lanes reading a column hit different banks. "
        "See [docs](https://example.com/x).\n\n```cpp\n" + "int a;\n" * 50 + "```"
    )
    out = embedding_text("A long title", "LDS > Bank conflicts", text)
    assert out.startswith("LDS > Bank conflicts: Pad the LDS tile")
    assert "int a" not in out and "https" not in out
    assert embedding_text("Title", "", "words " * 5).startswith("Title: ")


# --- targets ------------------------------------------------------------------------------


def test_target_inference() -> None:
    assert infer_targets("MFMA on MI300X with ROCm; LDS and wavefronts; hipcc") == ["amd"]
    assert infer_targets("wgmma and TMA on H100 (Hopper), compiled with nvcc for sm_90a") == ["nvidia"]
    assert infer_targets(
        "Port CUDA to HIP: hipify turns cudaMalloc into hipMalloc; nvcc or hipcc; CUDA warps"
    ) == ["amd", "nvidia"]
    assert infer_targets("Tiling a matrix product improves cache reuse.") == ["generic"]
    # One passing mention of the other vendor does not tag it.
    assert infer_targets("ROCm MI300 MFMA LDS wavefront hipcc rocprof, unlike CUDA") == ["amd"]
    # CPU documents: intrinsics, vector extensions, OpenMP, cache lines.
    assert infer_targets(
        "AVX2 intrinsics: _mm256_fmadd_ps on __m256, OpenMP threads, 64-byte cache lines, AVX-512 masks"
    ) == ["cpu"]
    assert infer_targets("Arm NEON and SVE2 on Graviton; aarch64 auto-vectorization") == ["cpu"]
    # A GPU guide that vectorises its loads and names the host CPU once is still a GPU guide.
    assert infer_targets(
        "CUDA warps on the H100: vectorized 16-byte loads, tensor cores, wgmma, cp.async; copy from the CPU"
    ) == ["nvidia"]


def test_target_parsing_and_filters() -> None:
    assert parse_targets(None) is None
    assert parse_targets("AMD, nvidia") == ["amd", "nvidia"]
    with pytest.raises(ValueError, match="unknown target"):
        parse_targets("intel")
    with pytest.raises(ValueError):
        parse_targets("generic,amd")
    assert target_where("amd") == {"$or": [{"target_amd": True}, {"target_generic": True}]}
    assert target_where("generic") == {"target_generic": True}
    assert target_where("cpu") == {"$or": [{"target_cpu": True}, {"target_generic": True}]}
    assert matches_target({"target_cpu": True}, "cpu") and not matches_target({"target_nvidia": True}, "cpu")
    assert matches_target({"target_amd": True}, "amd") and matches_target({"target_generic": True}, "nvidia")
    assert not matches_target({"target_amd": True, "target_generic": False}, "nvidia")


# --- keyword search and fusion ----------------------------------------------------------


def test_tokenize_keeps_identifiers_and_their_parts() -> None:
    tokens = tokenize("hipMemcpyAsync and v_mfma_f32_32x32x8f16 registers")
    assert "hipmemcpyasync" in tokens and {"hip", "memcpy", "async"} <= set(tokens)
    assert "v_mfma_f32_32x32x8f16" in tokens and "mfma" in tokens
    assert "register" in tokens and "and" not in tokens


def test_bm25_ranks_exact_identifier_first() -> None:
    docs = [
        "matrix cores multiply tiles",
        "the v_mfma_f32_32x32x8f16 instruction multiplies",
        "register spilling",
    ]
    index = BM25([tokenize(d) for d in docs])
    scores = index.scores(tokenize("v_mfma_f32_32x32x8f16"))
    assert scores.argmax() == 1 and scores[2] == 0


def test_rrf_rewards_agreement() -> None:
    fused = rrf([["a", "b", "c"], ["b", "d"]])
    assert max(fused, key=fused.__getitem__) == "b"
    assert fused["a"] == pytest.approx(1 / 61)
