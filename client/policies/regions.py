"""Region resolution: which regional endpoints a request may go to, in which order.

Theory of operation. The account document (`GET /` on the global endpoint) lists write and read
regions. The router keeps the latest one and answers `applicable(is_write, excluded)`:

* reads: the preferred locations the account has, in preference order (names compared as the
  SDK compares them: lower case without spaces, '-' and '_'); a preferred region the account
  lacks is skipped and used once a refresh shows it; the primary (first write) region follows
  them as the last resort, as the SDKs fall back to the hub; no preference → the account's order;
* writes: single-write accounts write to the write region (preferences and exclusions do not
  apply, as in the SDK); multi-write accounts follow the preference like reads;
* excluded regions are dropped: the request's own list when it has one (it replaces the
  client's, as in azure-cosmos and the Java SDK), else the client's (a list or a supplier
  callable read at every request); when nothing is left the request goes to the primary (first
  write) region;
* an endpoint marked unavailable (connection failure, 403/1008) moves to the end of every list
  for UNAVAILABLE_MS.

With `only_endpoint` (the client's enable_endpoint_discovery=False) the account is still read,
but the router sees it with one region at that endpoint (named after the account's region there,
else after the primary): every request goes there, and nothing fails over, as in the SDKs.

Refresh: every `refresh_interval_ms` (5 min by default), and at once after `request_refresh`
(403/3, 403/1008, a regional 503). The pipeline asks `needs_refresh(now_ms)` before a request.

Following a failover. A single-write account's writes have nowhere to go but the write region
until the service fails over, and nothing tells a client that it did but the account document:
the old write region answers 503, resets, refuses or stays silent. So when the write region does
not answer (`mark_write_unavailable`: a 503 to a write, a transport error, a write the end-to-end
timeout cut off), the account is re-read every FAILOVER_REFRESH_MS instead of every 5 minutes,
until the account names another write region (writes go there from then on), the region answers
again, or UNAVAILABLE_MS pass. The SDKs re-read it only on their 5-minute timer or after a 403/3,
which a region that does not answer never sends.
"""
from dataclasses import dataclass

ACCOUNT_REFRESH_MS = 5 * 60 * 1000
UNAVAILABLE_MS = 5 * 60 * 1000           # as the SDK's location cache expiry
FAILOVER_REFRESH_MS = 1_000              # the account, while the write region does not answer


@dataclass(frozen=True)
class Region:
    name: str
    endpoint: str


@dataclass(frozen=True)
class AccountView:
    write_regions: tuple[Region, ...]
    read_regions: tuple[Region, ...]
    multi_write: bool
    consistency: str


def parse_account(doc: dict) -> AccountView:
    def regions(key):
        return tuple(Region(loc["name"], loc["databaseAccountEndpoint"])
                     for loc in doc.get(key) or () if loc.get("name"))
    writes = regions("writableLocations")
    if not writes:
        raise ValueError("the account document lists no writable location")
    policy = doc.get("userConsistencyPolicy") or {}
    return AccountView(writes, regions("readableLocations") or writes,
                       bool(doc.get("enableMultipleWriteLocations")),
                       policy.get("defaultConsistencyLevel", "Session"))


def pinned(account: AccountView, endpoint: str) -> AccountView:
    """The account as seen by a client that uses `endpoint` alone."""
    named = [r.name for r in account.read_regions + account.write_regions if r.endpoint == endpoint]
    only = (Region(named[0] if named else account.write_regions[0].name, endpoint),)
    return AccountView(only, only, account.multi_write, account.consistency)


def normalise(name: str) -> str:
    return name.lower().replace(" ", "").replace("-", "").replace("_", "")


