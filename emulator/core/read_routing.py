"""Which replica of a region serves a read (after PolarDB's proxy), and the knobs that steer it.

Theory of operation: the consistency level decides the lowest LSN a replica must have applied
(`min_lsn`): 0 for eventual and consistent prefix, the session token's LSN for session, the
committed LSN for strong and bounded staleness. Among the replicas that are up and have
applied at least `min_lsn`, the policy picks the one with the highest dynamic weight
`weight / (in_flight + 1)`; with equal weights that is "fewest active requests". `in_flight`
is counted by the shell serving the read, from admission to reply (a `latency` fault makes it
real). A replica of weight 0 serves only when nothing else can. The primary takes reads only
when `primary_accepts_reads` is on, or when no secondary qualifies (the primary always has every
committed write, so a session read that the secondaries cannot serve yet goes there) — except
through a region's read-only endpoint (`primary_ok=False`), which never reads from the primary.
Ties go to the lowest index, so routing is deterministic.

The `connections` strategy (PolarDB's connection-based balancing) pins instead: the first
eventual or consistent-prefix read a client connection makes from a replica set pins that
connection to one replica of it, the one with the highest `weight / (pinned + 1)` (with equal
weights: fewest pinned connections; weight 0 and a primary that does not accept reads only when
nothing else is up, then by fewest pinned), and every later such read of that connection from
that set goes there. Consistency-aware routing is not offered in this mode: a session, bounded-staleness or
strong read ignores the pin (and pins nothing) and is routed per request as under
`active_requests`, since a pinned replica need not have the LSN it needs. A pin moves when its
replica goes down or may no longer serve (it became a primary that takes no reads, or the read
came through a read-only endpoint), and a fallback pin (weight 0, or a reluctant primary) moves
as soon as a proper replica is up again. `ConnectionPins` holds one connection's pins; the shell
calls `release()` when the connection closes, so `Replica.pinned` always counts the open
connections pinned there. Any change of the knobs drops every pin (`drop_pins`); connections
pin again at their next read under the new settings.

The knobs, changed at runtime by the control API (PUT /routing, PUT /routing/weights):
`primary_accepts_reads` and `strategy` for the account, each overridable per region; replica
weights (by replica index 0-3, 0-100, default 1) for the account, a region's list overriding
it. Weights live on the replicas themselves (`Replica.weight`, what `choose` reads); the policy
keeps what was asked for so that replica sets created later (new containers, joining regions)
start with it (`weights_for`).
"""
from .consistency import EVENTUAL, PREFIX
from .replica import PRIMARY, UP, WEIGHT_DEFAULT, WEIGHT_MAX, Replica
from .limits import PINS_PER_CONNECTION_MAX

ACTIVE_REQUESTS = "active_requests"
CONNECTIONS = "connections"
STRATEGIES = (ACTIVE_REQUESTS, CONNECTIONS)
PINNED_LEVELS = frozenset((EVENTUAL, PREFIX))   # the reads a connection's pin serves
REPLICAS_PER_SET = 4


