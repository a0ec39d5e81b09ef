"""Keep the Chinese edition (notebooks/zh/) in step with the English notebooks: one command.

    python tools/zh_sync.py                 # every notebook
    python tools/zh_sync.py 03_masked_attention 12_choosing_the_next_token.ipynb
    python tools/zh_sync.py --check         # report drift, write nothing, exit 1 if any
    python tools/zh_sync.py --todo 03       # list the twin's cells still marked for translation

For each notebooks/NN_x.ipynb:
- no twin yet: notebooks/zh/NN_x.ipynb is created as a copy (outputs cleared, ``wt.set_language("en")`` made
  ``"zh"``), every markdown cell and every code cell with prose in it marked ``"translation": "needed"``;
- a twin: its cells are aligned with the English ones (difflib on the code cells' tokens, so an inserted or
  removed English cell is found), and then
  * a code cell whose tokens (string literals and comments aside) differ from the English one is replaced by
    the English code (``"zh"`` kept), its outputs cleared, and marked needed (its comments want translating);
  * a new English cell is inserted, marked needed; a cell the English no longer has is removed;
  * slide metadata (slideshow, tags) is copied from the English cell;
  * a markdown cell whose English text changed since it was translated (its ``en_sha1``) is marked needed,
    its Chinese kept for the translator to revise; every other Chinese cell is left alone.

A translator deletes a cell's ``"translation"`` key once the cell is translated; tests/test_zh_parity.py fails
while any cell is still marked. Notebooks are written as the repository writes them (nbformat's JSON:
indent 1, sorted keys, UTF-8 characters kept, a trailing newline).
"""

import argparse
import ast
import copy
import difflib
import hashlib
import io
import json
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGLISH_DIR = ROOT / "notebooks"
CHINESE_DIR = ENGLISH_DIR / "zh"
NEEDED = "needed"
SYNCED_METADATA = ("slideshow", "tags")
MARKERS = ("NBVAL_", "noqa")  # comments that are instructions to tools, not prose
MAGIC_LINE = re.compile(r"^(\s*)(%%?|!)(.*)$")
SET_LANGUAGE = re.compile(r"""(set_language\(\s*)(["'])(en|zh)\2(\s*\))""")


# --- what a code cell is, string literals and comments aside ------------------------------------------------

class _TextAside(ast.NodeTransformer):
    """A string constant inside an f-string's field (``{'one step':30}``) is text, translated like any literal."""

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        return ast.Constant("…") if isinstance(node.value, str) else node


def _fstring_fields(literal: str) -> tuple[str, ...]:
    """The expressions inside an f-string literal, sorted: a translation may reorder them, not change them
    (string constants inside them aside)."""
    try:
        tree = ast.parse(literal.strip(), mode="eval").body
    except SyntaxError:
        return ()
    parts = tree.values if isinstance(tree, ast.JoinedStr) else []
    return tuple(sorted(ast.unparse(_TextAside().visit(part.value)) for part in parts
                        if isinstance(part, ast.FormattedValue)))


def code_tokens(source: str) -> list[tuple]:
    """The tokens of a code cell that must match between the editions.

    String literals become one ``("STRING", fields)`` token per run of adjacent literals (their text may be
    translated and re-wrapped; an f-string's expressions must stay), comments and blank lines vanish, and an
    IPython magic line (``%matplotlib inline``, ``!ls``) is one ``("MAGIC", text)`` token, compared whole.
    Raises ValueError if the cell is not Python.
    """
    magics = {}
    lines = []
    for line in source.splitlines():
        match = MAGIC_LINE.match(line)
        if match:
            name = f"__magic_{len(magics)}__"
            magics[name] = (match.group(2) + match.group(3)).strip()
            line = match.group(1) + name
        lines.append(line)
    tokens: list[tuple] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline):
            kind = tokenize.tok_name[token.type]
            if kind in ("COMMENT", "NL", "ENCODING", "ENDMARKER"):
                continue
            if kind == "STRING":
                fields = _fstring_fields(token.string)
                if tokens and tokens[-1][0] == "STRING":  # "a" "b" is one literal
                    fields = tuple(sorted(tokens.pop()[1] + fields))
                tokens.append(("STRING", fields))
            elif kind in ("NEWLINE", "INDENT", "DEDENT"):
                tokens.append((kind,))
            elif kind == "NAME" and token.string in magics:
                tokens.append(("MAGIC", magics[token.string]))
            else:
                tokens.append((kind, token.string))
    except (tokenize.TokenError, IndentationError, SyntaxError) as error:
        raise ValueError(f"cannot tokenize this code cell ({error}): {source[:80]!r}") from None
    return tokens


