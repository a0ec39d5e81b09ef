"""The one-page shape sheet: every step's shape at the source articles' sizes, from the embedding to the loss.

Generated from the traced model (``wt.trace_shapes``), never typed, in English and in Chinese (the package's
catalog: step labels and meanings from the one table of steps, the sheet's own words marked ``_`` here):
``make sheet`` writes docs/shape-sheet.html and docs/shape-sheet.zh.html and prints each to a PDF beside it
(A4 landscape, one page) with headless Chromium. tests/test_shape_sheet.py checks that the committed HTML is
what this tool makes now, so neither sheet can drift from the model.

    python tools/shape_sheet.py                  # both HTML sheets
    python tools/shape_sheet.py --pdf            # both, then their PDFs (needs Chromium: `make browser`)
    python tools/shape_sheet.py --language zh    # the Chinese sheet only
"""

from __future__ import annotations

import argparse
import html
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from pypdf import PdfReader

import walkthrough as wt
from walkthrough.i18n import LANGUAGES, N_, _

ROOT = Path(__file__).resolve().parents[1]
HTML_PATHS = {"en": ROOT / "docs" / "shape-sheet.html", "zh": ROOT / "docs" / "shape-sheet.zh.html"}
OTHER_EDITION = {"en": "English", "zh": "中文版"}  # the link to the other sheet, named in its own language
CHROMIUM = os.environ.get("WALKTHROUGH_CHROMIUM", "/usr/bin/chromium")

# What each module path's rows are about; a layer's sublayers get their own box so the columns can break
# between them. The order is the trace's.
SUBLAYERS = {"self_attn": N_("self-attention"), "self_attn_norm": N_("self-attention"),
             "cross_attn": N_("cross-attention"), "cross_attn_norm": N_("cross-attention"),
             "feed_forward": N_("feed-forward"), "ffn_norm": N_("feed-forward")}
STACKS = {"encoder": N_("encoder"), "decoder": N_("decoder")}
CSS = """
@page { size: A4 landscape; margin: 7mm; }
* { box-sizing: border-box; }
body { font-family: "DejaVu Sans", Arial, "Noto Sans CJK SC", "Microsoft YaHei", "PingFang SC", sans-serif;
       font-size: 7.8pt; margin: 0; color: #111; }
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
:lang(zh) body { line-height: 1.2; }  /* a CJK font's own line height would push the sheet onto a second page */
"""


@contextmanager
def _language(language: str):
    """The package speaks ``language`` while the block runs, then what it spoke before."""
    before = wt.get_language()
    wt.set_language(language)
    try:
        yield
    finally:
        wt.set_language(before)


def _box(row: wt.Row, layers: int) -> tuple[str, str]:
    """The box a traced row goes in: its heading and, in brackets after it, the module path (or a note)."""
    parts = row.where.split(".")
    if parts[0] in ("src_embed", "tgt_embed"):
        side = _("source embedding, its padding mask") if parts[0] == "src_embed" else _("target embedding, the masks")
        return side, row.where
    if len(parts) >= 4 and parts[1] == "layers":
        stack = parts[0]
        kind = SUBLAYERS.get(parts[3], parts[3])
        heading = _("{stack} layer: {sublayer}").format(stack=_(STACKS[stack]), sublayer=_(kind))
        return heading, f"{stack}.layers.i, i = 0 … {layers - 1}"
    if parts[0] in STACKS:
        return _("{stack} output").format(stack=_(STACKS[parts[0]])), row.where
    return _("output head"), row.where


def _boxes(rows, layers: int) -> list[tuple[tuple[str, str], list[wt.Row]]]:
    """Consecutive rows grouped by box; rows of the model's own code (masks, the loss) join the box before them,
    except the loss, which gets its own; layers 1 .. N-1 (the same shapes as layer 0) are left out."""
    boxes: list[tuple[tuple[str, str], list[wt.Row]]] = []
    loss = (_("loss"), _("cross-entropy on class ids, PAD ignored"))
    for row in rows:
        parts = row.where.split(".")
        if len(parts) >= 3 and parts[1] == "layers" and parts[2] != "0":
            continue
        if row.where == "model":
            is_loss = bool(boxes) and boxes[-1][0][0] in (_("output head"), loss[0])
            title = loss if is_loss else boxes[-1][0]
        else:
            title = _box(row, layers)
        if not boxes or boxes[-1][0] != title:
            boxes.append((title, []))
        boxes[-1][1].append(row)
    return boxes