class ReadRoutingPolicy:
    __slots__ = ("primary_accepts_reads", "strategy", "overrides", "weights", "region_weights", "pin_holders")

    def __init__(self, primary_accepts_reads: bool = True, strategy: str = ACTIVE_REQUESTS,
                 weights: list | None = None):
        self.primary_accepts_reads = primary_accepts_reads
        self.strategy = strategy
        self.overrides: dict[str, dict] = {}          # region -> {"primary_accepts_reads"?, "strategy"?}
        self.weights = list(weights) if weights else [WEIGHT_DEFAULT] * REPLICAS_PER_SET
        self.region_weights: dict[str, list] = {}     # region -> weights by replica index
        self.pin_holders: set = set()                 # the ConnectionPins holding pins now

    # ---- knobs ------------------------------------------------------------------------------
    def setting(self, region: str | None, name: str):
        o = self.overrides.get(region) if region is not None else None
        if o is not None and name in o:
            return o[name]
        return getattr(self, name)

    def weights_for(self, region: str) -> list:
        return self.region_weights.get(region, self.weights)

    def describe(self) -> dict:
        return {"primary_accepts_reads": self.primary_accepts_reads, "strategy": self.strategy,
                "weights": list(self.weights),
                "regions": {r: dict(o) for r, o in sorted(self.overrides.items())},
                "region_weights": {r: list(w) for r, w in sorted(self.region_weights.items())}}

    # ---- choosing ---------------------------------------------------------------------------
    def choose(self, replicas: list[Replica], min_lsn: int, region: str | None = None,
               primary_ok: bool = True) -> Replica | None:
        """The replica to serve a read; primary_ok=False (a read-only endpoint) never picks the primary."""
        primary_reads = self.setting(region, "primary_accepts_reads")
        best = None
        best_score = -1.0
        fallback = None           # weight-0 replicas and a reluctant primary
        for r in replicas:
            if r.state != UP or r.applied_lsn < min_lsn or (r.role == PRIMARY and not primary_ok):
                continue
            if r.weight == 0 or (r.role == PRIMARY and not primary_reads):
                if fallback is None or _score(r) > _score(fallback):
                    fallback = r
                continue
            score = r.weight / (r.in_flight + 1)
            if score > best_score:
                best, best_score = r, score
        return best if best is not None else fallback

    def pin_choice(self, replicas: list[Replica], region: str | None = None, primary_ok: bool = True,
                   fallback_ok: bool = True) -> Replica | None:
        """The replica a new pin goes to: up, allowed, highest weight / (pinned + 1); weight 0
        and a reluctant primary only when nothing else is up (and fallback_ok)."""
        primary_reads = self.setting(region, "primary_accepts_reads")
        best = None
        best_score = -1.0
        fallback = None
        for r in replicas:
            if r.state != UP or (r.role == PRIMARY and not primary_ok):
                continue
            if r.weight == 0 or (r.role == PRIMARY and not primary_reads):
                if fallback is None or _pin_score(r) > _pin_score(fallback):
                    fallback = r
                continue
            score = r.weight / (r.pinned + 1)
            if score > best_score:
                best, best_score = r, score
        return best if best is not None or not fallback_ok else fallback

    def pin_holds(self, r: Replica, replicas: list[Replica], region: str | None, primary_ok: bool) -> bool:
        """Whether a connection's pin on r still stands (see the theory of operation)."""
        if r.state != UP or (r.role == PRIMARY and not primary_ok):
            return False
        if r.weight == 0 or (r.role == PRIMARY and not self.setting(region, "primary_accepts_reads")):
            return self.pin_choice(replicas, region, primary_ok, fallback_ok=False) is None
        return True

    def drop_pins(self) -> None:
        """Every connection's pins, released (the knobs changed); they pin again at their next read."""
        for holder in list(self.pin_holders):
            holder.release()


class ConnectionPins:
    """The replica one client connection is pinned to in each replica set it read from
    (strategy `connections`). Replica sets are keys by identity; `release` when it closes."""
    __slots__ = ("by_set", "policies")

    def __init__(self):
        self.by_set: dict = {}          # replica set -> the pinned Replica
        self.policies: set = set()      # the policies this holder is registered with

    def replica_for(self, rs, primary_ok: bool = True) -> Replica | None:
        """This connection's replica of rs, pinning one if it has none (or its pin moved on)."""
        policy = rs.routing
        r = self.by_set.get(rs)
        if r is not None:
            if policy.pin_holds(r, rs.replicas, rs.region, primary_ok):
                return r
            r.pinned -= 1
            del self.by_set[rs]
        r = policy.pin_choice(rs.replicas, rs.region, primary_ok)
        if r is None:
            return None
        if len(self.by_set) >= PINS_PER_CONNECTION_MAX:
            self.release()
        self.by_set[rs] = r
        r.pinned += 1
        if policy not in self.policies:
            self.policies.add(policy)
            policy.pin_holders.add(self)
        return r

    def release(self) -> None:
        for r in self.by_set.values():
            r.pinned -= 1
        self.by_set.clear()
        for policy in self.policies:
            policy.pin_holders.discard(self)
        self.policies.clear()


