"""A local mock of the MediaWiki Action API (`action=query`, format=json, formatversion 1) serving a `Snapshot`.

It is a real HTTP server on 127.0.0.1, so `lib.crawl.live.LiveSource` is exercised through wikipedia-api, httpx and
sockets exactly as against Wikipedia. It answers what the crawler asks:

    titles=A|B|...   (at most 50)   redirects=1   prop=links|pageprops   ppprop=disambiguation
    plnamespace=0    pllimit<=500   plcontinue=...   maxlag=N

with the formatversion-1 shapes: `query.pages` keyed by pageid strings (negative ids and "missing": "" for missing
pages), `query.normalized` and `query.redirects` lists, `continue: {"plcontinue": ..., "continue": "||"}` and
`pageprops: {"disambiguation": ""}`. Link targets whose title starts with a namespace prefix ("Category:",
"File:", ...) get that namespace, so a snapshot can hold non-article links to test the `plnamespace` filter.
Links are served in snapshot order (Wikipedia sorts them by title); then a crawl through the mock equals an
in-process crawl of the same snapshot.

Faults are injected at configurable rates from a seeded RNG, one draw per request in arrival order: 429 with
Retry-After, 503, a stalled response (sleeps longer than the client's read timeout), malformed JSON, and a maxlag
error (HTTP 200 with {"error": {"code": "maxlag"}} and Retry-After; only when the request sent `maxlag`).

    with MockWiki(snapshot, faults=FaultConfig(rate_429=0.1), seed=0) as wiki:
        LiveSource(contact="me@example.org", api_url=wiki.url)

CLI: `python tests/mockwiki.py --snapshot FILE --port 8765` serves a snapshot file (TSV or graph JSON) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import random
import threading
import time
import urllib.parse
from collections import deque
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from lib.crawl.pages import Snapshot

# Namespace prefixes of English Wikipedia (the mock needs only enough to give non-article links a namespace).
NAMESPACES = {
    "Talk": 1,
    "User": 2,
    "User talk": 3,
    "Wikipedia": 4,
    "Wikipedia talk": 5,
    "File": 6,
    "Image": 6,
    "MediaWiki": 8,
    "Template": 10,
    "Template talk": 11,
    "Help": 12,
    "Category": 14,
    "Category talk": 15,
    "Portal": 100,
    "Draft": 118,
    "Module": 828,
}
MAX_TITLES = 50  # the API's limit for titles= from a normal (non-bot) account
MAX_PLLIMIT = 500
_INVALID_CHARS = set("[]{}<>|#")


@dataclass(frozen=True)
class FaultConfig:
    """Per-request fault probabilities (their sum must be <= 1) and how faults behave.

    retry_after:   value of the Retry-After header on 429 and maxlag answers, in seconds (keep 0 in tests).
    stall_seconds: how long a stalled response sleeps before answering; make it longer than the client's read
                   timeout.
    """

    rate_429: float = 0.0
    rate_503: float = 0.0
    rate_stall: float = 0.0
    rate_malformed: float = 0.0
    rate_maxlag: float = 0.0
    retry_after: int = 0
    stall_seconds: float = 2.0

    def __post_init__(self):
        rates = [getattr(self, f.name) for f in fields(self) if f.name.startswith("rate_")]
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name.startswith("rate_") and not 0.0 <= v <= 1.0:
                raise ValueError(f"FaultConfig.{f.name}={v!r} must be a probability in [0, 1]")
        if sum(rates) > 1.0 + 1e-9:
            raise ValueError(
                f"FaultConfig rates sum to {sum(rates):.3f}; they are exclusive per request, so keep the sum <= 1"
            )
        if self.retry_after < 0 or self.stall_seconds < 0:
            raise ValueError("FaultConfig.retry_after and stall_seconds must be >= 0")

    def draw(self, u: float) -> str | None:
        """Map one uniform draw u in [0, 1) to a fault kind (or None)."""
        acc = 0.0
        for kind in ("429", "503", "stall", "malformed", "maxlag"):
            acc += getattr(self, f"rate_{kind}")
            if u < acc:
                return kind
        return None


def namespace_of(title: str) -> int:
    prefix, sep, _ = title.partition(":")
    return NAMESPACES.get(prefix, 0) if sep else 0


def normalize_title(raw: str) -> str | None:
    """MediaWiki's title normalisation (underscores -> spaces, collapsed spaces, capital first letter of the
    namespace and of the page name); None for an invalid title."""
    t = " ".join(raw.replace("_", " ").split())
    if not t or any(c in _INVALID_CHARS for c in t):
        return None
    prefix, sep, rest = t.partition(":")
    if sep and prefix.capitalize() in {k.capitalize() for k in NAMESPACES}:
        canon = next(k for k in NAMESPACES if k.capitalize() == prefix.capitalize())
        rest = rest.strip()
        return f"{canon}:{rest[:1].upper()}{rest[1:]}" if rest else None
    return t[:1].upper() + t[1:]


class MockWiki:
    """Serve `snapshot` over HTTP on 127.0.0.1 in a background thread.

    url:      the api.php URL to give to `LiveSource(api_url=...)`.
    requests: number of HTTP requests received so far (faulty ones included).
    log:      the last `log_size` requests as dicts {"params": {...}, "user_agent": str, "fault": str | None}.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        faults: FaultConfig | None = None,
        seed: int = 0,
        port: int = 0,
        log_size: int = 1000,
        latency: float = 0.0,
    ):
        self.snapshot = snapshot
        self.latency = latency  # seconds added to every answer (a network round trip); may be changed while serving
        self.faults = faults or FaultConfig()
        self.requests = 0
        self.log: deque[dict] = deque(maxlen=log_size)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        existing = set(snapshot.links) | set(snapshot.disambiguation) | set(snapshot.redirects)
        # Deterministic page ids, as a fixed database would have.
        self._pageid = {t: i + 1 for i, t in enumerate(sorted(existing))}
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))
        self._server.daemon_threads = True  # stalled handlers must not block close()
        self._thread = threading.Thread(target=self._server.serve_forever, name="mockwiki", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}/w/api.php"

    def close(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MockWiki:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- request handling -------------------------------------------------------------------------------------

    def _next_fault(self, params: dict[str, str], user_agent: str) -> str | None:
        with self._lock:
            self.requests += 1
            fault = self.faults.draw(self._rng.random())
            if fault == "maxlag" and "maxlag" not in params:
                fault = None  # the real API only answers maxlag errors to clients that ask for them
            self.log.append({"params": params, "user_agent": user_agent, "fault": fault})
            return fault

    def answer(self, params: dict[str, str]) -> dict:
        """The JSON answer of the API to one request's parameters (no faults)."""
        if params.get("action") != "query":
            return _error("badvalue", f'Unrecognized value for parameter "action": {params.get("action")}.')
        if params.get("format") != "json":
            return _error("badvalue", "The mock serves format=json only.")
        titles = [t for t in params.get("titles", "").split("|")] if params.get("titles") else []
        if len(titles) > MAX_TITLES:
            return _error(
                "toomanyvalues", f'Too many values supplied for parameter "titles". The limit is {MAX_TITLES}.'
            )
        props = set(filter(None, params.get("prop", "").split("|")))
        unknown = props - {"links", "pageprops"}
        if unknown:
            return _error("badvalue", f"The mock does not implement prop={'|'.join(sorted(unknown))}.")
        follow = params.get("redirects") not in (None, "0", "false", "")

        query: dict = {}
        normalized, redirects = [], []
        resolved: list[str] = []  # titles after normalisation/redirects, in request order, deduplicated
        invalid: list[str] = []
        for raw in titles:
            t = normalize_title(raw)
            if t is None:
                invalid.append(raw)
                continue
            if t != raw:
                normalized.append({"from": raw, "to": t})
            hops = 0
            while follow and t in self.snapshot.redirects and hops < 10:
                target = self.snapshot.redirects[t]
                redirects.append({"from": t, "to": target})
                t, hops = target, hops + 1
            if t not in resolved:
                resolved.append(t)
        if normalized:
            query["normalized"] = normalized
        if redirects:
            query["redirects"] = redirects

        pages: dict[str, dict] = {}
        present: list[tuple[int, str]] = []
        missing_id = -1
        for raw in invalid:
            pages[str(missing_id)] = {
                "title": raw,
                "invalidreason": "The requested page title is invalid.",
                "invalid": "",
            }
            missing_id -= 1
        for t in resolved:
            entry = {"ns": namespace_of(t), "title": t}
            pid = (
                self._pageid.get(t)
                if (t in self.snapshot.links or t in self.snapshot.disambiguation or t in self.snapshot.redirects)
                else None
            )
            if pid is None:
                entry["missing"] = ""
                pages[str(missing_id)] = entry
                missing_id -= 1
            else:
                pages[str(pid)] = {"pageid": pid, **entry}
                present.append((pid, t))
        present.sort()

        if "pageprops" in props:
            wanted = set(params["ppprop"].split("|")) if params.get("ppprop") else None
            for pid, t in present:
                if t in self.snapshot.disambiguation and (wanted is None or "disambiguation" in wanted):
                    pages[str(pid)]["pageprops"] = {"disambiguation": ""}

        cont = None
        if "links" in props:
            cont = self._links(params, present, pages)
            if isinstance(cont, dict) and "error" in cont:
                return cont

        out: dict = {}
        if cont:
            out["continue"] = {"plcontinue": cont, "continue": "||"}
        else:
            out["batchcomplete"] = ""
        if titles:
            query["pages"] = pages
            out["query"] = query
        return out

    def _links(self, params: dict[str, str], present: list[tuple[int, str]], pages: dict) -> str | dict | None:
        """Fill "links" of the present pages, sharing pllimit across them in pageid order like the API; return the
        plcontinue cursor ("pageid|offset") when more remain."""
        limit_raw = params.get("pllimit", "10")
        try:
            limit = MAX_PLLIMIT if limit_raw == "max" else min(int(limit_raw), MAX_PLLIMIT)
        except ValueError:
            return _error("badinteger", f'Invalid value "{limit_raw}" for integer parameter "pllimit".')
        namespaces = None
        if params.get("plnamespace"):
            namespaces = {int(x) for x in params["plnamespace"].split("|")}
        start_pid, start_off = 0, 0
        if params.get("plcontinue"):
            try:
                a, b = params["plcontinue"].split("|")
                start_pid, start_off = int(a), int(b)
            except ValueError:
                return _error(
                    "badcontinue",
                    "Invalid continue param. You should pass the original value returned by the previous query.",
                )
        budget = limit
        for pid, t in present:
            if pid < start_pid:
                continue
            targets = self.snapshot.links.get(t, [])
            off = start_off if pid == start_pid else 0
            batch = []
            while off < len(targets):
                link = targets[off]
                ns = namespace_of(link)
                if namespaces is None or ns in namespaces:
                    if budget == 0:
                        break
                    batch.append({"ns": ns, "title": link})
                    budget -= 1
                off += 1
            if batch:
                pages[str(pid)]["links"] = batch
            if off < len(targets):
                return f"{pid}|{off}"
        return None


def synthetic_snapshot(
    n_articles: int, seed: int = 0, community_size: int = 500, median_links: int = 30, max_links: int = 2000
) -> Snapshot:
    """A Wikipedia-like link table for tests and benchmarks: heavy-tailed out-degrees (log-normal, ~0.2% of pages over
    500 links), popular targets (Zipf within and across communities of `community_size` articles, so BFS balls from
    different roots overlap), ~5% of articles reachable through redirects ("Alias of ..."), ~2% red links, ~1%
    disambiguation pages ("Term k"), links sorted by title as the MediaWiki API returns them.

    Titles: "Article 00000" ... (already in normalised form). Topics: "Topic <community>".
    """
    rng = random.Random(seed)
    width = len(str(n_articles))
    titles = [f"Article {i:0{width}d}" for i in range(n_articles)]
    aliases = {i: f"Alias of article {i:0{width}d}" for i in range(n_articles) if rng.random() < 0.05}
    n_terms = max(1, n_articles // 100)
    terms = [f"Term {k}" for k in range(n_terms)]
    zipf = [1.0 / (r + 1) ** 0.9 for r in range(max(n_articles, community_size))]
    cum_global = list(_accumulate(zipf[:n_articles]))
    cum_local = list(_accumulate(zipf[:community_size]))
    perm = list(range(n_articles))
    rng.shuffle(perm)  # popularity rank -> article, so popular articles are spread over the id range
    links: dict[str, list[str]] = {}
    topics: dict[str, str] = {}
    for i, title in enumerate(titles):
        c = i // community_size
        lo, hi = c * community_size, min(n_articles, (c + 1) * community_size)
        topics[title] = f"Topic {c}"
        deg = min(max_links, max(1, int(rng.lognormvariate(math.log(median_links), 1.0))))
        out: set[str] = set()
        for _ in range(deg):
            u = rng.random()
            if u < 0.02:
                out.add(f"Red link {rng.randrange(n_articles * 2)}")
                continue
            if u < 0.03:
                out.add(rng.choice(terms))
                continue
            if u < 0.70:
                j = lo + min(hi - lo - 1, bisect.bisect(cum_local, rng.random() * cum_local[hi - lo - 1]))
            else:
                j = perm[min(n_articles - 1, bisect.bisect(cum_global, rng.random() * cum_global[-1]))]
            if j == i:
                continue
            out.add(aliases[j] if j in aliases and rng.random() < 0.5 else titles[j])
        links[title] = sorted(out)
    for k, term in enumerate(terms):
        links[term] = sorted({titles[rng.randrange(n_articles)] for _ in range(5)})
    return Snapshot(
        links=links, redirects={a: titles[j] for j, a in aliases.items()}, disambiguation=set(terms), topics=topics
    )


def _accumulate(xs):
    total = 0.0
    for x in xs:
        total += x
        yield total


def _error(code: str, info: str) -> dict:
    return {"error": {"code": code, "info": info, "*": "See the mock's docstring (tests/mockwiki.py)."}}


def _make_handler(wiki: MockWiki):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as Wikipedia's servers do
        server_version = "mockwiki/0.1"
        disable_nagle_algorithm = True  # headers and body go out in two writes; Nagle would delay each answer 40 ms

        def log_message(self, *args):  # keep test output clean
            pass

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/w/api.php":
                return self._send(404, b"not found", "text/plain")
            params = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
            fault = wiki._next_fault(params, self.headers.get("User-Agent", ""))
            retry_after = {"Retry-After": str(wiki.faults.retry_after)}
            if wiki.latency:
                time.sleep(wiki.latency)
            if fault == "429":
                return self._send(429, b"Too many requests", "text/plain", retry_after)
            if fault == "503":
                return self._send(503, b"Service unavailable", "text/plain")
            if fault == "stall":
                wiki._stop.wait(wiki.faults.stall_seconds)
            if fault == "maxlag":
                body = _error("maxlag", "Waiting for db1234: 7 seconds lagged.")
                body["error"].update(host="db1234", lag=7, type="db")
                return self._send(
                    200,
                    json.dumps(body).encode(),
                    "application/json",
                    {**retry_after, "X-Database-Lag": "7", "MediaWiki-API-Error": "maxlag"},
                )
            data = json.dumps(wiki.answer(params), ensure_ascii=False).encode("utf-8")
            if fault == "malformed":
                data = data[: max(1, len(data) // 2)]
            self._send(200, data, "application/json; charset=utf-8")

        def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None):
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (e.g. after a stalled response); nothing to do

    return Handler


def main(argv: list[str] | None = None) -> None:
    from lib.crawl.sources import read_snapshot

    ap = argparse.ArgumentParser(description="Serve a link snapshot as a mock MediaWiki API on 127.0.0.1.")
    ap.add_argument("--snapshot", required=True, help="TSV source<TAB>target file or a graph JSON file")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--seed", type=int, default=0)
    for name in ("429", "503", "stall", "malformed", "maxlag"):
        ap.add_argument(f"--rate-{name}", type=float, default=0.0, help=f"probability of a {name} fault per request")
    args = ap.parse_args(argv)
    faults = FaultConfig(
        rate_429=args.rate_429,
        rate_503=args.rate_503,
        rate_stall=args.rate_stall,
        rate_malformed=args.rate_malformed,
        rate_maxlag=args.rate_maxlag,
    )
    wiki = MockWiki(read_snapshot(args.snapshot), faults=faults, seed=args.seed, port=args.port)
    print(f"serving {args.snapshot} at {wiki.url} (Ctrl-C to stop)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        wiki.close()


if __name__ == "__main__":
    main()
