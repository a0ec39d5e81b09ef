"""Write the kernel peaks nbval's run recorded (build/kernel-peaks/en/NN.txt and zh/NN.txt, from `make test` or any
nbval run with tests/nbval_patience.py) into the tables of docs/teaching.md and docs/teaching.zh.md, a row per
edition, so the docs state what the test measured. A notebook with no recording keeps its stated peak.

    python tools/kernel_peaks.py
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.test_kernel_memory import EDITIONS, PEAKS_TABLE, RECORDED, TEACHING_DOCS, peaks_table, stated_peaks  # noqa: E402

HEADERS = {"teaching.md": ("notebook", "English edition, MB", "Chinese edition, MB"),
           "teaching.zh.md": ("节", "英文版峰值（MB）", "中文版峰值（MB）")}


def main() -> None:
    recorded = {edition: {path.stem: int(path.read_text()) for path in sorted((RECORDED / edition).glob("*.txt"))}
                for edition in EDITIONS}
    if not any(recorded.values()):
        sys.exit(f"nothing recorded in {RECORDED}: run `make test` (or nbval on notebooks/) first")
    for doc in TEACHING_DOCS:
        text = doc.read_text(encoding="utf-8")
        stated = stated_peaks(text)
        peaks = {edition: stated.get(edition, {}) | recorded[edition] for edition in EDITIONS}
        table = PEAKS_TABLE.search(text)
        text = text[:table.start(2)] + peaks_table(peaks, HEADERS[doc.name], table.group(1)) + text[table.end(2):]
        doc.write_text(text, encoding="utf-8")
        counts = ", ".join(f"{edition} {len(recorded[edition])} of {len(peaks[edition])}" for edition in EDITIONS)
        print(f"{doc.relative_to(ROOT)}: peaks recorded by this run: {counts}")


if __name__ == "__main__":
    main()
