"""The fault handle of `running_emulator` and the `regionlab` fixture: one method per fault type
of the catalogue (core/faults.py FAULT_TYPES), each a POST /faults on the control port, so a
test's fault passes exactly the validation a user's curl or the CLI does, and the reply comes
only once the endpoints have settled (a region that went down has closed its connections).

    with emu.faults.region_outage("East US", mode="unavailable") as outage:
        ...                                  # the region is down here
    # healed: the region is back up (and listening) before the next line runs

Every method returns a Fault: a context manager that heals on exit, with `.id`, `.spec` (the
fault as the control port lists it) and `.heal()`. The existing types have typed methods below;
a type the catalogue gains later works at once through `__getattr__` with keyword fields
(`emu.faults.latency("East US", delay_ms=300)`): positional arguments name its regions, one as
`region`, two as `from` and `to`, as every fault of the catalogue names them.
"""
from .control_client import ControlError, call
from .core.faults import FAULT_TYPES, OUTAGE_MODE_DEFAULT

# How a generic fault's positional arguments map to its region fields (core/faults.py REGION_FIELDS).
POSITIONAL_REGION_FIELDS = {1: ("region",), 2: ("from", "to")}


class Fault:
    """An injected fault. As a context manager it heals on exit (unless it has already ended:
    healed by `.heal()`, or by its own `duration_ms`)."""

    def __init__(self, faults: "Faults", spec: dict):
        self._faults = faults
        self.spec = spec
        self.id: int = spec["id"]
        self.type: str = spec["type"]
        self.healed: dict | None = None

    def heal(self) -> dict:
        """Heal it now (DELETE /faults/{id}); the healed spec. ControlError 404 if it has ended."""
        self.healed = self._faults.control("DELETE", f"/faults/{self.id}")["healed"]
        return self.healed

    @property
    def active(self) -> bool:
        return any(f["id"] == self.id for f in self._faults.control("GET", "/faults")["faults"])

    def __enter__(self) -> "Fault":
        return self

    def __exit__(self, *exc) -> None:
        if self.healed is not None:
            return
        try:
            self.heal()
        except ControlError as e:
            if e.status != 404:               # 404: it ended by its duration_ms; nothing to heal
                raise

    def __repr__(self) -> str:
        return f"Fault({self.spec!r})"


