"""Default topology and limits of a regionlab account, in one place.

The CLI, the Dockerfile, docker-compose.yml and the README all agree with these values;
a test parses the Docker files and checks them against this module.
"""

# The well-known emulator key (public, documented by the service's own emulator).
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

ACCOUNT_ID = "regionlab"
HOST = "127.0.0.1"
REGIONS = ("East US", "East US 2", "West US")
GLOBAL_PORT = 8081            # the account ("global") endpoint, not itself a listed region
REGION_PORT_BASE = 8082       # region i listens on REGION_PORT_BASE + i
CONTROL_PORT = 8090           # admin API, metrics; faults never touch it
DIRECT_PORT_MIN = 10000       # direct TCP listeners are allocated from this range
DIRECT_PORT_MAX = 20000
# docker-compose.yml publishes this slice of the range (and pins the container to it): room for
# the default 3 regions x 4 nodes, plus a region added at runtime or a fifth node per region.
DIRECT_PORTS_PUBLISHED = 20
CONSISTENCY = "Session"

# Intra-region replication delay from primary to secondaries, per hop.
INTRA_REGION_DELAY_MS = 0

# One-way cross-region lag in ms for pairs not in the matrix.
CROSS_REGION_LAG_MS_DEFAULT = 40
