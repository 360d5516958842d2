"""Set-of-marks screenshots: each visible clickable element's box and bid drawn on the PNG.

The marks are drawn with Pillow on the PNG the browser returned, never in the page, so page
scripts cannot see or react to them and the plain screenshot stays available. Everything is a
pure function of the screenshot and the elements: the same page gives the same PNG bytes.

Each element gets a colour from :data:`PALETTE` by its bid (``int(bid) % len(PALETTE)``), a
:data:`BOX_WIDTH`-pixel outline drawn inside its bounding box (clipped to the image), and a label
(its bid in white, not anti-aliased, on the same colour) at the box's top-left corner, above the box when there is
room and inside it otherwise. Elements are drawn in document order, so later ones sit on top.
"""

from __future__ import annotations

import functools
import io

PALETTE = [
    (230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180),
    (0, 128, 128), (240, 50, 230), (128, 0, 0), (0, 0, 128), (128, 128, 0),
]
BOX_WIDTH = 2
LABEL_SIZE = 13  # font size in pixels
LABEL_PAD = 2
LABEL_TEXT = (255, 255, 255)
PNG_COMPRESS_LEVEL = 1  # fast; the bytes still depend only on the pixels


def mark_colour(bid: str) -> tuple[int, int, int]:
    """The colour of the mark of element ``bid``."""
    try:
        n = int(bid)
    except ValueError:
        n = sum(bid.encode("utf-8"))
    return PALETTE[n % len(PALETTE)]


@functools.lru_cache(maxsize=1)
def _font():
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=LABEL_SIZE)
    except TypeError:  # Pillow without FreeType sizes: the fixed bitmap font
        return ImageFont.load_default()


def marked_elements(elements) -> list[dict]:
    """The elements that get a mark: visible, clickable, with a box of positive size."""
    out = []
    for e in elements:
        box = e.get("bbox")
        if e.get("visible") and e.get("clickable") and box and box[2] > 0 and box[3] > 0:
            out.append(e)
    return out


def _box(bbox, size) -> tuple[int, int, int, int] | None:
    """The element's box in whole pixels (x0, y0, x1, y1 inclusive), clipped to the image."""
    x, y, w, h = bbox[:4]
    x0, y0 = max(0, round(x)), max(0, round(y))
    x1, y1 = min(size[0], round(x + w)) - 1, min(size[1], round(y + h)) - 1
    if x1 < x0 or y1 < y0:
        return None
    return x0, y0, x1, y1


def label_box(bid: str, box, size) -> tuple[int, int, int, int]:
    """Where the label of ``bid`` goes for an element box (x0, y0, x1, y1 inclusive)."""
    left, top, right, bottom = _font().getbbox(str(bid))
    w, h = right + 2 * LABEL_PAD, bottom + 2 * LABEL_PAD
    x0 = min(box[0], max(0, size[0] - w))
    y0 = box[1] - h if box[1] - h >= 0 else box[1]
    return x0, y0, x0 + w - 1, y0 + h - 1


def mark_regions(elements, size) -> list[tuple[str, tuple, tuple]]:
    """``(bid, box, label_box)`` for every mark drawn on an image of ``size`` (width, height)."""
    regions = []
    for e in marked_elements(elements):
        box = _box(e["bbox"], size)
        if box is not None:
            regions.append((e["bid"], box, label_box(e["bid"], box, size)))
    return regions


def draw_marks(png: bytes, elements) -> bytes:
    """``png`` with a set-of-marks overlay for ``elements`` (observation element dicts)."""
    from PIL import Image, ImageDraw

    image = Image.open(io.BytesIO(png)).convert("RGB")
    draw = ImageDraw.Draw(image)
    draw.fontmode = "1"  # no anti-aliasing: label pixels are the mark colour or LABEL_TEXT
    font = _font()
    for bid, box, label in mark_regions(elements, image.size):
        colour = mark_colour(bid)
        draw.rectangle(box, outline=colour, width=BOX_WIDTH)
        draw.rectangle(label, fill=colour)
        draw.text((label[0] + LABEL_PAD, label[1] + LABEL_PAD), str(bid), fill=LABEL_TEXT, font=font)
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=PNG_COMPRESS_LEVEL)
    return out.getvalue()
