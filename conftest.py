"""nbval: compare only what is deterministic in the cells tagged `nbval-check-output`; run the notebooks in order.

HTML renderings (pandas tables, widgets) and stderr (progress bars, warnings) change between runs without the result
changing, so they are left out of the comparison; plain-text outputs are compared after tests/nbval_sanitize.cfg.
nbval has no command-line option for this, hence the hook.

Under pytest-xdist (`make test`: `-n 2`) one worker runs the notebooks in file order while the other runs the rest,
the tests marked slow first.
"""


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile":
        collector.skip_compare = tuple(collector.skip_compare) + ("text/html", "stderr")


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`make test`: `-n 2`) all notebook cells form one unit of work, sent in collection order to
    one worker (each notebook reads the run folder the one before wrote); every other test is its own unit. Written as a
    scheduler because xdist's own "@group" node-id suffix (--dist loadgroup) does not take under pytest 9, whose node
    ids no longer read the attribute xdist sets (checked: two tests of one group ran on two workers)."""
    from xdist.scheduler import LoadScopeScheduling

    class NotebooksOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "notebooks" if nodeid.split("::", 1)[0].endswith(".ipynb") else nodeid

    return NotebooksOnOneWorker(config, log)


def pytest_collection_modifyitems(items):
    """The tests marked slow (notebooks through the runner, torchrun, a browser: 10-120 s each) run before the others,
    so the two workers of `make test` end together: a slow test dealt out last kept one worker busy for up to two
    minutes after the other had run out of work. The sort is stable, so the notebook cells keep their order."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
