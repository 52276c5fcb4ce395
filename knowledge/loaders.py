"""Read a file into a title and a list of sections, whatever its format.

Every format is reduced to the same shape (sections with a heading path) so chunking
and citation work alike for Markdown, reStructuredText, HTML, PDF, text and code.
HTML is first turned into Markdown-like text so one heading parser serves both.
"""

from __future__ import annotations

import html
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from knowledge.models import DocKind

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 50 * 1024 * 1024

KIND_BY_SUFFIX: dict[str, DocKind] = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".mdx": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".txt": "text",
    ".text": "text",
    ".cu": "code",
    ".cuh": "code",
    ".hip": "code",
    ".cpp": "code",
    ".cc": "code",
    ".cxx": "code",
    ".c": "code",
    ".h": "code",
    ".hpp": "code",
    ".py": "code",
    ".s": "code",
    ".S": "code",
}

LANGUAGE_BY_SUFFIX: dict[str, str] = {
    ".cu": "cuda",
    ".cuh": "cuda",
    ".hip": "hip",
    ".cpp": "cpp",
    ".cc": "cpp",
    ".cxx": "cpp",
    ".c": "c",
    ".h": "cpp",
    ".hpp": "cpp",
    ".py": "python",
    ".s": "asm",
    ".S": "asm",
}


class LoadError(Exception):
    """A file that cannot be read as a document; the message says why."""


@dataclass
class Section:
    path: tuple[str, ...]
    text: str


@dataclass
class LoadedDocument:
    title: str
    kind: DocKind
    sections: list[Section]
    language: str | None = None
    front_matter: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)


def kind_of(path: Path) -> DocKind | None:
    return KIND_BY_SUFFIX.get(path.suffix) or KIND_BY_SUFFIX.get(path.suffix.lower())


