"""A standalone HTML page from the report's Markdown, with its PNG charts inlined as data URIs.

Handles only the Markdown subset :mod:`.report` writes (headings, pipe tables,
bullets, paragraphs, images, inline code and bold); one file, nothing fetched.
Pure apart from reading the PNGs it inlines.
"""

from __future__ import annotations

import base64
import html as html_lib
import re
from pathlib import Path

_STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 72rem; margin: 2rem auto;
       padding: 0 1rem; color: #222; line-height: 1.45; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
code { background: #f5f5f5; padding: 0 0.2rem; }
img { max-width: 100%; display: block; margin: 0.5rem 0 1.5rem; }
"""

_IMAGE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<src>[^)]+)\)$")


def _inline(text: str) -> str:
    escaped = html_lib.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _image(alt: str, src: str, image_dir: Path | None) -> str:
    path = (image_dir / src) if image_dir is not None else Path(src)
    if src.endswith(".png") and path.is_file():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        src = f"data:image/png;base64,{data}"
    return f'<img alt="{html_lib.escape(alt)}" src="{html_lib.escape(src)}">'


def markdown_to_html(markdown: str, *, image_dir: Path | None = None) -> str:
    out: list[str] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if not stripped:
            index += 1
            continue
        heading = re.match(r"^(#{1,4}) (.*)$", stripped)
        image = _IMAGE.match(stripped)
        if heading:
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            index += 1
        elif image:
            out.append(_image(image.group("alt"), image.group("src"), image_dir))
            index += 1
        elif stripped.startswith("|"):
            block = []
            while index < len(lines) and lines[index].strip().startswith("|"):
                block.append(lines[index])
                index += 1
            header, body = _cells(block[0]), [_cells(row) for row in block[2:]]
            out.append(
                "<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in header) + "</tr></thead><tbody>"
            )
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in body]
            out.append("</tbody></table>")
        elif stripped.startswith("- "):
            out.append("<ul>")
            while index < len(lines) and lines[index].strip().startswith("- "):
                out.append(f"<li>{_inline(lines[index].strip()[2:])}</li>")
                index += 1
            out.append("</ul>")
        else:
            paragraph = []
            while index < len(lines) and lines[index].strip() and not re.match(r"^(#|\||- |!\[)", lines[index].strip()):
                paragraph.append(lines[index].strip())
                index += 1
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    return "\n".join(out)


def markdown_page(markdown: str, *, title: str, image_dir: Path | None = None) -> str:
    """A complete HTML document: inline CSS, inlined images, no external references."""
    body = markdown_to_html(markdown, image_dir=image_dir)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html_lib.escape(title)}</title><style>{_STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )
