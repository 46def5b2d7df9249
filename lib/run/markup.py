"""How a finding writes its numbers and runs: the README links a number to its run with a reference link
(`[0.751][seed40]`, defined once below the findings), the results page links each run inline."""

from __future__ import annotations

SHORT = {"title mentions (proxy)": "title mentions", "Wikispeedia hyperlinks": "Wikispeedia"}
"""Link sources as the README's findings name them."""


def readme_number(value: float, run: str) -> str:
    """A README number linked to its run: '[0.751][seed40]'."""
    return f"[{value:.3f}][{run}]"


def page_link(run: str) -> str:
    """A results-page link to a run, relative to the repository root."""
    return f"[{run}](outputs/reference/{run}/)"


def page_links(runs) -> str:
    return ", ".join(page_link(r) for r in runs)


def slash(values, fmt: str = "{:.3f}") -> str:
    """Numbers side by side: '0.751 / 0.873'."""
    return " / ".join(fmt.format(v) for v in values)


def readme_sides(parts: list[tuple[str, str]]) -> str:
    """(link source, text) parts as the README joins them: 'text on source; ...'."""
    return "; ".join(f"{text} on {SHORT.get(links, links)}" for links, text in parts)


def page_sides(parts: list[tuple[str, str]]) -> str:
    """(link source, text) parts as the results page joins them: 'on source, text; ...'."""
    return "; ".join(f"on {links}, {text}" for links, text in parts)
