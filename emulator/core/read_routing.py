"""Which replica of a region serves a read (after PolarDB's proxy).

Theory of operation: the consistency level decides the lowest LSN a replica must have applied
(`min_lsn`): 0 for eventual and consistent prefix, the session token's LSN for session, the
committed LSN for strong and bounded staleness. Among the replicas that are up and have
applied at least `min_lsn`, the policy picks the one with the highest dynamic weight
`weight / (in_flight + 1)`; with equal weights that is "fewest active requests". A replica of
weight 0 serves only when nothing else can. The primary takes reads only when
`primary_accepts_reads` is on, or when no secondary qualifies (the primary always has every
committed write, so a session read that the secondaries cannot serve yet goes there).
Ties go to the lowest index, so routing is deterministic.
"""
from .replica import Replica, PRIMARY, UP


class ReadRoutingPolicy:
    __slots__ = ("primary_accepts_reads",)

    def __init__(self, primary_accepts_reads: bool = True):
        self.primary_accepts_reads = primary_accepts_reads

    def choose(self, replicas: list[Replica], min_lsn: int) -> Replica | None:
        best = None
        best_score = -1.0
        fallback = None           # weight-0 replicas and a reluctant primary
        for r in replicas:
            if r.state != UP or r.applied_lsn < min_lsn:
                continue
            if r.weight == 0 or (r.role == PRIMARY and not self.primary_accepts_reads):
                if fallback is None or _score(r) > _score(fallback):
                    fallback = r
                continue
            score = r.weight / (r.in_flight + 1)
            if score > best_score:
                best, best_score = r, score
        return best if best is not None else fallback


def _score(r: Replica) -> float:
    # Among fallbacks prefer the primary (it has everything), then fewest in flight.
    return (1.0 if r.role == PRIMARY else 0.0) + 1.0 / (r.in_flight + 1)
