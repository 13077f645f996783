"""Where regions are, for the replication lag a link gets when the configuration names none."""

# One-way lag defaults by geography: same metro area, same continent, across continents.
LAG_SAME_AREA_MS = 2
LAG_SAME_CONTINENT_MS = 30
LAG_CROSS_CONTINENT_MS = 80
REGION_AREAS = {
    "east us": ("na", "east"), "east us 2": ("na", "east"), "central us": ("na", "central"),
    "north central us": ("na", "central"), "south central us": ("na", "central"),
    "west us": ("na", "west"), "west us 2": ("na", "west"), "west us 3": ("na", "west"),
    "canada central": ("na", "east"), "brazil south": ("sa", "south"),
    "north europe": ("eu", "north"), "west europe": ("eu", "west"), "uk south": ("eu", "west"),
    "france central": ("eu", "west"), "germany west central": ("eu", "central"),
    "southeast asia": ("asia", "se"), "east asia": ("asia", "east"), "japan east": ("asia", "jp"),
    "australia east": ("oc", "east"), "central india": ("asia", "in"),
}


def default_lag_ms(a: str, b: str) -> int:
    area_a, area_b = REGION_AREAS.get(a.lower()), REGION_AREAS.get(b.lower())
    if area_a is None or area_b is None:
        return LAG_SAME_CONTINENT_MS
    if area_a == area_b:
        return LAG_SAME_AREA_MS
    if area_a[0] == area_b[0]:
        return LAG_SAME_CONTINENT_MS
    return LAG_CROSS_CONTINENT_MS
