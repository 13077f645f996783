"""Shared builders for the core tests: an account in virtual time (ManualClock + Scheduler +
seeded random.Random) and small helpers to write and read items through the core's own API.

A plain module, not conftest.py: test files import it by name, and `from conftest import ...`
would pick whichever conftest.py (tests/integration has one) pytest imported first."""
import random

from regionlab.client.protocol.session_token import VectorToken
from regionlab.emulator.core.account import Account, AccountConfig
from regionlab.emulator.core.container import canonical_pk_json
from regionlab.emulator.core.documents import Writer, read_item
from regionlab.emulator.core.scheduler import ManualClock, Scheduler, run_until_idle

PK_DEF = {"paths": ["/pk"], "kind": "Hash", "version": 2}


class World:
    """An account, its clock and its scheduler; time moves only when a test says so."""

    def __init__(self, seed: int = 0, **config):
        self.clock = ManualClock()
        self.scheduler = Scheduler()
        self.account = Account(AccountConfig(**config), self.clock, self.scheduler, random.Random(seed))

    @property
    def now_ms(self) -> int:
        return self.clock.now_ms()

    def advance(self, ms: int) -> None:
        """Move virtual time forward by ms, running every timer due on the way, in order."""
        run_until_idle(self.clock, self.scheduler, limit_ms=self.clock.now_ms() + ms)

    def until(self, ms: int) -> None:
        """Move virtual time to ms (absolute), running every timer due on the way, in order."""
        run_until_idle(self.clock, self.scheduler, limit_ms=ms)

    def settle(self) -> None:
        run_until_idle(self.clock, self.scheduler)

    def container(self, db_id: str = "db", coll_id: str = "c", **kwargs):
        try:
            db = self.account.database(db_id)
        except Exception:
            db = self.account.create_database({"id": db_id})
        return self.account.create_container(db, {"id": coll_id, "partitionKey": PK_DEF}, **kwargs)

    def writer(self, container, pk, region: str | None = None) -> Writer:
        region = region or self.account.write_regions[0]
        return Writer(container, region, canonical_pk_json([pk]), [pk], self.now_ms)

    def write(self, container, pk, op: str, *args, region: str | None = None, **kwargs):
        """One operation as its own commit: (status, version, lsn, replica set)."""
        w = self.writer(container, pk, region)
        status, version = getattr(w, op)(*args, **kwargs)
        lsn = w.commit()
        return status, version, lsn, w.rs

    def read(self, container, region: str, pk, id: str, consistency: str = "Eventual",
             session: dict | None = None):
        """(doc or None, replica set, visible LSN) of a point read in region."""
        v, rs, lsn = read_item(container, region, canonical_pk_json([pk]), [pk], id, consistency, session)
        return (None if v is None else v.doc), rs, lsn


def session_of(rs, lsn: int) -> dict:
    """A session as the gateway parses it: {range id: vector token}."""
    return {rs.range_id: VectorToken(rs.epoch, lsn)}
