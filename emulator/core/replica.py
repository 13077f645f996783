"""One replica of a physical partition in one region.

A replica owns only numbers: the LSN it has applied up to, how many reads it is serving right
now and how many client connections are pinned to it (for read routing), its routing weight,
whether it is up, and the port of its direct TCP listener (0 until direct mode exists).
The items themselves live in the replica set's shared VersionStore.
"""

PRIMARY = "primary"
SECONDARY = "secondary"

UP = "up"
DOWN = "down"

WEIGHT_DEFAULT = 1
WEIGHT_MAX = 100


class Replica:
    __slots__ = ("index", "role", "applied_lsn", "in_flight", "weight", "state", "port",
                 "extra_delay_ms", "next_apply_ms", "reads_served", "in_flight_peak",
                 "pinned")

    def __init__(self, index: int, role: str):
        self.index = index
        self.role = role
        self.applied_lsn = 0
        self.in_flight = 0
        self.weight = WEIGHT_DEFAULT
        self.state = UP
        self.port = 0
        self.extra_delay_ms = 0      # a "slow replica" fault adds to every apply
        self.next_apply_ms = 0       # applies stay in LSN order even when the delay changes
        self.reads_served = 0        # reads routed here (counted by the shell that serves them)
        self.in_flight_peak = 0      # the most reads in flight here at once
        self.pinned = 0              # open connections pinned here (strategy connections; read_routing.py)

    @property
    def up(self) -> bool:
        return self.state == UP

    def describe(self) -> dict:
        return {"index": self.index, "role": self.role, "lsn": self.applied_lsn, "state": self.state,
                "port": self.port, "in_flight": self.in_flight, "weight": self.weight,
                "extra_delay_ms": self.extra_delay_ms, "reads_served": self.reads_served,
                "in_flight_peak": self.in_flight_peak, "pinned_connections": self.pinned}