def _sizes(cfg: wt.ModelConfig, batch: int, src_len: int, tgt_len: int) -> dict[str, int]:
    return {"B": batch, "L_src": src_len, "L_tgt": tgt_len, "D": cfg.d_model, "H": cfg.num_heads,
            "d_k": cfg.d_model // cfg.num_heads, "d_ff": cfg.d_ff, "V": cfg.tgt_vocab_size, "N": cfg.num_layers}


def sheet_html(language: str = "en") -> str:
    """The sheet in ``language`` ("en" or "zh"), from a trace of the paper's base model at the source articles'
    sizes; it links to the sheet in the other language."""
    with _language(language):
        return _sheet_html(language)


def _sheet_html(language: str) -> str:
    cfg = wt.ModelConfig.paper_base()
    batch, src_len, tgt_len = 32, 10, 4
    rows = wt.trace_shapes(cfg, batch, src_len, tgt_len)
    sizes = " ".join(f"<b>{name} = {size}</b>" for name, size in _sizes(cfg, batch, src_len, tgt_len).items())
    sections, explained = [], set()
    for (heading, path), box_rows in _boxes(rows, cfg.num_layers):
        body = ""
        for r in box_rows:  # a step's meaning is said once, where it first occurs
            meaning = "" if r.step in explained else _(r.meaning)
            explained.add(r.step)
            body += (f"<tr><td>{html.escape(_(r.step))}</td><td class='shape'>{list(r.shape)}</td>"
                     f"<td class='dims'>{html.escape(r.dims)}</td><td class='meaning'>{html.escape(meaning)}</td></tr>")
        sections.append(f"<section><h2>{html.escape(heading)} <small>({html.escape(path)})</small></h2>"
                        f"<table>{body}</table></section>")
    other = "zh" if language == "en" else "en"
    title = _("Transformer shapes, one page")
    heading = _("Transformer shapes, one page: the encoder–decoder from the embedding to the loss")
    call = f"wt.trace_shapes(wt.ModelConfig.paper_base(), {batch}, {src_len}, {tgt_len})"
    return (f"<!DOCTYPE html>\n<html lang='{'zh-CN' if language == 'zh' else 'en'}'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>\n"
            f"<h1>{html.escape(heading)}</h1>\n<p class='sizes'>"
            + _("The source articles' sizes: {sizes}. L_q / L_k: the query / key length (L_src or L_tgt). Masks: "
                "bool, True = may attend.").format(sizes=sizes)
            + "</p>\n<div class='columns'>\n" + "\n".join(sections) + "\n</div>\n<footer>"
            + _("Generated by <code>make sheet</code> (tools/shape_sheet.py) from <code>{call}</code>: every shape "
                "was traced from the real model, none typed. Each of the N = {layers} layers of a stack has layer "
                "0's shapes.").format(call=call, layers=cfg.num_layers)
            + f" <a href='{HTML_PATHS[other].name}'>{OTHER_EDITION[other]}</a>"
            + "</footer>\n</body></html>\n")


def _cjk_font_dir() -> Path | None:
    """The folder of the Chinese font matplotlib draws with (mplfonts' Noto Sans CJK SC), or None without one."""
    from matplotlib import font_manager

    from walkthrough.classroom import viz

    name = viz.use_cjk_font()
    if name is None:
        return None
    return Path(font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)).parent


def print_pdf(html_path: Path, pdf_path: Path, chromium: str = CHROMIUM) -> Path:
    """Print ``html_path`` to ``pdf_path`` with headless Chromium (the page size comes from the sheet's CSS).

    Chromium finds the Chinese font through a fontconfig file of its own that adds the font's folder to the
    system's, so the Chinese sheet prints on a machine with no CJK font installed (a web font loaded while the
    columns are laid out left some of the first column's characters as boxes).
    """
    if not Path(chromium).exists():
        raise FileNotFoundError(f"no Chromium at {chromium}: run `make browser` (Debian: apt-get install "
                                f"chromium) or set WALKTHROUGH_CHROMIUM to its path")
    with tempfile.TemporaryDirectory() as scratch:  # its own profile and font cache: nothing left behind
        fonts = Path(scratch) / "fonts.conf"
        font_dir = _cjk_font_dir()
        fonts.write_text("<?xml version='1.0'?><!DOCTYPE fontconfig SYSTEM 'fonts.dtd'><fontconfig>"
                         "<include ignore_missing='yes'>/etc/fonts/fonts.conf</include>"
                         + (f"<dir>{html.escape(str(font_dir))}</dir>" if font_dir else "")
                         + f"<cachedir>{html.escape(scratch)}/cache</cachedir></fontconfig>", encoding="utf-8")
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                        f"--user-data-dir={Path(scratch) / 'profile'}", f"--print-to-pdf={pdf_path}",
                        html_path.resolve().as_uri()], check=True, capture_output=True,
                       env={**os.environ, "FONTCONFIG_FILE": str(fonts)})
    return pdf_path


def pdf_pages(pdf_path: Path) -> int:
    return len(PdfReader(pdf_path).pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pdf", action="store_true", help="also print each sheet's PDF with headless Chromium")
    parser.add_argument("--language", choices=LANGUAGES, action="append",
                        help="the sheet in this language only (repeatable; default: every language)")
    args = parser.parse_args(argv)
    failed = 0
    for language in args.language or LANGUAGES:
        html_path = HTML_PATHS[language]
        html_path.write_text(sheet_html(language), encoding="utf-8")
        print(f"wrote {html_path.relative_to(ROOT)}")
        if args.pdf:
            pdf_path = print_pdf(html_path, html_path.with_suffix(".pdf"))
            pages = pdf_pages(pdf_path)
            print(f"wrote {pdf_path.relative_to(ROOT)} ({pages} page{'s' if pages != 1 else ''})")
            if pages != 1:
                print(f"the {language} sheet no longer fits one page: shorten it (tools/shape_sheet.py)",
                      file=sys.stderr)
                failed = 1
    return failed


if __name__ == "__main__":
    sys.exit(main())
