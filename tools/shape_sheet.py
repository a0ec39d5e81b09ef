"""The one-page shape sheet: every step's shape at the source articles' sizes, from the embedding to the loss.

Generated from the traced model (``wt.trace_shapes``), never typed: ``make sheet`` writes docs/shape-sheet.html
and prints it to docs/shape-sheet.pdf (A4 landscape, one page) with headless Chromium. tests/test_shape_sheet.py
checks that the committed HTML is what this tool makes now, so the sheet cannot drift from the model.

    python tools/shape_sheet.py            # the HTML
    python tools/shape_sheet.py --pdf      # the HTML, then the PDF (needs Chromium: `make browser`)
"""

from __future__ import annotations

import argparse
import html
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pypdf import PdfReader

import walkthrough as wt

ROOT = Path(__file__).resolve().parents[1]
HTML_PATH = ROOT / "docs" / "shape-sheet.html"
PDF_PATH = ROOT / "docs" / "shape-sheet.pdf"
CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")

# What each module path's rows are about; a layer's sublayers get their own box so the columns can break
# between them. The order is the trace's.
SUBLAYERS = {"self_attn": "self-attention", "add_norm1": "self-attention", "cross_attn": "cross-attention",
             "add_norm2": "cross-attention", "feed_forward": "feed-forward", "add_norm3": "feed-forward"}
ENCODER_SUBLAYERS = {"add_norm2": "feed-forward"}  # the encoder's second Add & Norm follows its FFN
CSS = """
@page { size: A4 landscape; margin: 7mm; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", Arial, sans-serif; font-size: 7.8pt; margin: 0; color: #111; }
h1 { font-size: 12pt; margin: 0 0 1mm 0; }
p.sizes { margin: 0 0 2mm 0; font-size: 8pt; }
p.sizes b { background: #eef3fb; padding: 0 1mm; }
.columns { column-count: 3; column-gap: 5mm; }
section { break-inside: avoid; margin: 0 0 1.8mm 0; }
h2 { font-size: 7.6pt; margin: 0; padding: 0.5mm 1mm; background: #2f4b7c; color: white; }
h2 small { font-weight: normal; opacity: 0.85; }
table { border-collapse: collapse; width: 100%; }
td { padding: 0.25mm 1mm; border-bottom: 0.2mm solid #ddd; vertical-align: top; }
td.shape, td.dims { white-space: nowrap; font-family: "DejaVu Sans Mono", monospace; }
td.shape { font-weight: bold; }
td.meaning { color: #555; font-size: 6.8pt; }
footer { font-size: 6.4pt; color: #555; margin-top: 1mm; }
"""


def _box(row: wt.Row, layers: int) -> str:
    """The heading of the box a traced row goes in."""
    parts = row.where.split(".")
    if parts[0] in ("src_embed", "tgt_embed"):
        side = "source embedding, its padding mask" if parts[0] == "src_embed" else "target embedding, the masks"
        return f"{side} ({row.where})"
    if len(parts) >= 4 and parts[1] == "layers":
        stack = parts[0]
        kind = (ENCODER_SUBLAYERS if stack == "encoder" else {}).get(parts[3], SUBLAYERS.get(parts[3], parts[3]))
        return f"{stack} layer: {kind} ({stack}.layers.i, i = 0 … {layers - 1})"
    if parts[0] in ("encoder", "decoder"):
        return f"{parts[0]} output ({row.where})"
    return f"output head ({row.where})"


def _boxes(rows, layers: int) -> list[tuple[str, list[wt.Row]]]:
    """Consecutive rows grouped by box; rows of the model's own code (masks, the loss) join the box before them,
    except the loss, which gets its own; layers 1 .. N-1 (the same shapes as layer 0) are left out."""
    boxes: list[tuple[str, list[wt.Row]]] = []
    for row in rows:
        parts = row.where.split(".")
        if len(parts) >= 3 and parts[1] == "layers" and parts[2] != "0":
            continue
        if row.where == "model":
            is_loss = bool(boxes) and boxes[-1][0].startswith(("output head", "loss"))
            title = "loss (cross-entropy on class ids, PAD ignored)" if is_loss else boxes[-1][0]
        else:
            title = _box(row, layers)
        if not boxes or boxes[-1][0] != title:
            boxes.append((title, []))
        boxes[-1][1].append(row)
    return boxes