def has_prose(source: str) -> bool:
    """Does a code cell hold something a translator should look at: a comment (not a tool's marker) or a
    string literal with a space in it (a label or a sentence, not an identifier)?"""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return True
    for token in tokens:
        if token.type == tokenize.COMMENT and not any(marker in token.string for marker in MARKERS):
            return True
        if token.type == tokenize.STRING and " " in token.string:
            return True
    return False


# --- notebooks as the repository stores them ---------------------------------------------------------------

def source_text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def dumps(notebook: dict) -> str:
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def to_chinese_setup(text: str) -> str:
    return SET_LANGUAGE.sub(lambda m: f"{m.group(1)}{m.group(2)}zh{m.group(2)}{m.group(4)}", text)


def cell_key(cell: dict, english: bool) -> tuple:
    """What alignment compares: a code cell by its tokens, a markdown cell by the English text it holds or was
    translated from (its ``en_sha1``; a twin's cell without one matches by position between code cells)."""
    if cell["cell_type"] == "code":
        try:
            return ("code", tuple(code_tokens(source_text(cell))))
        except ValueError:
            return ("code", source_text(cell))
    return (cell["cell_type"], sha1(source_text(cell)) if english else cell["metadata"].get("en_sha1", "?"))


def same_code(english_cell: dict, twin_cell: dict) -> bool:
    return cell_key(english_cell, english=True) == cell_key(twin_cell, english=False)


# --- making and updating a twin ----------------------------------------------------------------------------

def twin_of(english_cell: dict) -> dict:
    """A new twin cell: the English cell, ready for its translator."""
    cell = copy.deepcopy(english_cell)
    text = source_text(cell)
    if cell["cell_type"] == "code":
        set_source(cell, to_chinese_setup(text))
        cell["outputs"] = []
        cell["execution_count"] = None
        cell["metadata"].pop("execution", None)
        if has_prose(text):
            cell["metadata"]["translation"] = NEEDED
    else:
        cell["metadata"]["translation"] = NEEDED
        cell["metadata"]["en_sha1"] = sha1(text)
    return cell


def new_twin(english: dict) -> dict:
    notebook = copy.deepcopy(english)
    notebook["cells"] = [twin_of(cell) for cell in english["cells"]]
    notebook["metadata"].pop("widgets", None)  # widget state belongs to an executed run
    return notebook


ANCHOR = re.compile(r"`[^`\n]+`|\d+(?:\.\d+)?|[A-Za-z_][A-Za-z0-9_]*")  # what a translation keeps as it is


def likeness(english_cell: dict, twin_cell: dict) -> float:
    """0..1: how alike two cells of the same type are across the languages. Code: its tokens; prose: the code
    names, numbers and Latin words the Chinese keeps (shapes, `names`, the English of a term in brackets)."""
    if english_cell["cell_type"] == "code":
        return difflib.SequenceMatcher(None, cell_key(english_cell, True)[1], cell_key(twin_cell, False)[1],
                                       autojunk=False).ratio()
    ours, theirs = set(ANCHOR.findall(source_text(twin_cell))), set(ANCHOR.findall(source_text(english_cell)))
    return len(ours & theirs) / max(1, len(ours))