class Faults:
    """`emu.faults`: inject faults of the catalogue through the control port."""

    def __init__(self, control_endpoint: str, token: str | None = None):
        self._base = control_endpoint.rstrip("/")
        self._token = token

    def control(self, method: str, path: str, body=None):
        """One control-port request; its JSON reply. ControlError (with .status) if refused."""
        return call(self._base, method, path, body, token=self._token)

    # ---- generic ---------------------------------------------------------------------------
    def inject(self, spec: dict) -> Fault:
        """Inject any fault as the JSON POST /faults takes, e.g. {"type": "link_cut", "from": ...,
        "to": ...}. A spec the control port refuses raises ControlError with its status (400) and
        message, and changes nothing."""
        return Fault(self, self.control("POST", "/faults", spec))

    def active(self) -> list[Fault]:
        """The faults active now (GET /faults), whoever injected them."""
        return [Fault(self, spec) for spec in self.control("GET", "/faults")["faults"]]

    def heal_all(self) -> list[dict]:
        """Heal every active fault; the healed specs."""
        return [f.heal() for f in self.active()]

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in FAULT_TYPES:
            raise AttributeError(f"{name!r} is not a fault type; the catalogue has: {', '.join(FAULT_TYPES)}")

        def inject_type(*regions: str, **fields) -> Fault:
            names = POSITIONAL_REGION_FIELDS.get(len(regions))
            if regions and names is None:
                raise TypeError(f"{name}() takes one region (region) or two (from, to) positionally")
            return self.inject({"type": name, **dict(zip(names or (), regions)), **_present(fields)})
        inject_type.__name__ = name
        inject_type.__doc__ = f"Inject a {name} fault: keyword fields as docs/control-api.md lists them."
        return inject_type

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(FAULT_TYPES))

    # ---- the catalogue's types -------------------------------------------------------------
    def region_outage(self, region: str, mode: str = OUTAGE_MODE_DEFAULT, *,
                      duration_ms: int | None = None) -> Fault:
        """The region's endpoint fails in `mode` (refuse, reset, unavailable, blackhole) and it
        stops receiving replication. An outage of the write region is followed by a
        service-managed failover after `detection_delay_ms` unless healed first."""
        return self._typed("region_outage", region=region, mode=mode, duration_ms=duration_ms)

    def global_endpoint_outage(self, mode: str = OUTAGE_MODE_DEFAULT, *, duration_ms: int | None = None) -> Fault:
        """The account's own endpoint fails in `mode`; the regions' endpoints serve on (the SDKs
        then discover the account through their preferred regions' endpoints)."""
        return self._typed("global_endpoint_outage", mode=mode, duration_ms=duration_ms)

    def link_cut(self, from_region: str, to_region: str, *, one_way: bool = False,
                 duration_ms: int | None = None) -> Fault:
        """Replication between the two regions stops (both ways unless one_way); the backlog
        drains in LSN order on heal."""
        return self._typed("link_cut", **{"from": from_region, "to": to_region}, one_way=one_way,
                           duration_ms=duration_ms)

    def link_lag(self, from_region: str, to_region: str, lag_ms: int, *, jitter_ms: int = 0,
                 one_way: bool = False, duration_ms: int | None = None) -> Fault:
        """Replication between the two regions takes lag_ms (+ seeded jitter, never reordering)."""
        return self._typed("link_lag", **{"from": from_region, "to": to_region}, lag_ms=lag_ms,
                           jitter_ms=jitter_ms, one_way=one_way, duration_ms=duration_ms)

    def primary_crash(self, region: str, *, database: str | None = None, container: str | None = None,
                      partition: str | None = None, duration_ms: int | None = None) -> Fault:
        """The selected partitions' primaries in the region stop; writes get 503 until an
        election (after election_ms) makes the most up-to-date secondary primary."""
        return self._typed("primary_crash", region=region, database=database, container=container,
                           partition=partition, duration_ms=duration_ms)

    def replica_crash(self, region: str, replica: int, *, database: str | None = None,
                      container: str | None = None, partition: str | None = None,
                      duration_ms: int | None = None) -> Fault:
        """One secondary (index 1-3, not the primary) of the selected partitions stops."""
        return self._typed("replica_crash", region=region, replica=replica, database=database,
                           container=container, partition=partition, duration_ms=duration_ms)

    def replica_slow(self, region: str, replica: int, delay_ms: int, *, database: str | None = None,
                     container: str | None = None, partition: str | None = None,
                     duration_ms: int | None = None) -> Fault:
        """Every apply on that replica (index 0-3) takes delay_ms longer."""
        return self._typed("replica_slow", region=region, replica=replica, delay_ms=delay_ms,
                           database=database, container=container, partition=partition,
                           duration_ms=duration_ms)

    def throttle_storm(self, region: str, *, share: float = 1.0, op: str | None = None,
                       retry_after_ms: int = 100, seed: int = 0, duration_ms: int | None = None) -> Fault:
        """That share (0-1) of the region's requests (of one operation kind or class if `op`)
        gets 429/3200 with retry_after_ms."""
        return self._typed("throttle_storm", region=region, share=share, op=op,
                           retry_after_ms=retry_after_ms, seed=seed, duration_ms=duration_ms)

    def replica_move(self, region: str, replica: int, *, to: int | None = None, database: str | None = None,
                     container: str | None = None, partition: str | None = None,
                     duration_ms: int | None = None) -> Fault:
        """Direct mode: the replica moves to another node of its region (node `to`, or a free
        one; needs nodes_per_region >= 5); its old address answers 410."""
        return self._typed("replica_move", region=region, replica=replica, to=to, database=database,
                           container=container, partition=partition, duration_ms=duration_ms)

    def node_crash(self, region: str, node: int, *, duration_ms: int | None = None) -> Fault:
        """Direct mode: the backend node stops listening and every replica on it is down."""
        return self._typed("node_crash", region=region, node=node, duration_ms=duration_ms)

    def direct_ports_blocked(self, region: str | None = None, *, duration_ms: int | None = None) -> Fault:
        """Direct mode: the region's direct ports (every region's if None) refuse connections."""
        return self._typed("direct_ports_blocked", region=region, duration_ms=duration_ms)

    def _typed(self, fault_type: str, **fields) -> Fault:
        return self.inject({"type": fault_type, **_present(fields)})


def _present(fields: dict) -> dict:
    """The fields given (None means left out: the control port's default applies)."""
    return {k: v for k, v in fields.items() if v is not None}
