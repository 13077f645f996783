"""Spatial system functions over GeoJSON Point, LineString, Polygon and MultiPolygon values.

Theory of operation: positions are `[longitude, latitude]` in degrees on WGS-84, the service's
reference system. A value that is not valid GeoJSON of those types makes ST_DISTANCE,
ST_WITHIN and ST_INTERSECTS undefined; ST_ISVALID / ST_ISVALIDDETAILED say why, in the
service's words where known.

* ST_DISTANCE between two points is the geodesic distance in metres on the WGS-84 ellipsoid
  (Vincenty's inverse formula, iterated to 1e-12 rad, about 0.1 mm; for the nearly antipodal
  pairs where it does not converge, the great-circle distance on the mean-radius sphere). With a
  line or polygon it is 0 when the two intersect, else the least distance between a vertex of one
  and an edge of the other, an edge being the great-circle arc between its ends: the ellipsoidal
  distance to the edge's nearest point, found on the sphere (so within a few metres per hundred
  kilometres of the exact ellipsoidal foot).
  The service does not publish its algorithm; these agree with WGS-84 geodesic tools.
* ST_WITHIN / ST_INTERSECTS test containment and crossings in longitude/latitude coordinates
  (edges as straight lines in degrees, which for polygons of a few hundred kilometres differs
  from great-circle edges by metres only). A polygon's first ring is its outside, further rings
  are holes; a point on an edge is within (and intersects).

Pure functions. Comparing two shapes is vertices x edges work, so a pair of shapes with more than
SPATIAL_PAIRS_MAX of those pairs is refused (the query fails with a message) rather than holding
the event loop: one row's expressions are not interruptible (docs/limits.md).
"""
from __future__ import annotations

import math

from regionlab.emulator.core.limits import SPATIAL_PAIRS_MAX
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.values import NUMBER_TYPES, UNDEFINED

WGS84_A_M = 6_378_137.0                   # semi-major axis
WGS84_F = 1 / 298.257223563               # flattening
WGS84_B_M = WGS84_A_M * (1 - WGS84_F)
MEAN_RADIUS_M = 6_371_008.8               # (2a + b) / 3
VINCENTY_ITERATIONS_MAX = 200
SPATIAL_TYPES = ("Point", "LineString", "Polygon", "MultiPolygon")


# ---- validity ----------------------------------------------------------------------------------
def _position_fault(p) -> str | None:
    if type(p) is not list or len(p) < 2 or not all(type(c) in NUMBER_TYPES and math.isfinite(c) for c in p):
        return "A position must be an array of two or more numbers: [longitude, latitude]."
    if not -180 <= p[0] <= 180:
        return "Longitude values must be between -180 and 180 degrees."
    if not -90 <= p[1] <= 90:
        return "Latitude values must be between -90 and 90 degrees."
    return None


def _ring_fault(ring, number: int) -> str | None:
    if type(ring) is not list or len(ring) < 4:
        return (f"The Polygon input is not valid because the ring number {number} does not have enough "
                "points. Each ring of a polygon must contain at least four points.")
    for p in ring:
        fault = _position_fault(p)
        if fault:
            return fault
    if ring[0][:2] != ring[-1][:2]:
        return (f"The Polygon input is not valid because the start and end points of the ring number {number} "
                "are not the same. Each ring of a polygon must have the same start and end points.")
    return None


def _polygon_fault(rings) -> str | None:
    if type(rings) is not list or not rings:
        return "A Polygon's coordinates must be an array of one or more rings."
    for number, ring in enumerate(rings, 1):
        fault = _ring_fault(ring, number)
        if fault:
            return fault
    return None


def _fault(value) -> str | None:
    """None when value is valid GeoJSON of a supported type, else what is wrong with it."""
    if type(value) is not dict or value.get("type") not in SPATIAL_TYPES:
        return "The input is not a GeoJSON Point, LineString, Polygon or MultiPolygon."
    coords, kind = value.get("coordinates"), value["type"]
    if kind == "Point":
        return _position_fault(coords)
    if kind == "LineString":
        if type(coords) is not list or len(coords) < 2:
            return "A LineString must have two or more positions."
        return next((f for f in map(_position_fault, coords) if f), None)
    if kind == "Polygon":
        return _polygon_fault(coords)
    if type(coords) is not list or not coords:
        return "A MultiPolygon's coordinates must be an array of one or more polygons."
    return next((f for f in map(_polygon_fault, coords) if f), None)


def st_isvalid(value):
    return _fault(value) is None


def st_isvaliddetailed(value):
    fault = _fault(value)
    return {"valid": True, "reason": "Valid Geometry"} if fault is None else {"valid": False, "reason": fault}


# ---- shapes as points, edges and polygons --------------------------------------------------------
def _polygons(value) -> list:
    kind = value["type"]
    return [value["coordinates"]] if kind == "Polygon" else value["coordinates"] if kind == "MultiPolygon" else []