def pair_changed_stretch(english_cells: list[dict], twin_cells: list[dict]) -> list[tuple[int | None, int | None]]:
    """Align a stretch where the cells differ: as many same-type pairs as possible, the most alike among equals
    (a dynamic programme over the two sequences; a changed code cell keeps its place, a split cell's prose
    goes to the part it resembles)."""
    n, m = len(english_cells), len(twin_cells)
    best = [[0.0] * (m + 1) for _ in range(n + 1)]  # best[i][j]: score of aligning the first i with the first j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            best[i][j] = max(best[i - 1][j], best[i][j - 1])
            if english_cells[i - 1]["cell_type"] == twin_cells[j - 1]["cell_type"]:
                best[i][j] = max(best[i][j], best[i - 1][j - 1] + 1 + likeness(english_cells[i - 1], twin_cells[j - 1]))
    pairs, i, j = [], n, m
    while i or j:
        if i and j and english_cells[i - 1]["cell_type"] == twin_cells[j - 1]["cell_type"] and best[i][j] == \
                best[i - 1][j - 1] + 1 + likeness(english_cells[i - 1], twin_cells[j - 1]):
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i and (not j or best[i][j] == best[i - 1][j]):
            pairs.append((i - 1, None))
            i -= 1
        else:
            pairs.append((None, j - 1))
            j -= 1
    return pairs[::-1]


