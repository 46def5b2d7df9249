"""Live Wikipedia as a `lib.crawl.pages.LinkSource`, through wikipedia-api 0.16 (or the local mock of tests.mockwiki).

One `page(title)` call costs, one request at a time:
  1. `titles=<title>&redirects=1&prop=links|pageprops&ppprop=disambiguation&plnamespace=0&pllimit=500`, repeated
     with the returned `continue` values until the links are complete (the page's own redirects are resolved here);
  2. `titles=A|B|...&redirects=1` for the link targets, at most 50 per request, following `normalized` and
     `redirects`, so every link points at its article's canonical title (one article = one node). Red links (missing
     targets) stay as links; the BFS adds them and skips them when dequeued, as the seed did.

Politeness and robustness: a descriptive User-Agent with a contact, `maxlag` on every request, connect and read
timeouts, and two retry layers with bounded budgets:
  - wikipedia-api retries 429 / 5xx / timeouts / connection errors with exponential back-off and honours
    Retry-After (`max_retries`, `retry_wait`);
  - around each request, a tenacity loop retries what wikipedia-api does not: maxlag (and other transient API error
    codes) answered with HTTP 200, malformed JSON, and a request whose inner budget ran out
    (`max_attempts` tries, at most `max_total_wait` seconds). Then `CrawlError` names the host and what to check.
"""

from __future__ import annotations

import urllib.parse

import httpx
import wikipediaapi
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)
from wikipediaapi import (
    WikiConnectionError,
    WikiHttpError,
    WikiHttpTimeoutError,
    WikiInvalidJsonError,
    WikiRateLimitError,
)

from lib.common.params import require
from lib.common.titles import TitleError, check_title
from lib.crawl.pages import DISAMBIGUATION, MISSING, OK, CrawlError, Page

USER_AGENT = "wikigat-crawler/0.1 (research; contact: {contact})"
BATCH = 50  # the API's limit on titles= per request for a normal account
PLLIMIT = 500  # the API's maximum links per answer for a normal account
_TRANSIENT_API_CODES = {"maxlag", "readonly", "ratelimited", "internal_api_error_DBQueryTimeoutError"}


class _Transient(Exception):
    """One answer worth retrying (maxlag, malformed JSON, inner retry budget spent)."""

    def __init__(self, what: str, retry_after: float | None = None):
        super().__init__(what)
        self.retry_after = retry_after


class _CountingTransport(httpx.BaseTransport):
    """Sends every request to `base_url` instead of Wikipedia (when given), counts requests (retries included) and
    remembers the last Retry-After header, which wikipedia-api's `_get` does not return with the JSON."""

    def __init__(self, base_url: str | None):
        self._inner = httpx.HTTPTransport()
        self._base = httpx.URL(base_url) if base_url else None
        self.requests = 0
        self.last_retry_after: str | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self._base is not None:
            request.url = request.url.copy_with(
                scheme=self._base.scheme, host=self._base.host, port=self._base.port, path=self._base.path
            )
            request.headers["Host"] = self._base.netloc.decode("ascii")
        self.requests += 1
        self.last_retry_after = None
        response = self._inner.handle_request(request)
        self.last_retry_after = response.headers.get("Retry-After")
        return response

    def close(self) -> None:
        self._inner.close()


