import re
import socket
import sys
from pathlib import Path

import nbformat
import pytest
from fontTools.ttLib import TTFont
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from .offline import NetworkBlocked

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import build_site


def test_guard_refuses_other_hosts_and_allows_loopback():
    with pytest.raises(NetworkBlocked, match="must work offline"):
        socket.create_connection(("example.invalid", 80), timeout=1)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=1):
            pass


def test_notebook_kernels_run_with_the_guard():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import socket\nsocket.create_connection(('example.invalid', 80), timeout=1)")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    with pytest.raises(CellExecutionError, match="NetworkBlocked"):
        NotebookClient(notebook, timeout=None, startup_timeout=600).execute()


# --- the static site (`make html`) in both editions: offline, each page linked to its twin ------------------

def site_notebook(title: str, text: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("print(1)", execution_count=1,
                                     outputs=[nbformat.v4.new_output("stream", text=f"{text}\n")])
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# {title}\n\n{text}"), cell])


def test_site_publishes_both_editions_each_page_linked_to_its_twin(tmp_path):
    (tmp_path / "notebooks" / "zh").mkdir(parents=True)
    nbformat.write(site_notebook("00 · The map", "One batch of sentences."), tmp_path / "notebooks" / "00_map.ipynb")
    nbformat.write(site_notebook("01 · Embedding", "Rows of a table."), tmp_path / "notebooks" / "01_embed.ipynb")
    nbformat.write(site_notebook("00 · 全景图", "一批句子走一遍模型。"), tmp_path / "notebooks" / "zh" / "00_map.ipynb")
    pages = build_site.build(tmp_path / "site", root=tmp_path, working_copy=True)
    site = tmp_path / "site"
    assert [p.relative_to(site).as_posix() for p in pages] == ["00_map.html", "01_embed.html", "zh/00_map.html"]

    english, chinese = (site / "00_map.html").read_text(), (site / "zh" / "00_map.html").read_text()
    assert "href='zh/00_map.html' hreflang='zh-Hans'" in english and "<b>English</b>" in english
    assert "href='../00_map.html' hreflang='en'" in chinese and "<b>中文版</b>" in chinese
    assert "edition-switch" not in (site / "01_embed.html").read_text(), "no twin, no link to one"
    assert '<html lang="zh-Hans">' in chinese and '<html lang="en">' in english
    assert "href='../classroom.css'" in chinese and "href='classroom.css'" in english
    assert "href='00_map.html'" in (site / "zh" / "index.html").read_text()
    assert "href='zh/index.html'" in (site / "index.html").read_text()
    assert "href='../index.html'" in (site / "zh" / "index.html").read_text()
    for page in [*pages, site / "index.html", site / "zh" / "index.html"]:
        text = page.read_text()
        assert not re.search(r"<(?:script|link|img)\b[^>]*\b(?:src|href)=[\"']https?://", text), page.name
        for link in re.findall(r"href=[\"']([^\"'#:]+)[\"']", text):
            assert (page.parent / link).resolve().is_file(), f"{page.relative_to(site)} links {link}: no such file"

    font = TTFont(site / "NotoSansCJKsc-Regular.otf")
    missing = [ch for ch in "全景图一批句子走一遍模型中文版" if ord(ch) not in font.getBestCmap()]
    assert not missing, f"the shipped font lacks the Chinese pages' characters {missing}"