def _pin_score(r: Replica) -> tuple:
    # Among fallbacks, fewest pinned (a pin holds a replica for a connection's life, so piling
    # every fallback pin on the primary would load it most), the primary on ties.
    return (-r.pinned, r.role == PRIMARY)


def _score(r: Replica) -> float:
    # Among fallbacks prefer the primary (it has everything), then fewest in flight.
    return (1.0 if r.role == PRIMARY else 0.0) + 1.0 / (r.in_flight + 1)


def check_weights(weights) -> list:
    """weights as a list of REPLICAS_PER_SET integers 0..WEIGHT_MAX, or ValueError saying why."""
    if (not isinstance(weights, list) or len(weights) != REPLICAS_PER_SET
            or any(isinstance(w, bool) or not isinstance(w, int) or not 0 <= w <= WEIGHT_MAX for w in weights)):
        raise ValueError(f"weights are {REPLICAS_PER_SET} integers from 0 to {WEIGHT_MAX}, one per replica "
                         f"index 0-3 (0: only when no other replica can serve), e.g. [0, 1, 2, 3]; got {weights!r}")
    return list(weights)


# ---- runtime changes (the control API's PUT /routing and PUT /routing/weights) ---------------
SETTING_NAMES = ("primary_accepts_reads", "strategy")


def change_settings(account, body: dict) -> dict:
    """Apply {"primary_accepts_reads"?, "strategy"?, "region"?} to the account's policy (or one
    region's override: null for a key removes that region's override of it). All or nothing."""
    from .errors import bad_request
    policy = account.routing
    if not isinstance(body, dict):
        raise bad_request('PUT /routing takes {"primary_accepts_reads": bool, "strategy": '
                          '"active_requests" | "connections", "region"?: name}.')
    unknown = sorted(set(body) - set(SETTING_NAMES) - {"region"})
    if unknown:
        raise bad_request(f"Unknown routing key {unknown[0]!r}; the keys are: {', '.join(SETTING_NAMES)}, region.")
    region = _region(account, body.get("region"))
    for name, value in body.items():
        if name == "primary_accepts_reads" and not (isinstance(value, bool) or (value is None and region)):
            raise bad_request(f"primary_accepts_reads must be true or false; got {value!r}.")
        if name == "strategy" and not (value in STRATEGIES or (value is None and region)):
            raise bad_request(f"strategy must be one of {', '.join(STRATEGIES)}; got {value!r}.")
    for name in SETTING_NAMES:
        if name not in body:
            continue
        if region is None:
            setattr(policy, name, body[name])
        elif body[name] is None:
            policy.overrides.get(region, {}).pop(name, None)
        else:
            policy.overrides.setdefault(region, {})[name] = body[name]
    if region is not None and not policy.overrides.get(region):
        policy.overrides.pop(region, None)
    policy.drop_pins()              # pinned under the old knobs: pin again under the new ones
    return policy.describe()


def change_weights(account, body: dict) -> dict:
    """Apply {"weights": [w0..w3], "region"?: name} (a region's `null` weights drop its
    override) to every replica set at once, and to those created later."""
    from .errors import bad_request
    policy = account.routing
    if not isinstance(body, dict) or "weights" not in body or set(body) - {"weights", "region"}:
        raise bad_request('PUT /routing/weights takes {"weights": [w0, w1, w2, w3], "region"?: name}.')
    region = _region(account, body.get("region"))
    weights = body["weights"]
    if weights is None and region is not None:
        policy.region_weights.pop(region, None)
    else:
        try:
            weights = check_weights(weights)
        except ValueError as e:
            raise bad_request(str(e)) from None
        if region is None:
            policy.weights = weights
        else:
            policy.region_weights[region] = weights
    for _, p in account.partitions():
        for name, rs in p.replica_sets.items():
            for r, w in zip(rs.replicas, policy.weights_for(name)):
                r.weight = w
    policy.drop_pins()
    return policy.describe()


def _region(account, name):
    from .errors import bad_request
    if name is None:
        return None
    try:
        account.region(name)
    except KeyError:
        raise bad_request(f"Unknown region {name!r}; the regions are: "
                          f"{', '.join(r.name for r in account.regions)}.") from None
    return name
