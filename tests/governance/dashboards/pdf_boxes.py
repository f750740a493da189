"""The text boxes of a PDF page, to check a layout: where each string is drawn, in which
font and size, and how much room it takes.

pypdf's `extract_text(visitor_text=...)` loses track of ReportLab's line moves (`T*`
after a `TL`), so this reads the page's content stream itself: the operators ReportLab
writes (q, Q, cm, BT, Tm, Td, TD, T*, TL, Tf, Tw, Tc, Tz, Tj, TJ, ', ") are few. A box
runs from the string's start to its advance (ReportLab's `stringWidth` of the standard
font, plus word and character spacing) and from the font's descender to its ascender
around the baseline, transformed by the text and current matrices.
"""

from __future__ import annotations

from dataclasses import dataclass

from pypdf import PdfReader
from pypdf.generic import ContentStream
from reportlab.pdfbase.pdfmetrics import getFont, stringWidth

IDENTITY = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)


@dataclass(frozen=True)
class TextBox:
    page: int
    text: str
    font: str
    size: float
    x0: float
    y0: float
    x1: float
    y1: float

    def overlap(self, other: TextBox) -> float:
        """The area two boxes share (0 when they only touch)."""
        width = min(self.x1, other.x1) - max(self.x0, other.x0)
        height = min(self.y1, other.y1) - max(self.y0, other.y0)
        return width * height if width > 0 and height > 0 else 0.0


def _multiply(a, b):
    """a × b of PDF matrices (a then b)."""
    return (
        a[0] * b[0] + a[1] * b[2],
        a[0] * b[1] + a[1] * b[3],
        a[2] * b[0] + a[3] * b[2],
        a[2] * b[1] + a[3] * b[3],
        a[4] * b[0] + a[5] * b[2] + b[4],
        a[4] * b[1] + a[5] * b[3] + b[5],
    )


def _translate(x: float, y: float):
    return (1.0, 0.0, 0.0, 1.0, x, y)


def _string(operand) -> str:
    """ReportLab's standard fonts are WinAnsi-encoded: decode the bytes as cp1252."""
    raw = getattr(operand, "original_bytes", None)
    if raw is None:
        raw = bytes(operand) if isinstance(operand, bytes) else str(operand).encode("latin-1")
    return raw.decode("cp1252", errors="replace")


def _fonts(page) -> dict[str, str]:
    resources = page.get("/Resources") or {}
    fonts = resources.get("/Font") or {}
    return {
        name: str(font.get_object().get("/BaseFont", "/Helvetica"))[1:]
        for name, font in fonts.items()
    }


class _Reader:
    """The graphics and text state of one page as its operators run."""

    def __init__(self, index: int, fonts: dict[str, str]):
        self.index, self.fonts = index, fonts
        self.boxes: list[TextBox] = []
        self.ctm, self.stack = IDENTITY, []
        self.tm = self.tlm = IDENTITY
        self.font, self.size = "Helvetica", 10.0
        self.leading = self.word = self.char = 0.0
        self.scale = 1.0
        self.handlers = {
            "q": lambda: self.stack.append(self.ctm),
            "Q": self.restore,
            "cm": self.concat,
            "BT": self.begin,
            "Tm": self.set_matrix,
            "Td": lambda x, y: self.next_line(float(x), float(y)),
            "TD": self.move_setting_leading,
            "T*": self.next_line,
            "TL": lambda leading: setattr(self, "leading", float(leading)),
            "Tf": self.set_font,
            "Tw": lambda word: setattr(self, "word", float(word)),
            "Tc": lambda char: setattr(self, "char", float(char)),
            "Tz": lambda scale: setattr(self, "scale", float(scale) / 100),
            "Tj": lambda text: self.show(_string(text)),
            "TJ": self.show_array,
            "'": self.next_line_show,
            '"': self.next_line_show_spaced,
        }

    def run(self, operator: str, operands: list) -> None:
        handler = self.handlers.get(operator)
        if handler is not None:
            handler(*operands)

    def restore(self):
        self.ctm = self.stack.pop()

    def concat(self, *matrix):
        self.ctm = _multiply(tuple(float(v) for v in matrix), self.ctm)

    def begin(self):
        self.tm = self.tlm = IDENTITY

    def set_matrix(self, *matrix):
        self.tm = self.tlm = tuple(float(v) for v in matrix)

    def set_font(self, name, size):
        self.font, self.size = self.fonts.get(str(name), "Helvetica"), float(size)

    def next_line(self, dx: float = 0.0, dy: float | None = None):
        self.tlm = _multiply(_translate(dx, -self.leading if dy is None else dy), self.tlm)
        self.tm = self.tlm

    def move_setting_leading(self, x, y):
        self.leading = -float(y)
        self.next_line(float(x), float(y))

    def next_line_show(self, text):
        self.next_line()
        self.show(_string(text))

    def next_line_show_spaced(self, word, char, text):
        self.word, self.char = float(word), float(char)
        self.next_line_show(text)

    def show_array(self, items):
        for item in items:
            if isinstance(item, (int, float)):  # pypdf's numbers subclass these
                self.tm = _multiply(
                    _translate(-float(item) / 1000 * self.size * self.scale, 0), self.tm
                )
            else:
                self.show(_string(item))

    def show(self, text: str) -> None:
        face = getFont(self.font).face
        ascent, descent = face.ascent / 1000 * self.size, face.descent / 1000 * self.size
        width = stringWidth(text, self.font, self.size)
        width = (width + self.char * len(text) + self.word * text.count(" ")) * self.scale
        m = _multiply(self.tm, self.ctm)
        corners = [
            (x * m[0] + y * m[2] + m[4], x * m[1] + y * m[3] + m[5])
            for x in (0, width)
            for y in (descent, ascent)
        ]
        if text.strip():
            xs, ys = [c[0] for c in corners], [c[1] for c in corners]
            self.boxes.append(
                TextBox(self.index, text, self.font, self.size, min(xs), min(ys), max(xs), max(ys))
            )
        self.tm = _multiply(_translate(width, 0), self.tm)


def page_boxes(reader: PdfReader, index: int) -> list[TextBox]:
    page = reader.pages[index]
    state = _Reader(index, _fonts(page))
    for operands, operator in ContentStream(page.get_contents(), reader).operations:
        state.run(operator.decode(), operands)
    return state.boxes


def overlapping_boxes(reader: PdfReader, tolerance: float = 0.5) -> list[tuple[TextBox, TextBox]]:
    """Every pair of text boxes of a page that share more than `tolerance` pt² (a
    touching pair, or one with a hair of rounding, shares less)."""
    pairs = []
    for index in range(len(reader.pages)):
        boxes = page_boxes(reader, index)
        for i, box in enumerate(boxes):
            pairs.extend((box, other) for other in boxes[i + 1 :] if box.overlap(other) > tolerance)
    return pairs
