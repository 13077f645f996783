"""Spatial functions (core/query/spatial_functions.py): point distances are WGS-84 geodesics
(checked against geopy's Karney geodesic to 0.1 mm), containment and crossings follow GeoJSON
rings and holes, invalid GeoJSON makes the functions undefined and ST_ISVALIDDETAILED says why in
the service's words, and a pair of shapes too large to compare at once fails the query."""
import pytest

from regionlab.emulator.core.query import compile_query
from regionlab.emulator.core.query.errors import QueryError
from regionlab.emulator.core.query.spatial_functions import SPATIAL_PAIRS_MAX, geodesic_m
from regionlab.emulator.core.query.values import UNDEFINED

SQUARE = {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}
HOLED = {"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]],
                                            [[1, 1], [3, 1], [3, 3], [1, 3], [1, 1]]]}


def point(lon, lat):
    return {"type": "Point", "coordinates": [lon, lat]}


def value(sql: str, **params):
    q = compile_query(sql, [{"name": f"@{k}", "value": v} for k, v in params.items()])
    got = q.execute([{}], 0)
    return got[0] if got else UNDEFINED


@pytest.mark.parametrize("p,q,metres", [
    ([-119.02138, 35.22229], [-121.0777, 38.148205], 373073.02837),     # geopy.distance.geodesic
    ([0, 0], [1, 0], 111319.49079),                                     # one degree of the equator
    ([0, 0], [0, 1], 110574.38886),                                     # one degree of meridian
])
def test_point_distances_are_wgs84_geodesics(p, q, metres):
    assert geodesic_m(p, q) == pytest.approx(metres, abs=1e-3)
    assert value("SELECT VALUE ST_DISTANCE(@a, @b) FROM c", a=point(*p), b=point(*q)) == pytest.approx(metres, abs=1e-3)


def test_distance_to_a_shape_is_zero_inside_and_to_the_nearest_edge_outside():
    assert value("SELECT VALUE ST_DISTANCE(@a, @b) FROM c", a=point(0.5, 0.5), b=SQUARE) == 0
    outside = value("SELECT VALUE ST_DISTANCE(@a, @b) FROM c", a=point(2, 0.5), b=SQUARE)
    assert outside == pytest.approx(geodesic_m([2, 0.5], [1, 0.5]), rel=1e-6)


def test_within_and_intersects_follow_rings_and_holes():
    assert value("SELECT VALUE ST_WITHIN(@a, @b) FROM c", a=point(0.5, 0.5), b=SQUARE) is True
    assert value("SELECT VALUE ST_WITHIN(@a, @b) FROM c", a=point(2, 2), b=HOLED) is False      # in the hole
    assert value("SELECT VALUE ST_WITHIN(@a, @b) FROM c", a=point(0.5, 2), b=HOLED) is True
    line = {"type": "LineString", "coordinates": [[-1, 0.5], [2, 0.5]]}
    assert value("SELECT VALUE ST_INTERSECTS(@a, @b) FROM c", a=line, b=SQUARE) is True
    assert value("SELECT VALUE ST_WITHIN(@a, @b) FROM c", a=line, b=SQUARE) is False
    far = {"type": "LineString", "coordinates": [[5, 5], [6, 6]]}
    assert value("SELECT VALUE ST_INTERSECTS(@a, @b) FROM c", a=far, b=SQUARE) is False


def test_invalid_geojson_is_undefined_and_explained():
    open_ring = {"type": "Polygon", "coordinates": [[[31.8, -5], [31.8, -4.7], [32, -4.7], [32, -5]]]}
    assert value("SELECT VALUE ST_DISTANCE(@a, @b) FROM c", a=open_ring, b=point(0, 0)) is UNDEFINED
    assert value("SELECT VALUE ST_ISVALID(@a) FROM c", a=point(31.9, -132.8)) is False
    assert value("SELECT VALUE ST_ISVALIDDETAILED(@a) FROM c", a=open_ring) == {
        "valid": False, "reason": "The Polygon input is not valid because the start and end points of the ring "
                                  "number 1 are not the same. Each ring of a polygon must have the same start and end points."}
    assert value("SELECT VALUE ST_ISVALIDDETAILED(@a) FROM c", a=SQUARE) == {"valid": True, "reason": "Valid Geometry"}


def test_shapes_too_large_to_compare_fail_the_query():
    n = SPATIAL_PAIRS_MAX // 2
    line = {"type": "LineString", "coordinates": [[i * 1e-4, 0] for i in range(n)]}
    other = {"type": "LineString", "coordinates": [[0, 1], [1, 1], [2, 1]]}
    with pytest.raises(QueryError, match="vertex-edge pairs"):
        value("SELECT VALUE ST_DISTANCE(@a, @b) FROM c", a=line, b=other)
