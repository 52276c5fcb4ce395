"""Cut a loaded document into chunks that follow its structure.

Sections (headings) are the first cut: a chunk never spans two sections, so each
one cites a single section. A section longer than the chunk size is split by
LangChain's recursive splitter with separators for its format (Markdown keeps
code fences together where it can; C++/CUDA/HIP split at function boundaries;
Python at `def`/`class`). Code files get their enclosing function and line range
as the section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from knowledge.loaders import LoadedDocument

if TYPE_CHECKING:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

# Bump when chunking changes, so unchanged files are re-chunked on the next ingestion.
CHUNKER_VERSION = "1"
CHUNK_SIZE = 2000
CHUNK_OVERLAP = 200
SECTION_SEP = " > "

# A top-level definition starts a line; the look-behind keeps `template <...>` with its function.
_C_SEPARATORS = [
    r"(?<!>)\n(?=(?:template|__global__|__device__|__host__|extern|static|inline|struct|class|namespace|void|int|"
    r"float|double|auto|#pragma)\b)",
    r"\n\n",
    r"\n",
    " ",
    "",
]


@dataclass
class Chunk:
    index: int
    text: str
    section_path: tuple[str, ...]

    @property
    def section(self) -> str:
        return SECTION_SEP.join(self.section_path)


@lru_cache(maxsize=16)
def _splitter(kind: str, language: str | None, size: int, overlap: int) -> RecursiveCharacterTextSplitter:
    # Imported here: re-ingesting unchanged files never needs LangChain.
    from langchain_text_splitters import Language, RecursiveCharacterTextSplitter

    common: dict[str, Any] = {
        "chunk_size": size,
        "chunk_overlap": overlap,
        "add_start_index": True,
        "strip_whitespace": True,
    }
    if kind in ("markdown", "html"):
        return RecursiveCharacterTextSplitter.from_language(Language.MARKDOWN, **common)
    if kind == "rst":
        return RecursiveCharacterTextSplitter.from_language(Language.RST, **common)
    if kind == "code":
        if language == "python":
            return RecursiveCharacterTextSplitter.from_language(Language.PYTHON, **common)
        if language == "asm":
            # Labels and directives start the natural blocks of assembly.
            return RecursiveCharacterTextSplitter(
                separators=[
                    r"\n(?=[A-Za-z_.$][\w.$]*:)",
                    r"\n(?=\s*\.(?:globl|type|section|text)\b)",
                    r"\n\n",
                    r"\n",
                    " ",
                    "",
                ],
                is_separator_regex=True,
                keep_separator=True,
                **common,
            )
        return RecursiveCharacterTextSplitter(
            separators=_C_SEPARATORS, is_separator_regex=True, keep_separator=True, **common
        )
    return RecursiveCharacterTextSplitter(separators=["\n\n", "\n", ". ", " ", ""], **common)


def chunk_document(doc: LoadedDocument, size: int = CHUNK_SIZE, overlap: int = CHUNK_OVERLAP) -> list[Chunk]:
    if doc.kind == "code":
        return _chunk_code(doc, size, overlap)
    chunks: list[Chunk] = []
    for section in doc.sections:
        text = section.text.strip()
        if not text:
            continue
        pieces = (
            [text]
            if len(text) <= size
            else [
                d.page_content
                for d in _splitter(doc.kind, doc.language, size, overlap).create_documents([text])
            ]
        )
        for piece in pieces:
            if piece.strip():
                chunks.append(Chunk(len(chunks), piece, section.path))
    return chunks


# --- code -------------------------------------------------------------------------------

_PY_SYMBOL = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)", re.M)
_C_SYMBOL = re.compile(
    r"^[ \t]*(?:template[ \t]*<[^>\n]*>[ \t]*\n?[ \t]*)?"
    r"(?:(?:__global__|__device__|__host__|static|inline|extern[ \t]+\"C\"|constexpr|__forceinline__|"
    r"unsigned|const)[ \t]+)*"
    r"[A-Za-z_][\w:<>,]*[ \t\*&]+(?:(?:__launch_bounds__\([^)\n]*\)|__noinline__|__forceinline__)[ \t]+)*"
    r"\**(\w+)[ \t]*\([^;{]*\)[ \t\w]*\{",
    re.M,
)
_C_TYPE = re.compile(r"^[ \t]*(?:struct|class)[ \t]+(\w+)[^;]*?\{", re.M)
_ASM_SYMBOL = re.compile(r"^([A-Za-z_][\w.$]*):", re.M)
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "return", "sizeof", "catch"}


def _symbols(text: str, language: str | None) -> list[tuple[int, str]]:
    """(offset, name) of functions, kernels and types defined in a source file."""
    if language == "python":
        found = [(m.start(), m.group(1)) for m in _PY_SYMBOL.finditer(text)]
    elif language == "asm":
        found = [
            (m.start(), m.group(1)) for m in _ASM_SYMBOL.finditer(text) if not m.group(1).startswith(".L")
        ]
    else:
        found = [
            (m.start(), m.group(1)) for m in _C_SYMBOL.finditer(text) if m.group(1) not in _NOT_FUNCTIONS
        ]
        found += [(m.start(), m.group(1)) for m in _C_TYPE.finditer(text)]
    return sorted(set(found))


def _chunk_code(doc: LoadedDocument, size: int, overlap: int) -> list[Chunk]:
    text = doc.sections[0].text
    symbols = _symbols(text, doc.language)
    pieces = (
        [(0, text)]
        if len(text) <= size
        else [
            (int(d.metadata.get("start_index", 0)), d.page_content)
            for d in _splitter("code", doc.language, size, overlap).create_documents([text])
        ]
    )
    chunks: list[Chunk] = []
    for start, piece in pieces:
        if not piece.strip():
            continue
        start = max(start, 0)
        end = start + len(piece)
        first = text.count("\n", 0, start) + 1
        last = first + piece.rstrip("\n").count("\n")
        inside = [name for off, name in symbols if start <= off < end]
        before = [name for off, name in symbols if off < start]
        label = ", ".join(dict.fromkeys(inside)) if inside else (f"in {before[-1]}" if before else "")
        path = (label, f"lines {first}-{last}") if label else (f"lines {first}-{last}",)
        chunks.append(Chunk(len(chunks), piece, path))
    return chunks


# --- what gets indexed ------------------------------------------------------------------

_FENCED = re.compile(r"^\s{0,3}(```|~~~).*?^\s{0,3}\1[^\n]*$", re.M | re.S)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"https?://\S+")
_TAG = re.compile(r"<[^>\n]+>")


def header(title: str, section: str) -> str:
    return f"{title}{SECTION_SEP}{section}" if section else title


def embedding_text(title: str, section: str, text: str) -> str:
    """The section path (the title where there is none) and the chunk's prose. MiniLM sees only
    the first few dozen word pieces on a 2-core budget, so they go to the words that say what
    the chunk is about, not to a long document title, URLs or code."""
    prose = _FENCED.sub(" ", text)
    if len(prose.strip()) < 80:  # mostly code: the code is the content
        prose = text
    prose = _URL.sub(" ", _LINK.sub(r"\1", prose))
    prose = _TAG.sub(" ", prose)
    prose = re.sub(r"[#*_`|>]+", " ", prose)
    prose = re.sub(r"\s+", " ", prose).strip()
    return f"{section or title}: {prose}"


def keyword_text(title: str, section: str, text: str, source_name: str = "") -> str:
    return f"{source_name}\n{header(title, section)}\n{text}"
