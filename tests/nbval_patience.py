"""A pytest plugin for `make test`: nbval waits for output as long as a cell may run, not 5 seconds.

nbval gives a cell a hard-coded 5 s to deliver its output after the kernel replies. On a shared, loaded
server (a class on one JupyterHub, CI beside other jobs) the output can come later, and the cell then fails
with "Timeout of 5 seconds exceeded waiting for output" although nothing is wrong. The wait is bounded by
the cell's own timeout (--nbval-cell-timeout, 2000 s by default) instead.

    python -m pytest -p tests.nbval_patience --nbval ...
"""

from nbval.plugin import IPyNbCell


def pytest_collection_modifyitems(config, items):
    for item in items:
        if isinstance(item, IPyNbCell):
            item.output_timeout = float(config.option.nbval_cell_timeout)