def _sizes(cfg: wt.ModelConfig, batch: int, src_len: int, tgt_len: int) -> dict[str, int]:
    return {"B": batch, "L_src": src_len, "L_tgt": tgt_len, "D": cfg.d_model, "H": cfg.num_heads,
            "d_k": cfg.d_model // cfg.num_heads, "d_ff": cfg.d_ff, "V": cfg.tgt_vocab_size, "N": cfg.num_layers}


def sheet_html() -> str:
    """The sheet, from a trace of the paper's base model at the source articles' sizes."""
    cfg = wt.ModelConfig.paper_base()
    batch, src_len, tgt_len = 32, 10, 4
    rows = wt.trace_shapes(cfg, batch, src_len, tgt_len)
    sizes = " ".join(f"<b>{name} = {size}</b>" for name, size in _sizes(cfg, batch, src_len, tgt_len).items())
    sections, explained = [], set()
    for title, box_rows in _boxes(rows, cfg.num_layers):
        heading, _, path = title.partition(" (")
        body = ""
        for r in box_rows:  # a step's meaning is said once, where it first occurs
            meaning = "" if r.step in explained else r.meaning
            explained.add(r.step)
            body += (f"<tr><td>{html.escape(r.step)}</td><td class='shape'>{list(r.shape)}</td>"
                     f"<td class='dims'>{html.escape(r.dims)}</td><td class='meaning'>{html.escape(meaning)}</td></tr>")
        sections.append(f"<section><h2>{html.escape(heading)} <small>({html.escape(path)}</small></h2>"
                        f"<table>{body}</table></section>")
    return (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Transformer shapes, one page</title>"
            f"<style>{CSS}</style></head><body>\n"
            f"<h1>Transformer shapes, one page: the encoder–decoder from the embedding to the loss</h1>\n"
            f"<p class='sizes'>The source articles' sizes: {sizes}. L_q / L_k: the query / key length "
            f"(L_src or L_tgt). Masks: bool, True = may attend.</p>\n"
            f"<div class='columns'>\n" + "\n".join(sections) + "\n</div>\n"
            f"<footer>Generated by <code>make sheet</code> (tools/shape_sheet.py) from <code>wt.trace_shapes("
            f"wt.ModelConfig.paper_base(), {batch}, {src_len}, {tgt_len})</code>: every shape was traced from "
            f"the real model, none typed. Each of the N = {cfg.num_layers} layers of a stack has layer 0's "
            f"shapes.</footer>\n</body></html>\n")


def print_pdf(html_path: Path, pdf_path: Path, chromium: str = CHROMIUM) -> Path:
    """Print ``html_path`` to ``pdf_path`` with headless Chromium (the page size comes from the sheet's CSS)."""
    if not Path(chromium).exists():
        raise FileNotFoundError(f"no Chromium at {chromium}: run `make browser` (Debian: apt-get install "
                                f"chromium) or set WALKTHROUGH_CHROMIUM to its path")
    with tempfile.TemporaryDirectory() as profile:  # its own profile: never the user's, nothing left behind
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                        f"--user-data-dir={profile}", f"--print-to-pdf={pdf_path}", html_path.resolve().as_uri()],
                       check=True, capture_output=True)
    return pdf_path


def pdf_pages(pdf_path: Path) -> int:
    return len(PdfReader(pdf_path).pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", action="store_true", help="also print docs/shape-sheet.pdf with headless Chromium")
    args = parser.parse_args(argv)
    HTML_PATH.write_text(sheet_html(), encoding="utf-8")
    print(f"wrote {HTML_PATH.relative_to(ROOT)}")
    if args.pdf:
        print_pdf(HTML_PATH, PDF_PATH)
        pages = pdf_pages(PDF_PATH)
        print(f"wrote {PDF_PATH.relative_to(ROOT)} ({pages} page{'s' if pages != 1 else ''})")
        if pages != 1:
            print("the sheet no longer fits one page: shorten it (tools/shape_sheet.py)", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
