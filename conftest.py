"""nbval: compare only what is deterministic in the cells tagged `nbval-check-output`; run the notebooks in order.

HTML renderings (pandas tables, widgets) and stderr (progress bars, warnings) change between runs without the result
changing, so they are left out of the comparison; plain-text outputs are compared after tests/nbval_sanitize.cfg.
nbval has no command-line option for this, hence the hook.

Under pytest-xdist (`make test`: `-n 2 --dist loadgroup`) every notebook cell joins one group, so one worker runs the
notebooks in file order (each reads the run folder the one before wrote) while the other worker runs the rest.
"""
import pytest


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile":
        collector.skip_compare = tuple(collector.skip_compare) + ("text/html", "stderr")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the group marks
def pytest_collection_modifyitems(items):
    for item in items:
        if type(item).__name__ == "IPyNbCell":
            item.add_marker(pytest.mark.xdist_group("notebooks"))