def align(english_cells: list[dict], twin_cells: list[dict]) -> list[tuple[int | None, int | None]]:
    """Pairs (English index, twin index); None where one side has no partner (an insert or a removal)."""
    pairs = []
    english_keys = [cell_key(c, english=True) for c in english_cells]
    twin_keys = [cell_key(c, english=False) for c in twin_cells]
    matcher = difflib.SequenceMatcher(None, english_keys, twin_keys, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += zip(range(i1, i2), range(j1, j2))
        else:
            pairs += [(None if e is None else i1 + e, None if z is None else j1 + z)
                      for e, z in pair_changed_stretch(english_cells[i1:i2], twin_cells[j1:j2])]
    return pairs


def sync(english: dict, twin: dict) -> tuple[dict, list[str]]:
    """The twin brought in step with the English notebook, and what changed (one line per change)."""
    result = copy.deepcopy(twin)
    english_cells, twin_cells = english["cells"], twin["cells"]
    changes = []
    cells = []
    used_ids = {c.get("id") for c in twin_cells}
    for e, z in align(english_cells, twin_cells):
        if e is None:
            changes.append(f"cell {z} of the twin removed (the English has no such cell): "
                           f"{source_text(twin_cells[z])[:60]!r}")
            continue
        english_cell = english_cells[e]
        if z is None:
            cell = twin_of(english_cell)
            if cell.get("id") in used_ids:
                cell["id"] = sha1(f"{cell['id']}{e}")[:8]
            used_ids.add(cell.get("id"))
            changes.append(f"cell {e} inserted from the English: {source_text(english_cell)[:60]!r}")
            cells.append(cell)
            continue
        cell = copy.deepcopy(twin_cells[z])
        if cell["cell_type"] == "code" and not same_code(english_cell, cell):
            replacement = twin_of(english_cell)
            replacement["id"] = cell.get("id", replacement.get("id"))
            replacement["metadata"]["translation"] = NEEDED
            changes.append(f"code cell {e} copied from the English (its code differed)")
            cell = replacement
        elif cell["cell_type"] == "markdown":
            current = sha1(source_text(english_cell))
            recorded = cell["metadata"].get("en_sha1")
            if recorded is not None and recorded != current:
                cell["metadata"]["translation"] = NEEDED
                changes.append(f"markdown cell {e}: the English changed since it was translated")
            if recorded != current:
                cell["metadata"]["en_sha1"] = current
        for key in SYNCED_METADATA:
            if english_cell["metadata"].get(key) != cell["metadata"].get(key):
                if key in english_cell["metadata"]:
                    cell["metadata"][key] = copy.deepcopy(english_cell["metadata"][key])
                else:
                    cell["metadata"].pop(key)
                changes.append(f"cell {e}: {key} metadata copied from the English")
        cells.append(cell)
    result["cells"] = cells
    return result, changes


def needed_cells(twin: dict) -> list[int]:
    return [i for i, c in enumerate(twin["cells"]) if c["metadata"].get("translation") == NEEDED]


# --- the command --------------------------------------------------------------------------------------------

def select(names: list[str], english_dir: Path) -> list[Path]:
    """English notebooks named by file name, stem or number prefix ("03"); all of them if none named."""
    paths = sorted(english_dir.glob("*.ipynb"))
    if not names:
        return paths
    chosen = []
    for name in names:
        stem = Path(name).name.removesuffix(".ipynb")
        matches = [p for p in paths if p.stem == stem or p.stem.split("_")[0] == stem]
        if not matches:
            raise SystemExit(f"no English notebook {name!r} in {english_dir}: give a name such as "
                             f"{paths[0].stem!r} or its number {paths[0].stem[:2]!r}")
        chosen += matches
    return chosen


def run(names: list[str], check: bool, english_dir: Path = ENGLISH_DIR, chinese_dir: Path = CHINESE_DIR) -> int:
    """Sync (or, with check, only report) the named notebooks; the exit status: 1 if check found drift."""
    drift = False
    for english_path in select(names, english_dir):
        twin_path = chinese_dir / english_path.name
        english = read_notebook(english_path)
        if twin_path.exists():
            twin = read_notebook(twin_path)
            updated, changes = sync(english, twin)
        else:
            updated, changes = new_twin(english), ["no twin yet: created as a copy to translate"]
        name = f"zh/{english_path.name}"
        if not changes:
            print(f"{name}: in step ({len(needed_cells(updated))} cells marked for translation)")
            continue
        drift = True
        print(f"{name}: {len(changes)} change(s){' needed' if check else ''}")
        for change in changes:
            print(f"  {change}")
        if not check:
            chinese_dir.mkdir(parents=True, exist_ok=True)
            twin_path.write_text(dumps(updated), encoding="utf-8")
            print(f"  written; {len(needed_cells(updated))} cells marked for translation")
    return 1 if (check and drift) else 0


def todo(names: list[str], english_dir: Path = ENGLISH_DIR, chinese_dir: Path = CHINESE_DIR) -> None:
    """Each twin's cells still marked for translation, with the English text they come from."""
    for english_path in select(names, english_dir):
        twin_path = chinese_dir / english_path.name
        if not twin_path.exists():
            print(f"zh/{english_path.name}: no twin yet (run without --todo to create it)")
            continue
        english, twin = read_notebook(english_path), read_notebook(twin_path)
        pending = needed_cells(twin)
        print(f"zh/{english_path.name}: {len(pending)} cells marked for translation")
        for index in pending:
            english_text = source_text(english["cells"][index]) if index < len(english["cells"]) else ""
            print(f"--- cell {index} ({twin['cells'][index]['cell_type']}); English:\n{english_text}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("names", nargs="*", help="notebooks (file name, stem or number); all if none")
    parser.add_argument("--check", action="store_true", help="report drift and exit 1 without writing")
    parser.add_argument("--todo", action="store_true", help="list cells still marked for translation")
    parser.add_argument("--english-dir", type=Path, default=ENGLISH_DIR, help="default: notebooks/")
    parser.add_argument("--chinese-dir", type=Path, default=CHINESE_DIR, help="default: notebooks/zh/")
    args = parser.parse_args(argv)
    if args.todo:
        todo(args.names, args.english_dir, args.chinese_dir)
        return 0
    return run(args.names, args.check, args.english_dir, args.chinese_dir)


if __name__ == "__main__":
    sys.exit(main())