class LiveSource:
    """Links of live Wikipedia articles (or of the mock server at `api_url`).

    contact:        e-mail or URL put in the User-Agent (Wikimedia's policy); required for the real Wikipedia.
    api_url:        None = https://<language>.wikipedia.org/w/api.php; else e.g. MockWiki(...).url.
    maxlag:         seconds of database replication lag above which the API asks us to back off.
    connect_timeout, read_timeout: seconds per request; `timeout` (the notebook's single knob) sets both.
    max_retries, retry_wait: wikipedia-api's inner retries of 429/5xx/timeouts/connection errors (back-off
                    retry_wait * 2**k, or Retry-After).
    max_attempts, max_total_wait: the outer budget per request (maxlag, malformed JSON, spent inner budget).
    source_id:      cache identity; default "live:<language>.wikipedia.org" or "live:<api_url>".
    requests:       HTTP requests sent so far, retries included.

    Not thread-safe, on purpose: Wikimedia asks API clients to send one request at a time.
    """

    def __init__(
        self,
        contact: str,
        language: str = "en",
        api_url: str | None = None,
        maxlag: int = 5,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        max_retries: int = 4,
        retry_wait: float = 1.0,
        max_attempts: int = 4,
        max_total_wait: float = 300.0,
        source_id: str | None = None,
        timeout: float | None = None,
    ):
        if api_url is None:
            require(
                bool(contact and contact.strip()),
                "contact",
                contact,
                "the live Wikipedia source needs a contact (e-mail or URL) for its User-Agent, as Wikimedia's "
                "User-Agent policy asks; set contact in params or use source='embedded'",
            )
        require(
            max_retries >= 0 and max_attempts >= 1,
            "max_retries/max_attempts",
            (max_retries, max_attempts),
            "use max_retries >= 0 and max_attempts >= 1",
        )
        if timeout is not None:
            require(timeout > 0, "timeout", timeout, "use a positive number of seconds, e.g. 20")
            connect_timeout = read_timeout = float(timeout)
        self.api_url = api_url or f"https://{language}.wikipedia.org/w/api.php"
        self.source_id = source_id or (f"live:{language}.wikipedia.org" if api_url is None else f"live:{api_url}")
        self.user_agent = USER_AGENT.format(contact=(contact or "none").strip())
        self.language = language
        self.maxlag = maxlag
        self.max_retries = max_retries
        self.retry_wait = retry_wait
        self.max_attempts = max_attempts
        self.max_total_wait = max_total_wait
        self._transport = _CountingTransport(api_url)
        self._wiki = wikipediaapi.Wikipedia(
            user_agent=self.user_agent,
            language=language,
            extra_api_params={"maxlag": maxlag},
            max_retries=max_retries,
            retry_wait=retry_wait,
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=self._transport,
        )
        self._canonical: dict[str, str | None] = {}  # link title as written -> canonical title; saves repeat lookups

    @property
    def requests(self) -> int:
        return self._transport.requests

    def topic(self, title: str) -> None:
        return None  # Wikipedia has no single topic label per article

    def close(self) -> None:
        self._wiki._client.close()

    # ---- one page ---------------------------------------------------------------------------------------------

    def page(self, title: str) -> Page:
        """The canonical title, status and main-namespace links (redirects resolved, no self-link) of `title`."""
        try:
            title = check_title(title)
        except TitleError:
            return Page(title, MISSING)  # no page has it: not worth a request
        if "|" in title:
            return Page(title, MISSING)  # "|" would split the titles= parameter into several pages
        params = {
            "action": "query",
            "titles": title,
            "prop": "links|pageprops",
            "ppprop": "disambiguation",
            "plnamespace": 0,
            "pllimit": PLLIMIT,
        }
        raw_links: list[str] = []
        canonical = None
        while True:
            data = self._query(params)
            query = data.get("query", {})
            entries = list(query.get("pages", {}).values())
            if len(entries) != 1:
                raise CrawlError(f"{self.api_url} answered {len(entries)} pages for titles={title!r}; expected one")
            entry = entries[0]
            if canonical is None:
                canonical = entry.get("title", title)
                if "missing" in entry or "invalid" in entry or int(entry.get("ns", 0)) != 0:
                    return Page(canonical, MISSING)  # not an article (absent, invalid or outside namespace 0)
                if "disambiguation" in entry.get("pageprops", {}):
                    return Page(canonical, DISAMBIGUATION)
            raw_links += [link["title"] for link in entry.get("links", []) if int(link.get("ns", 0)) == 0]
            if "continue" not in data:
                break
            params = {**params, **data["continue"]}
        links = tuple(self._checked(t, canonical) for t in self._resolve_all(raw_links) if t != canonical)
        return Page(canonical, OK, links)

    def _checked(self, link: str, page: str) -> str:
        """`link` through lib.common.titles.check_title; a title MediaWiki could not have is a broken answer."""
        try:
            return check_title(link)
        except TitleError as e:
            raise CrawlError(
                f"{self.api_url} answered a link of page {page!r} that is not a title: {e}; check that "
                f"api_url is a MediaWiki API"
            ) from None

    def _resolve_all(self, titles: list[str]) -> tuple[str, ...]:
        """Canonical titles of `titles` (normalised, redirects followed), duplicates removed, order kept; targets
        that redirect out of the main namespace are dropped."""
        todo = list(dict.fromkeys(t for t in titles if t not in self._canonical))
        for i in range(0, len(todo), BATCH):
            self._resolve_batch(todo[i : i + BATCH])
        out = dict.fromkeys(self._canonical[t] for t in titles)
        out.pop(None, None)
        return tuple(out)

    def _resolve_batch(self, batch: list[str]) -> None:
        data = self._query({"action": "query", "titles": "|".join(batch)})
        query = data.get("query", {})
        normalized = {n["from"]: n["to"] for n in query.get("normalized", [])}
        redirects = {r["from"]: r["to"] for r in query.get("redirects", [])}
        namespace = {p["title"]: int(p.get("ns", 0)) for p in query.get("pages", {}).values() if "title" in p}
        for t in batch:
            c = normalized.get(t, t)
            for _ in range(10):  # the API lists every hop of a redirect chain; bounded against loops
                if c not in redirects:
                    break
                c = redirects[c]
            self._canonical[t] = c if namespace.get(c, 0) == 0 else None

    # ---- one request, with the outer retry budget -------------------------------------------------------------

    def _query(self, params: dict) -> dict:
        """One API request (format=json, redirects=1 and maxlag added) with both retry layers; CrawlError when the
        budget is spent."""
        # wikipedia-api's public API (page.links) cannot ask for pageprops with the links, nor resolve 50 titles in
        # one request, so we call its internal `_get` (which keeps its retries, back-off and Retry-After handling).
        full = self._wiki._construct_params_standalone(dict(params))
        first = self.requests

        def wait(retry_state) -> float:
            exc = retry_state.outcome.exception()
            backoff = wait_exponential(multiplier=self.retry_wait, max=60)(retry_state)
            hinted = getattr(exc, "retry_after", None)
            return max(backoff, float(hinted)) if hinted is not None else backoff

        retryer = Retrying(
            stop=stop_after_attempt(self.max_attempts) | stop_after_delay(self.max_total_wait),
            wait=wait,
            retry=retry_if_exception_type(_Transient),
        )
        try:
            return retryer(self._attempt, full)
        except RetryError as e:
            last = e.last_attempt.exception()
            raise CrawlError(
                f"could not reach {self.api_url} after {self.requests - first} attempts: {last}; check the network "
                f"(and that the host answers the MediaWiki API) or use source='embedded'"
            ) from last

    def _attempt(self, params: dict) -> dict:
        try:
            data = self._wiki._get(self.language, params)
        except WikiInvalidJsonError as e:
            raise _Transient("the answer was not valid JSON") from e
        except (WikiRateLimitError, WikiHttpTimeoutError, WikiConnectionError) as e:
            raise _Transient(f"{type(e).__name__} {_describe(e)}") from e
        except WikiHttpError as e:
            if e.status_code >= 500:
                raise _Transient(f"HTTP {e.status_code}") from e
            raise CrawlError(f"{self.api_url} answered HTTP {e.status_code} to {_short(params)}; check api_url") from e
        if not isinstance(data, dict):
            raise _Transient("the answer was JSON but not an object")
        if "error" in data:
            err = data["error"] if isinstance(data["error"], dict) else {"code": str(data["error"])}
            code = err.get("code", "")
            if code in _TRANSIENT_API_CODES:
                hint = self._transport.last_retry_after
                raise _Transient(
                    f"API error {code}: {err.get('info', '')}",
                    retry_after=float(hint) if hint and hint.isdigit() else None,
                )
            raise CrawlError(f"{self.api_url} refused {_short(params)}: {code}: {err.get('info', '')}")
        return data


def _describe(e: Exception) -> str:
    cause = e.__cause__
    return f"({type(cause).__name__}: {cause})" if cause else ""


def _short(params: dict) -> str:
    text = urllib.parse.urlencode(params)
    return text if len(text) < 200 else text[:200] + "..."
