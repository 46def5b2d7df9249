"""nbval: compare only what is deterministic in the cells tagged `nbval-check-output`; run the notebooks in order.

HTML renderings (pandas tables, widgets) and stderr (progress bars, warnings) change between runs without the result
changing, so they are left out of the comparison; plain-text outputs are compared after tests/nbval_sanitize.cfg.
nbval has no command-line option for this, hence the hook.

Under pytest-xdist (`make test`: `-n 2`) one worker runs the notebooks in file order while the other runs the test
modules, those with slow tests first.
"""


def pytest_collectstart(collector):
    if type(collector).__name__ == "IPyNbFile":
        collector.skip_compare = tuple(collector.skip_compare) + ("text/html", "stderr")


def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`make test`: `-n 2`) all notebook cells form one unit of work, sent in collection order to
    one worker (each notebook reads the run folder the one before wrote), and each test module is one unit (its
    module-scoped fixtures, such as test_distributed's 20-second torchrun job, are made once). Units are dealt in the
    order pytest_collection_modifyitems gives, not xdist's largest-first count of tests. Written as a scheduler because
    xdist's own "@group" node-id suffix (--dist loadgroup) does not take under pytest 9, whose node ids no longer read
    the attribute xdist sets (checked: two tests of one group ran on two workers)."""
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class NotebooksOnOneWorker(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "notebooks" if path.endswith(".ipynb") else path

    return NotebooksOnOneWorker(config, log)


def pytest_collection_modifyitems(items):
    """The notebooks first (about ten minutes on one worker), then the test modules holding a test marked slow
    (notebooks through the runner, torchrun, a browser: 10-120 s each), then the rest, so the two workers of `make test`
    end together: a slow module dealt out last kept one worker busy for up to two minutes after the other had run out of
    work. The sort is stable, so cells and tests keep their order within a notebook or module."""
    slow_modules = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if item.path.suffix == ".ipynb" else 1 if item.path in slow_modules else 2)