def load_document(path: Path, data: bytes | None = None) -> LoadedDocument:
    """Parse one file. `data` lets the caller hash and parse the same bytes."""
    kind = kind_of(path)
    if kind is None:
        raise LoadError(f"unsupported file type {path.suffix or '(none)'!r}")
    if data is None:
        data = path.read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise LoadError(
            f"file too large ({len(data) // 1024 // 1024} MiB > {MAX_FILE_BYTES // 1024 // 1024} MiB)"
        )
    if kind == "pdf":
        doc = _load_pdf(path, data)
    else:
        text = _decode(data)
        if kind == "markdown":
            doc = parse_markdown(text, path.stem)
        elif kind == "rst":
            doc = parse_rst(text, path.stem)
        elif kind == "html":
            doc = parse_html(text, path.stem)
        elif kind == "code":
            doc = LoadedDocument(
                path.name, "code", [Section((), text)], LANGUAGE_BY_SUFFIX.get(path.suffix.lower())
            )
        else:
            doc = LoadedDocument(path.stem, "text", [Section((), text)])
    doc.sections = [s for s in doc.sections if s.text.strip()]
    if not doc.sections:
        raise LoadError("no text found")
    return doc


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise LoadError("binary content (NUL bytes) in a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Old documents in Latin-1 or cp1252 still read; a wrong guess only garbles accents.
        return data.decode("latin-1")


# --- Markdown ---------------------------------------------------------------------------

_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")


def clean_heading(text: str) -> str:
    text = html.unescape(text)
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML such as <sup>
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their words
    text = re.sub(r"(\*\*|__|\*|`)", "", text)
    text = re.sub(r"\{[^}]*\}\s*$", "", text)  # MyST/pandoc attributes {#id}
    return re.sub(r"\s+", " ", text).strip()


def _front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        return {}, text
    match = re.match(r"^---[ \t]*\n(.*?\n)---[ \t]*\n", text, re.S)
    if not match:
        return {}, text
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError:
        meta = None
    # Keep the line count the same, so nothing shifts; the front matter itself is not content.
    return (meta if isinstance(meta, dict) else {}), "\n" * match.group(0).count("\n") + text[match.end() :]


def parse_markdown(text: str, fallback_title: str, kind: DocKind = "markdown") -> LoadedDocument:
    """Split at ATX and setext headings outside code fences; `#define` in a fence is code."""
    meta, body = _front_matter(text)
    lines = _drop_html_comments(body.splitlines())
    headings: list[tuple[int, int, str]] = []  # (line index, level, text)
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
            continue
        if fence is not None:
            continue
        m = _ATX.match(line)
        if m:
            headings.append((i, len(m.group(1)), clean_heading(m.group(2))))
            continue
        m = _SETEXT.match(line)
        if (
            m
            and i > 0
            and lines[i - 1].strip()
            and not _ATX.match(lines[i - 1])
            and not _FENCE.match(lines[i - 1])
            and (not headings or headings[-1][0] != i - 1)
        ):
            # A paragraph line underlined with === or --- (a lone --- after a blank is a rule).
            level = 1 if m.group(1).startswith("=") else 2
            if level == 1 or len(m.group(1)) >= 3:
                headings.append((i - 1, level, clean_heading(lines[i - 1])))
                lines[i] = ""
    return _sections_from_headings(lines, headings, meta, fallback_title, kind)


def _drop_html_comments(lines: list[str]) -> list[str]:
    """Blank out <!-- ... --> outside code fences (licence headers, commented-out captions),
    keeping the line count so headings keep their positions."""
    out: list[str] = []
    fence: str | None = None
    in_comment = False
    for line in lines:
        m = _FENCE.match(line)
        if not in_comment and m:
            marker = m.group(1)
            fence = marker[0] * 3 if fence is None else (None if marker.startswith(fence) else fence)
            out.append(line)
            continue
        if fence is not None:
            out.append(line)
            continue
        kept, rest = "", line
        while rest:
            if in_comment:
                end = rest.find("-->")
                if end < 0:
                    rest = ""
                else:
                    rest, in_comment = rest[end + 3 :], False
            else:
                start = rest.find("<!--")
                if start < 0:
                    kept, rest = kept + rest, ""
                else:
                    kept, rest, in_comment = kept + rest[:start], rest[start + 4 :], True
        out.append(kept)
    return out


def _sections_from_headings(
    lines: list[str],
    headings: list[tuple[int, int, str]],
    meta: dict[str, Any],
    fallback_title: str,
    kind: DocKind,
) -> LoadedDocument:
    title = str(meta.get("title") or "").strip()
    top = min((lvl for _, lvl, _ in headings), default=0)
    # A single top-level heading that comes first is the document's title, not a section
    # of it (unless the front matter names another title).
    title_is_heading = (
        bool(headings) and headings[0][1] == top and sum(1 for _, lvl, _ in headings if lvl == top) == 1
    )
    title_is_heading = title_is_heading and (not title or clean_heading(title) == headings[0][2])
    if not title:
        title = headings[0][2] if title_is_heading else fallback_title
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    start = 0
    path: tuple[str, ...] = ()
    for idx, (line_no, level, heading) in enumerate(headings):
        sections.append(Section(path, "\n".join(lines[start:line_no]).strip("\n")))
        while stack and stack[-1][0] >= level:
            stack.pop()
        if not (title_is_heading and idx == 0):
            stack.append((level, heading))
        path = tuple(h for _, h in stack)
        start = line_no + 1  # setext underlines and RST adornments were blanked by the parsers
    sections.append(Section(path, "\n".join(lines[start:]).strip("\n")))
    return LoadedDocument(title=title, kind=kind, sections=sections, front_matter=meta)


# --- reStructuredText -------------------------------------------------------------------

_ADORNMENT = re.compile(r"^([=\-`:'\"~^_*+#<>.])\1{2,}\s*$")


def parse_rst(text: str, fallback_title: str) -> LoadedDocument:
    """Headings are a line underlined (and maybe overlined) with punctuation; levels follow first use."""
    lines = text.splitlines()
    styles: list[tuple[str, bool]] = []
    headings: list[tuple[int, int, str]] = []
    skip: set[int] = set()
    i = 0
    while i < len(lines) - 1:
        line, nxt = lines[i], lines[i + 1]
        over = False
        if (
            _ADORNMENT.match(line)
            and i + 2 < len(lines)
            and _ADORNMENT.match(lines[i + 2])
            and lines[i + 1].strip()
        ):
            # Overlined title: === / Title / ===
            over, heading_line, char = True, i + 1, line.strip()[0]
            end = i + 2
        elif (
            line.strip()
            and not line[0].isspace()
            and _ADORNMENT.match(nxt)
            and len(nxt.rstrip()) >= len(line.rstrip())
        ):
            heading_line, char, end = i, nxt.strip()[0], i + 1
        else:
            i += 1
            continue
        style = (char, over)
        if style not in styles:
            styles.append(style)
        headings.append((heading_line, styles.index(style) + 1, clean_heading(lines[heading_line])))
        skip.update(range(i, end + 1))
        i = end + 1
    kept = ["" if n in skip and n not in {h for h, _, _ in headings} else ln for n, ln in enumerate(lines)]
    return _sections_from_headings(kept, headings, {}, fallback_title, "rst")


# --- HTML -------------------------------------------------------------------------------


def parse_html(text: str, fallback_title: str) -> LoadedDocument:
    """Headings become Markdown headings and <pre> becomes fences, then the Markdown parser runs."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(text, "html.parser")
    page_title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup(["script", "style", "noscript", "nav", "footer", "svg", "form", "head"]):
        tag.decompose()
    for level in range(1, 7):
        for tag in soup.find_all(f"h{level}"):
            heading = tag.get_text(" ", strip=True).replace("\n", " ")
            tag.replace_with(f"\n\n{'#' * level} {heading}\n\n")
    for tag in soup.find_all("pre"):
        tag.replace_with(f"\n\n```\n{tag.get_text()}\n```\n\n")
    for tag in soup.find_all(
        ["p", "div", "li", "tr", "br", "table", "ul", "ol", "section", "article", "blockquote"]
    ):
        tag.insert_before("\n")
        tag.insert_after("\n")
    body = soup.get_text()
    body = re.sub(r"[ \t]+\n", "\n", body)
    body = re.sub(r"\n{3,}", "\n\n", body)
    doc = parse_markdown(body, fallback_title, kind="html")
    if page_title and doc.title == fallback_title:
        doc.title = page_title
    return doc


# --- PDF --------------------------------------------------------------------------------


def _load_pdf(path: Path, data: bytes) -> LoadedDocument:
    """One section per page, named after the outline entry (bookmark) it falls under."""
    import io

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise LoadError("encrypted PDF")
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PdfReadError, ValueError, KeyError, TypeError) as exc:
        raise LoadError(f"unreadable PDF: {exc}") from exc
    outline = _pdf_outline(reader)
    meta_title = ""
    try:
        metadata = reader.metadata
        meta_title = str(metadata.get("/Title") or "").strip() if metadata else ""
    except Exception:  # noqa: BLE001 - broken metadata must not lose the text
        meta_title = ""
    first_line = next((ln.strip() for p in pages for ln in p.splitlines() if ln.strip()), "")
    title = meta_title or first_line[:120] or path.stem
    sections = []
    for number, page_text in enumerate(pages, 1):
        heading = outline.get(number)
        path_parts = (heading, f"page {number}") if heading else (f"page {number}",)
        sections.append(Section(path_parts, page_text))
    if not any(s.text.strip() for s in sections):
        raise LoadError("no extractable text in PDF (scanned images need OCR)")
    return LoadedDocument(title=title, kind="pdf", sections=sections)


def _pdf_outline(reader: Any) -> dict[int, str]:
    """Map each page number to the last top-level outline title starting at or before it."""
    starts: list[tuple[int, str]] = []
    try:
        for item in reader.outline:
            if isinstance(item, list):
                continue
            page = reader.get_destination_page_number(item) + 1
            starts.append((page, clean_heading(str(item.title))))
    except Exception:  # noqa: BLE001 - an odd outline only costs the section names
        return {}
    starts.sort()
    result: dict[int, str] = {}
    current = ""
    for number in range(1, len(reader.pages) + 1):
        for page, title in starts:
            if page == number:
                current = title
        if current:
            result[number] = current
    return result
