"""Real-browser check: the pyvis pictures draw in headless Chromium with networking off.

Needs Debian's chromium + chromium-driver (`.ci/run` installs them; `make test` installs them when apt-get is usable).
"""

import shutil

import pytest

from lib.crawl.bfs import bfs_crawl
from lib.crawl.pages import Snapshot
from lib.crawl.sources import SnapshotSource
from lib.viz.graph import graph_to_html

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

pytestmark = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian chromium and chromium-driver are not installed: apt-get install chromium chromium-driver",
)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        # networking off: every host resolves to nothing and any proxy use fails at once
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--proxy-server=127.0.0.1:9",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    yield driver
    driver.quit()


def draws(driver, path):
    driver.get(path.as_uri())
    driver.set_script_timeout(60)
    return driver.execute_async_script(
        """const done = arguments[arguments.length - 1];
        const t0 = Date.now();
        (function poll() {
          if (typeof network !== 'undefined' && network && document.querySelector('#mynetwork canvas')) {
            const c = document.querySelector('#mynetwork canvas');
            done({nodes: network.body.data.nodes.length, edges: network.body.data.edges.length,
                  width: c.width, height: c.height, vis: typeof vis});
          } else if (Date.now() - t0 > 30000) { done(null); } else { setTimeout(poll, 100); }
        })();"""
    )


def test_pyvis_html_draws_offline(browser, tmp_path):
    links = {f"T{i}": [f"T{(i * 3 + k) % 80}" for k in (1, 2)] for i in range(80)}
    g = bfs_crawl(SnapshotSource(Snapshot(links=links)), "T0", 50)
    path = graph_to_html(g, tmp_path / "g.html", extra_edges=[(1, 40)])
    info = draws(browser, path)
    assert info is not None, "vis-network never drew a canvas"
    assert info["vis"] == "object" and info["nodes"] == 50 and info["edges"] == g.num_edges + 1
    assert info["width"] > 0 and info["height"] > 0


@pytest.mark.slow  # a browser draws the seed's figure 1 picture
def test_seed_figure_1_picture_draws_offline(browser, tmp_path):
    """The notebook's picture: 2,000 nodes from "Sustainability" on the embedded source (seed Figure 1)."""
    from lib.crawl.sources import EmbeddedSource

    g = bfs_crawl(EmbeddedSource(cache_dir=None), "Sustainability", 2000)
    info = draws(browser, graph_to_html(g, tmp_path / "fig1.html"))
    assert info is not None and info["nodes"] == 2000 and info["edges"] == g.num_edges
