"""The one check of a page title, wherever titles enter: link lists and topic files (lib.crawl.sources), graph files
(lib.common.graphio), the shipped Wikispeedia files (lib.crawl.wikispeedia), live API answers (lib.crawl.live) and
the embedder's input (lib.embed.encoder.clean_titles).

`check_title(raw)` returns the title as the project keeps it, or raises TitleError saying what is wrong and how to
fix it; the caller adds where (file and line, or file and node), so the user reads one line naming all three.

Normalised, because Wikipedia names the same page either way (so two spellings would be two nodes and two vectors):
  - surrounding whitespace is stripped (MediaWiki trims titles);
  - Unicode NFC: MediaWiki stores every title in NFC, so a decomposed "é" (e + U+0301) is the composed one.
Refused, because no Wikipedia title can hold them:
  - an empty (or whitespace-only) title;
  - a control character (Unicode category Cc: tab, newline, NUL, ...) or a line / paragraph separator (U+2028,
    U+2029): it would also break every line-based file the title is written to;
  - a lone surrogate (bytes that were not UTF-8);
  - more than 255 bytes of UTF-8, Wikipedia's limit (a 10,000-character "title" is a paragraph pasted by mistake).
"""

from __future__ import annotations

import re
import unicodedata

from lib.common.errors import WikigatError

MAX_TITLE_BYTES = 255
"""Wikipedia's limit on a title's length, in bytes of UTF-8."""

FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Characters no title may hold: every Cc control character, and the two Unicode line breaks."""

NAMES = {
    "\t": "a tab",
    "\n": "a newline",
    "\r": "a carriage return",
    "\u2028": "a line separator",
    "\u2029": "a paragraph separator",
}


class TitleError(WikigatError, ValueError):
    """A text that cannot be a page title; the message says why and the fix, the caller says where."""


def shown_title(title: str, width: int = 40) -> str:
    """`title` quoted for a one-line message: control characters escaped, cut after `width` characters."""
    return repr(title[:width]) + ("…" if len(title) > width else "")


def check_title(raw: str) -> str:
    """The title `raw` names (whitespace stripped, NFC), or TitleError when no Wikipedia title can be `raw`."""
    title = raw.strip()
    if not title:
        raise TitleError("the title is empty or whitespace only; give it the article's title or remove it")
    bad = FORBIDDEN.search(title)
    if bad:
        ch = bad.group()
        name = NAMES.get(ch, "a control character")
        raise TitleError(
            f"title {shown_title(title)} holds {name} (U+{ord(ch):04X}), which no Wikipedia title can hold; remove it"
        )
    if title.isascii():  # the common case, checked without encoding
        size = len(title)
    else:
        try:
            title = unicodedata.normalize("NFC", title)
            size = len(title.encode("utf-8"))
        except UnicodeEncodeError:
            raise TitleError(
                f"title {shown_title(title)} holds undecodable bytes (a lone surrogate); re-encode the file as UTF-8"
            ) from None
    if size > MAX_TITLE_BYTES:
        raise TitleError(
            f"title {shown_title(title)} is {size:,} bytes of UTF-8, more than Wikipedia's "
            f"{MAX_TITLE_BYTES}; shorten it to the article's title"
        )
    return title