class RegionRouter:
    def __init__(self, preferred=(), excluded=None, multi_write_enabled: bool = True,
                 refresh_interval_ms: int = ACCOUNT_REFRESH_MS, only_endpoint: str | None = None):
        if isinstance(preferred, str):       # one region named as a string, not its letters
            preferred = [preferred]
        self.preferred = [normalise(p) for p in preferred or ()]
        self.excluded_locations = excluded
        self.multi_write_enabled = multi_write_enabled
        self.refresh_interval_ms = refresh_interval_ms
        self.only_endpoint = only_endpoint
        self.account: AccountView | None = None
        self.refreshed_ms: float | None = None
        self.refresh_reason: str | None = "start"
        self._unavailable: dict[str, float] = {}     # endpoint -> until_ms
        self.write_down: dict[str, float] = {}       # write region endpoint -> until_ms: not answering
        self._plain: dict[bool, list[Region]] = {}    # the order without exclusions or marks

    # ---- excluded locations: a list, or a callable that returns one, changeable at any time ----
    @property
    def excluded_locations(self) -> list[str]:
        value = self._excluded() if callable(self._excluded) else self._excluded
        return [value] if isinstance(value, str) else list(value or ())

    @excluded_locations.setter
    def excluded_locations(self, value) -> None:
        self._excluded = value

    # ---- the account ---------------------------------------------------------------------
    def update(self, account: AccountView, now_ms: float) -> None:
        if self.only_endpoint is not None:
            account = pinned(account, self.only_endpoint)
        self.account = account
        self._plain = {}
        self.refreshed_ms = now_ms
        self.refresh_reason = None
        if self.write_down:                  # a region that is no longer a write region is done with
            writes = {r.endpoint for r in account.write_regions}
            self.write_down = {e: until for e, until in self.write_down.items() if e in writes}

    def request_refresh(self, reason: str) -> None:
        self.refresh_reason = reason

    def needs_refresh(self, now_ms: float) -> bool:
        if self.refresh_reason is not None or self.refreshed_ms is None:
            return True
        elapsed_ms = now_ms - self.refreshed_ms
        if elapsed_ms >= self.refresh_interval_ms:
            return True
        return bool(self.write_down) and elapsed_ms >= FAILOVER_REFRESH_MS and self._write_region_down(now_ms)

    # ---- a write region that does not answer ------------------------------------------------
    def mark_write_unavailable(self, endpoint: str, now_ms: float) -> bool:
        """`endpoint` did not answer; if it is a write region, re-read the account every
        FAILOVER_REFRESH_MS from now on (see the theory above). Whether it was one."""
        if self.account is None or not any(r.endpoint == endpoint for r in self.account.write_regions):
            return False
        self.write_down[endpoint] = now_ms + UNAVAILABLE_MS
        return True

    def mark_write_available(self, endpoint: str) -> None:
        """`endpoint` answered: back to the periodic refresh."""
        self.write_down.pop(endpoint, None)

    def _write_region_down(self, now_ms: float) -> bool:
        for endpoint, until in list(self.write_down.items()):
            if now_ms >= until:
                del self.write_down[endpoint]
        return bool(self.write_down)

    @property
    def multi_write(self) -> bool:
        return bool(self.account and self.account.multi_write and self.multi_write_enabled)

    def primary(self) -> Region:
        return self.account.write_regions[0]

    def region_of(self, endpoint: str) -> str:
        for r in self.account.read_regions + self.account.write_regions:
            if r.endpoint == endpoint:
                return r.name
        return endpoint

    # ---- availability ----------------------------------------------------------------------
    def mark_unavailable(self, endpoint: str, now_ms: float) -> None:
        self._unavailable[endpoint] = now_ms + UNAVAILABLE_MS

    def is_unavailable(self, endpoint: str, now_ms: float) -> bool:
        until = self._unavailable.get(endpoint)
        if until is None:
            return False
        if now_ms >= until:
            del self._unavailable[endpoint]
            return False
        return True

    # ---- the effective order ---------------------------------------------------------------
    def applicable(self, is_write: bool, now_ms: float, excluded=None) -> list[Region]:
        """The regions a request may use, best first; never empty. `excluded`: the request's
        own exclusions (None: the client's)."""
        account = self.account
        if is_write and not self.multi_write:
            return list(account.write_regions)
        # A request's own list (even an empty one) replaces the client's, as azure-cosmos's
        # _get_configured_excluded_locations and the Java SDK's request options do.
        names = self.excluded_locations if excluded is None else [excluded] if isinstance(excluded, str) else excluded
        if not names and not self._unavailable:
            plain = self._plain.get(is_write)
            if plain is None:
                plain = self._plain[is_write] = self._preferred_order(
                    account.write_regions if is_write else account.read_regions)
            return list(plain)
        candidates = account.write_regions if is_write else account.read_regions
        ordered = self._preferred_order(candidates)
        dropped = {normalise(n) for n in names}
        kept = [r for r in ordered if normalise(r.name) not in dropped]
        if not kept:
            return [self.primary()]
        up = [r for r in kept if not self.is_unavailable(r.endpoint, now_ms)]
        return up + [r for r in kept if r not in up]

    def every_read_region(self, now_ms: float, excluded=None) -> list[Region]:
        """Every read region of the account a request may use: `applicable(False)`'s order, then
        the account's read regions outside the preference (a session retry looks there too)."""
        order = self.applicable(False, now_ms, excluded)
        names = self.excluded_locations if excluded is None else [excluded] if isinstance(excluded, str) else excluded
        dropped = {normalise(n) for n in names}
        return order + [r for r in self.account.read_regions
                        if r not in order and normalise(r.name) not in dropped]

    def _preferred_order(self, candidates) -> list[Region]:
        if not self.preferred:
            return list(candidates)
        by_name = {normalise(r.name): r for r in candidates}
        ordered = [by_name[p] for p in self.preferred if p in by_name]
        if not ordered:
            return list(candidates)
        hub = self.account.write_regions[0]
        return ordered if hub in ordered else ordered + [hub]
