"""nbval: compare only what is deterministic in the cells tagged `nbval-check-output`.

HTML renderings (pandas tables, widgets) and stderr (progress bars, warnings) change between runs without the result
changing, so they are left out of the comparison; plain-text outputs are compared after tests/nbval_sanitize.cfg.
nbval has no command-line option for this, hence the hook.
"""


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile":
        collector.skip_compare = tuple(collector.skip_compare) + ("text/html", "stderr")