def _vertices(value) -> list:
    kind, coords = value["type"], value["coordinates"]
    if kind == "Point":
        return [coords]
    if kind == "LineString":
        return coords
    return [p for polygon in _polygons(value) for ring in polygon for p in ring]


def _edges(value) -> list:
    kind, coords = value["type"], value["coordinates"]
    if kind == "Point":
        return []
    if kind == "LineString":
        return list(zip(coords, coords[1:]))
    return [e for polygon in _polygons(value) for ring in polygon for e in zip(ring, ring[1:])]


def _in_ring(p, ring) -> int:
    """1 inside, 0 on the boundary, -1 outside (ray casting in degrees)."""
    x, y = p[0], p[1]
    inside = False
    for a, b in zip(ring, ring[1:]):
        if _on_segment(p, a, b):
            return 0
        if (a[1] > y) != (b[1] > y) and x < (b[0] - a[0]) * (y - a[1]) / (b[1] - a[1]) + a[0]:
            inside = not inside
    return 1 if inside else -1


def _in_polygons(p, value) -> bool:
    for polygon in _polygons(value):
        where = _in_ring(p, polygon[0])
        if where == 0:
            return True
        if where == 1 and all(_in_ring(p, hole) == -1 for hole in polygon[1:]):
            return True
    return False


def _cross(o, a, b) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _on_segment(p, a, b) -> bool:
    return (abs(_cross(a, b, p)) <= 1e-12 and min(a[0], b[0]) <= p[0] <= max(a[0], b[0])
            and min(a[1], b[1]) <= p[1] <= max(a[1], b[1]))


def _segments_cross(a, b, c, d) -> bool:
    d1, d2, d3, d4 = _cross(c, d, a), _cross(c, d, b), _cross(a, b, c), _cross(a, b, d)
    if ((d1 > 0) != (d2 > 0)) and ((d3 > 0) != (d4 > 0)) and d1 and d2 and d3 and d4:
        return True
    return _on_segment(a, c, d) or _on_segment(b, c, d) or _on_segment(c, a, b) or _on_segment(d, a, b)


def _bounded(a, b) -> None:
    pairs = len(_vertices(a)) * len(_edges(b)) + len(_vertices(b)) * len(_edges(a))
    if pairs > SPATIAL_PAIRS_MAX:
        raise QueryError(f"a spatial function compared two shapes of {pairs} vertex-edge pairs; at most "
                         f"{SPATIAL_PAIRS_MAX} are compared in one call (simplify the shapes)", 0)


def _intersects(a, b) -> bool:
    _bounded(a, b)
    if a["type"] == "Point" and b["type"] == "Point":
        return a["coordinates"][:2] == b["coordinates"][:2]
    if any(_in_polygons(p, b) for p in _vertices(a)) or any(_in_polygons(p, a) for p in _vertices(b)):
        return True
    edges_b = _edges(b)
    if a["type"] == "Point":
        return any(_on_segment(a["coordinates"], *e) for e in edges_b)
    if b["type"] == "Point":
        return any(_on_segment(b["coordinates"], *e) for e in _edges(a))
    return any(_segments_cross(*e, *f) for e in _edges(a) for f in edges_b)


def _within(a, b) -> bool:
    _bounded(a, b)
    if b["type"] == "Point":
        return a["type"] == "Point" and a["coordinates"][:2] == b["coordinates"][:2]
    if b["type"] == "LineString":
        return a["type"] == "Point" and any(_on_segment(a["coordinates"], *e) for e in _edges(b))
    return all(_in_polygons(p, b) for p in _vertices(a))


def st_within(a, b):
    if _fault(a) is not None or _fault(b) is not None:
        return UNDEFINED
    return _within(a, b)


def st_intersects(a, b):
    if _fault(a) is not None or _fault(b) is not None:
        return UNDEFINED
    return _intersects(a, b)


# ---- distance ----------------------------------------------------------------------------------
def geodesic_m(p, q) -> float:
    """Metres between two [lon, lat] positions on the WGS-84 ellipsoid (Vincenty's inverse)."""
    lon1, lat1, lon2, lat2 = map(math.radians, (p[0], p[1], q[0], q[1]))
    if lon1 == lon2 and lat1 == lat2:
        return 0.0
    f = WGS84_F
    u1, u2 = math.atan((1 - f) * math.tan(lat1)), math.atan((1 - f) * math.tan(lat2))
    sin_u1, cos_u1, sin_u2, cos_u2 = math.sin(u1), math.cos(u1), math.sin(u2), math.cos(u2)
    ell = lon2 - lon1
    lam = ell
    for _ in range(VINCENTY_ITERATIONS_MAX):
        sin_lam, cos_lam = math.sin(lam), math.cos(lam)
        sin_sigma = math.hypot(cos_u2 * sin_lam, cos_u1 * sin_u2 - sin_u1 * cos_u2 * cos_lam)
        if sin_sigma == 0:
            return 0.0
        cos_sigma = sin_u1 * sin_u2 + cos_u1 * cos_u2 * cos_lam
        sigma = math.atan2(sin_sigma, cos_sigma)
        sin_alpha = cos_u1 * cos_u2 * sin_lam / sin_sigma
        cos2_alpha = 1 - sin_alpha ** 2
        cos_2sm = cos_sigma - 2 * sin_u1 * sin_u2 / cos2_alpha if cos2_alpha else 0.0
        c = f / 16 * cos2_alpha * (4 + f * (4 - 3 * cos2_alpha))
        previous = lam
        lam = ell + (1 - c) * f * sin_alpha * (sigma + c * sin_sigma * (cos_2sm + c * cos_sigma * (-1 + 2 * cos_2sm ** 2)))
        if abs(lam - previous) < 1e-12:
            break
    else:
        return _arc_rad(p, q) * MEAN_RADIUS_M                 # nearly antipodal: no convergence
    u_sq = cos2_alpha * (WGS84_A_M ** 2 - WGS84_B_M ** 2) / WGS84_B_M ** 2
    big_a = 1 + u_sq / 16384 * (4096 + u_sq * (-768 + u_sq * (320 - 175 * u_sq)))
    big_b = u_sq / 1024 * (256 + u_sq * (-128 + u_sq * (74 - 47 * u_sq)))
    delta = big_b * sin_sigma * (cos_2sm + big_b / 4 * (cos_sigma * (-1 + 2 * cos_2sm ** 2) - big_b / 6 * cos_2sm
                                                        * (-3 + 4 * sin_sigma ** 2) * (-3 + 4 * cos_2sm ** 2)))
    return WGS84_B_M * big_a * (sigma - delta)


def _arc_rad(p, q) -> float:
    lon1, lat1, lon2, lat2 = map(math.radians, (p[0], p[1], q[0], q[1]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * math.asin(min(1.0, math.sqrt(h)))


def _bearing(p, q) -> float:
    lon1, lat1, lon2, lat2 = map(math.radians, (p[0], p[1], q[0], q[1]))
    y = math.sin(lon2 - lon1) * math.cos(lat2)
    x = math.cos(lat1) * math.sin(lat2) - math.sin(lat1) * math.cos(lat2) * math.cos(lon2 - lon1)
    return math.atan2(y, x)


def _to_edge_m(p, a, b) -> float:
    """Metres from p to the great-circle arc a-b: cross-track distance when p's foot falls on the
    arc, else the nearer end."""
    ends = min(geodesic_m(p, a), geodesic_m(p, b))
    arc_ab, arc_ap = _arc_rad(a, b), _arc_rad(a, p)
    if arc_ab == 0:
        return ends
    turn = (_bearing(a, p) - _bearing(a, b) + math.pi) % (2 * math.pi) - math.pi
    if abs(turn) > math.pi / 2:
        return ends                                   # the foot falls behind a
    cross = math.asin(max(-1.0, min(1.0, math.sin(arc_ap) * math.sin(turn))))
    along = math.acos(max(-1.0, min(1.0, math.cos(arc_ap) / max(math.cos(cross), 1e-300))))
    if along > arc_ab:
        return ends
    return min(ends, geodesic_m(p, _destination(a, _bearing(a, b), along)))


def _destination(p, bearing: float, arc: float) -> list:
    """The position `arc` radians from p along the great circle leaving it at `bearing`."""
    lon1, lat1 = math.radians(p[0]), math.radians(p[1])
    lat2 = math.asin(math.sin(lat1) * math.cos(arc) + math.cos(lat1) * math.sin(arc) * math.cos(bearing))
    lon2 = lon1 + math.atan2(math.sin(bearing) * math.sin(arc) * math.cos(lat1),
                             math.cos(arc) - math.sin(lat1) * math.sin(lat2))
    return [(math.degrees(lon2) + 540) % 360 - 180, math.degrees(lat2)]


def st_distance(a, b):
    if _fault(a) is not None or _fault(b) is not None:
        return UNDEFINED
    if a["type"] == "Point" and b["type"] == "Point":
        return geodesic_m(a["coordinates"], b["coordinates"])
    if _intersects(a, b):
        return 0
    best = math.inf
    for one, other in ((a, b), (b, a)):
        for p in _vertices(one):
            for edge in _edges(other):
                best = min(best, _to_edge_m(p, *edge))
    return best


TABLE = {
    "ST_DISTANCE": (st_distance, 2, 2),
    "ST_WITHIN": (st_within, 2, 2),
    "ST_INTERSECTS": (st_intersects, 2, 2),
    "ST_ISVALID": (st_isvalid, 1, 1),
    "ST_ISVALIDDETAILED": (st_isvaliddetailed, 1, 1),
}
