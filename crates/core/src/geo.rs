//! Geo indexes: GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH,
//! GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms.
//!
//! As in Redis, a geo index is an ordinary sorted set whose scores are
//! 52-bit interleaved geohashes (26 bits of longitude, 26 of latitude over
//! Redis's ranges -180..180 and -85.05112878..85.05112878), so ZRANGE and
//! ZSCORE show the same scores Redis shows. The geohash arithmetic, the
//! 9-cell neighbour search with its step estimation, the haversine with
//! Redis's earth radius and the result ordering (a stable sort, or Redis's
//! partial quicksort under COUNT) are ports of Redis 7.0's `geohash.c`,
//! `geohash_helper.c`, `geo.c` and `pqsort.c`, so the same members come
//! back in the same order with the same printed values.

use crate::args::{eq_ic, parse_f64, parse_i64};
use crate::error::{CmdError, CmdResult};
use crate::keyspace::{Keyspace, ZSetOps};
use crate::store::{Ctx, Store};
use crate::table::{cmd, CommandSpec, Flags};
use crate::zset::{read_zset, store_result, Build};
use bytes::Bytes;
use kvasir_resp::Reply;

const G: &str = "geo";
const KEY: (i32, i32, i32) = (1, 1, 1);
const R: Flags = Flags::READONLY;
const W_OOM: Flags = Flags::WRITE.union(Flags::DENYOOM);
const W_OOM_MOV: Flags = W_OOM.union(Flags::MOVABLEKEYS);
const ACL_R: &[&str] = &["read", "geo", "slow"];
const ACL_W: &[&str] = &["write", "geo", "slow"];

#[rustfmt::skip]
pub const COMMANDS: &[CommandSpec] = &[
    cmd("geoadd", -5, W_OOM, KEY, ACL_W, G, "3.2.0", "Adds one or more members to a geospatial index. The key is created if it doesn't exist.", crate::write_handler!(geoadd)).events(crate::notify::Events::Named("zadd")).with_key_specs(&[crate::table::ks::RW_UPDATE]).keys_access(crate::table::KeyAccess::Write),
    cmd("geodist", -4, R, KEY, ACL_R, G, "3.2.0", "Returns the distance between two members of a geospatial index.", crate::read_handler!(geodist)),
    cmd("geohash", -2, R, KEY, ACL_R, G, "3.2.0", "Returns members from a geospatial index as geohash strings.", crate::read_handler!(geohash)),
    cmd("geopos", -2, R, KEY, ACL_R, G, "3.2.0", "Returns the longitude and latitude of members from a geospatial index.", crate::read_handler!(geopos)),
    // The STORE/STOREDIST destination is a key too: movable keys.
    CommandSpec { key_finder: Some(georadius_keys), ..cmd("georadius", -6, W_OOM_MOV, KEY, ACL_W, G, "3.2.0", "Queries a geospatial index for members within a distance from a coordinate, optionally stores the result.", crate::write_handler!(georadius)) }.events(crate::notify::Events::Custom(crate::notify::georadiusstore)).keys_access(crate::table::KeyAccess::ReadThenWrite),
    CommandSpec { key_finder: Some(georadius_keys), ..cmd("georadiusbymember", -5, W_OOM_MOV, KEY, ACL_W, G, "3.2.0", "Queries a geospatial index for members within a distance from a member, optionally stores the result.", crate::write_handler!(georadiusbymember)) }.events(crate::notify::Events::Custom(crate::notify::georadiusstore)).keys_access(crate::table::KeyAccess::ReadThenWrite),
    cmd("georadiusbymember_ro", -5, R, KEY, ACL_R, G, "3.2.10", "Returns members from a geospatial index that are within a distance from a member.", crate::read_handler!(georadiusbymember_ro)),
    cmd("georadius_ro", -6, R, KEY, ACL_R, G, "3.2.10", "Returns members from a geospatial index that are within a distance from a coordinate.", crate::read_handler!(georadius_ro)),
    cmd("geosearch", -7, R, KEY, ACL_R, G, "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle.", crate::read_handler!(geosearch)),
    // Destination, then source.
    cmd("geosearchstore", -8, W_OOM, (1, 2, 1), ACL_W, G, "6.2.0", "Queries a geospatial index for members inside an area of a box or a circle, optionally stores the result.", crate::write_handler!(geosearchstore)).events(crate::notify::Events::Dest("geosearchstore")).keys_access(crate::table::KeyAccess::WriteThenRead),
];

/// Key finder for GEORADIUS and GEORADIUSBYMEMBER (Redis's
/// georadiusGetKeys): the source key, plus the key after the last
/// STORE/STOREDIST option.
fn georadius_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut stored = None;
    let mut i = 5;
    while i < args.len() {
        if (eq_ic(&args[i], "store") || eq_ic(&args[i], "storedist")) && i + 1 < args.len() {
            stored = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(stored);
    keys
}

// ---------------------------------------------------------------------------
// Geohash (geohash.c)
// ---------------------------------------------------------------------------

const GEO_STEP_MAX: u8 = 26;
const GEO_LAT_MIN: f64 = -85.05112878;
const GEO_LAT_MAX: f64 = 85.05112878;
const GEO_LONG_MIN: f64 = -180.0;
const GEO_LONG_MAX: f64 = 180.0;
const D_R: f64 = std::f64::consts::PI / 180.0;
/// Earth's quadratic mean radius for WGS-84, as Redis uses it.
const EARTH_RADIUS_IN_METERS: f64 = 6372797.560856;
const MERCATOR_MAX: f64 = 20037726.37;

/// A geohash of `step` bits per coordinate (`bits` holds 2 * step bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct HashBits {
    bits: u64,
    step: u8,
}

impl HashBits {
    /// Redis's HASHISZERO: a cell removed from the search.
    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Range {
    min: f64,
    max: f64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Area {
    lon: Range,
    lat: Range,
}

/// Redis's coordinate ranges for its geohashes (geohashGetCoordRange).
const LONG_RANGE: Range = Range {
    min: GEO_LONG_MIN,
    max: GEO_LONG_MAX,
};
const LAT_RANGE: Range = Range {
    min: GEO_LAT_MIN,
    max: GEO_LAT_MAX,
};

/// Interleaves the low 32 bits of `x` (even bits) and `y` (odd bits).
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// Reverses interleave64: even bits in the low half, odd bits in the high.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// geohashEncode: None when the point is outside the ranges.
fn encode(lon_r: Range, lat_r: Range, lon: f64, lat: f64, step: u8) -> Option<HashBits> {
    if step > 32 || step == 0 {
        return None;
    }
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&lon) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&lat)
    {
        return None;
    }
    if lat < lat_r.min || lat > lat_r.max || lon < lon_r.min || lon > lon_r.max {
        return None;
    }
    let mut lat_offset = (lat - lat_r.min) / (lat_r.max - lat_r.min);
    let mut lon_offset = (lon - lon_r.min) / (lon_r.max - lon_r.min);
    let scale = (1u64 << step) as f64;
    lat_offset *= scale;
    lon_offset *= scale;
    Some(HashBits {
        bits: interleave64(lat_offset as u32, lon_offset as u32),
        step,
    })
}

/// geohashDecode: the cell a hash stands for.
fn decode(lon_r: Range, lat_r: Range, hash: HashBits) -> Option<Area> {
    if hash.is_zero() {
        return None;
    }
    let sep = deinterleave64(hash.bits);
    let lat_scale = lat_r.max - lat_r.min;
    let lon_scale = lon_r.max - lon_r.min;
    let ilato = sep as u32;
    let ilono = (sep >> 32) as u32;
    let div = (1u64 << hash.step) as f64;
    Some(Area {
        lat: Range {
            min: lat_r.min + (f64::from(ilato) * 1.0 / div) * lat_scale,
            max: lat_r.min + (f64::from(ilato.wrapping_add(1)) * 1.0 / div) * lat_scale,
        },
        lon: Range {
            min: lon_r.min + (f64::from(ilono) * 1.0 / div) * lon_scale,
            max: lon_r.min + (f64::from(ilono.wrapping_add(1)) * 1.0 / div) * lon_scale,
        },
    })
}

/// geohashDecodeAreaToLongLat: the centre of a cell, clamped to the ranges.
fn area_center(area: &Area) -> [f64; 2] {
    let lon = ((area.lon.min + area.lon.max) / 2.0).clamp(GEO_LONG_MIN, GEO_LONG_MAX);
    let lat = ((area.lat.min + area.lat.max) / 2.0).clamp(GEO_LAT_MIN, GEO_LAT_MAX);
    [lon, lat]
}

/// C's `(uint64_t)d` as x86-64 compilers emit it, for scores that are not
/// geohashes (any ZADD score can be read by the geo commands).
fn c_double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9223372036854775808.0;
    if d >= TWO63 {
        let t = d - TWO63;
        let i = if t < TWO63 { t as i64 } else { i64::MIN };
        (i as u64) ^ (1 << 63)
    } else {
        // Below -2^63 (and for NaN) cvttsd2si gives 0x8000000000000000.
        if d.is_nan() {
            return 1 << 63;
        }
        (d as i64) as u64
    }
}

/// decodeGeohash: the longitude and latitude stored in a score.
fn decode_score(score: f64) -> Option<[f64; 2]> {
    let hash = HashBits {
        bits: c_double_to_u64(score),
        step: GEO_STEP_MAX,
    };
    decode(LONG_RANGE, LAT_RANGE, hash).map(|a| area_center(&a))
}

/// The score GEOADD stores for a point (geohashEncodeWGS84, 52 bits).
fn encode_score(lon: f64, lat: f64) -> Option<u64> {
    encode(LONG_RANGE, LAT_RANGE, lon, lat, GEO_STEP_MAX).map(align52)
}

/// geohashAlign52Bits.
fn align52(hash: HashBits) -> u64 {
    hash.bits << (52 - u32::from(hash.step) * 2)
}

fn move_x(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let mut x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let y = hash.bits & 0x5555555555555555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0x5555555555555555u64 >> shift;
    if d > 0 {
        x = x.wrapping_add(zz + 1);
    } else {
        x |= zz;
        x = x.wrapping_sub(zz + 1);
    }
    x &= 0xaaaaaaaaaaaaaaaau64 >> shift;
    hash.bits = x | y;
}

fn move_y(hash: &mut HashBits, d: i8) {
    if d == 0 {
        return;
    }
    let x = hash.bits & 0xaaaaaaaaaaaaaaaa;
    let mut y = hash.bits & 0x5555555555555555;
    let shift = 64 - u32::from(hash.step) * 2;
    let zz = 0xaaaaaaaaaaaaaaaau64 >> shift;
    if d > 0 {
        y = y.wrapping_add(zz + 1);
    } else {
        y |= zz;
        y = y.wrapping_sub(zz + 1);
    }
    y &= 0x5555555555555555u64 >> shift;
    hash.bits = x | y;
}

/// The cell and its eight neighbours in Redis's search order: self, north,
/// south, east, west, north-east, north-west, south-east, south-west.
fn cell_and_neighbors(hash: HashBits) -> [HashBits; 9] {
    let moved = |dx: i8, dy: i8| {
        let mut h = hash;
        move_x(&mut h, dx);
        move_y(&mut h, dy);
        h
    };
    [
        hash,
        moved(0, 1),
        moved(0, -1),
        moved(1, 0),
        moved(-1, 0),
        moved(1, 1),
        moved(-1, 1),
        moved(1, -1),
        moved(-1, -1),
    ]
}

const NORTH: usize = 1;
const SOUTH: usize = 2;
const EAST: usize = 3;
const WEST: usize = 4;
const NORTH_EAST: usize = 5;
const NORTH_WEST: usize = 6;
const SOUTH_EAST: usize = 7;
const SOUTH_WEST: usize = 8;

// ---------------------------------------------------------------------------
// Search areas and distances (geohash_helper.c)
// ---------------------------------------------------------------------------

fn deg_rad(ang: f64) -> f64 {
    ang * D_R
}

fn rad_deg(ang: f64) -> f64 {
    ang / D_R
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ShapeKind {
    /// Radius in the request's unit.
    Circle(f64),
    /// Width and height in the request's unit.
    Rect(f64, f64),
}

#[derive(Debug, Clone, Copy)]
struct Shape {
    /// Centre: longitude, latitude.
    xy: [f64; 2],
    /// Metres per unit.
    conversion: f64,
    kind: ShapeKind,
}

/// geohashEstimateStepsByRadius.
fn estimate_steps_by_radius(mut range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// geohashBoundingBox: min lon, min lat, max lon, max lat.
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let [longitude, latitude] = shape.xy;
    let (h, w) = match shape.kind {
        ShapeKind::Circle(r) => (r, r),
        ShapeKind::Rect(width, height) => (height / 2.0, width / 2.0),
    };
    let height = shape.conversion * h;
    let width = shape.conversion * w;
    let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
    let long_delta_top =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
    let southern = latitude < 0.0;
    let delta = if southern {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        longitude - delta,
        latitude - lat_delta,
        longitude + delta,
        latitude + lat_delta,
    ]
}

/// geohashCalculateAreasByShapeWGS84: the nine cells to scan, zeroed where
/// useless.
fn search_cells(shape: &Shape) -> [HashBits; 9] {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let [longitude, latitude] = shape.xy;
    let radius_meters = match shape.kind {
        ShapeKind::Circle(r) => r,
        ShapeKind::Rect(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    } * shape.conversion;
    let mut steps = estimate_steps_by_radius(radius_meters, latitude);
    let cells_at = |steps: u8| -> ([HashBits; 9], Area) {
        let hash = encode(LONG_RANGE, LAT_RANGE, longitude, latitude, steps).unwrap_or_default();
        let cells = cell_and_neighbors(hash);
        let area = decode(LONG_RANGE, LAT_RANGE, hash).unwrap_or_default();
        (cells, area)
    };
    let (mut cells, mut area) = cells_at(steps);
    let area_of = |h: HashBits| decode(LONG_RANGE, LAT_RANGE, h).unwrap_or_default();
    let decrease = area_of(cells[NORTH]).lat.max < max_lat
        || area_of(cells[SOUTH]).lat.min > min_lat
        || area_of(cells[EAST]).lon.max < max_lon
        || area_of(cells[WEST]).lon.min > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (cells, area) = cells_at(steps);
    }
    if steps >= 2 {
        let zero = HashBits::default();
        if area.lat.min < min_lat {
            for i in [SOUTH, SOUTH_WEST, SOUTH_EAST] {
                cells[i] = zero;
            }
        }
        if area.lat.max > max_lat {
            for i in [NORTH, NORTH_EAST, NORTH_WEST] {
                cells[i] = zero;
            }
        }
        if area.lon.min < min_lon {
            for i in [WEST, SOUTH_WEST, NORTH_WEST] {
                cells[i] = zero;
            }
        }
        if area.lon.max > max_lon {
            for i in [EAST, SOUTH_EAST, NORTH_EAST] {
                cells[i] = zero;
            }
        }
    }
    cells
}

/// geohashGetLatDistance.
fn lat_distance(lat1d: f64, lat2d: f64) -> f64 {
    EARTH_RADIUS_IN_METERS * (deg_rad(lat2d) - deg_rad(lat1d)).abs()
}

/// geohashGetDistance: haversine great-circle distance in metres.
fn distance(lon1d: f64, lat1d: f64, lon2d: f64, lat2d: f64) -> f64 {
    let lon1r = deg_rad(lon1d);
    let lon2r = deg_rad(lon2d);
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1d, lat2d);
    }
    let lat1r = deg_rad(lat1d);
    let lat2r = deg_rad(lat2d);
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// geoWithinShape: the decoded point and its distance from the centre (in
/// metres) when the score's point is inside the shape.
fn within_shape(shape: &Shape, score: f64) -> Option<([f64; 2], f64)> {
    let xy = decode_score(score)?;
    let [x1, y1] = shape.xy;
    let [x2, y2] = xy;
    match shape.kind {
        ShapeKind::Circle(r) => {
            let d = distance(x1, y1, x2, y2);
            (d <= r * shape.conversion).then_some((xy, d))
        }
        ShapeKind::Rect(w, h) => {
            let (width_m, height_m) = (w * shape.conversion, h * shape.conversion);
            if lat_distance(y2, y1) > height_m / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width_m / 2.0 {
                return None;
            }
            Some((xy, distance(x1, y1, x2, y2)))
        }
    }
}

// ---------------------------------------------------------------------------
// Collecting and ordering points (geo.c, pqsort.c)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct GeoPoint {
    lon: f64,
    lat: f64,
    /// Metres until the reply converts it to the unit.
    dist: f64,
    score: f64,
    member: Vec<u8>,
}

/// membersOfAllNeighbors: scans the cells' score ranges in order; with a
/// `limit` (COUNT ANY) stops once that many points are found.
/// Sets up to this size are searched from one decoded copy.
const SMALL_SET: usize = 256;

fn points_in_shape(z: &impl ZSetOps, shape: &Shape, limit: usize) -> Vec<GeoPoint> {
    let cells = search_cells(shape);
    let mut out = Vec::new();
    // A small set (a listpack: no random access) is decoded once, and each
    // cell's first entry is then found by binary search, instead of a walk
    // from the start for each of the nine cells.
    let small: Option<Vec<(&[u8], f64)>> =
        (z.len() <= SMALL_SET).then(|| z.iter_from(0, false).collect());
    let mut last_processed = 0;
    for i in 0..cells.len() {
        let cell = cells[i];
        if cell.is_zero() {
            continue;
        }
        if last_processed != 0 && cell == cells[last_processed] {
            continue;
        }
        if !out.is_empty() && limit > 0 && out.len() >= limit {
            break;
        }
        let min = align52(cell) as f64;
        let max = align52(HashBits {
            bits: cell.bits.wrapping_add(1),
            step: cell.step,
        }) as f64;
        // Adds the points of the cell from `entries`; false once the
        // limit is reached.
        let mut take = |entries: &mut dyn Iterator<Item = (&[u8], f64)>| -> bool {
            for (member, score) in entries {
                if score >= max {
                    break;
                }
                if let Some((xy, dist)) = within_shape(shape, score) {
                    out.push(GeoPoint {
                        lon: xy[0],
                        lat: xy[1],
                        dist,
                        score,
                        member: member.to_vec(),
                    });
                    if limit > 0 && out.len() >= limit {
                        return false;
                    }
                }
            }
            true
        };
        let go_on = match &small {
            Some(all) => {
                let start = all.partition_point(|&(_, s)| s < min);
                take(&mut all[start..].iter().copied())
            }
            None => take(&mut z.iter_from(z.count_scores_where(|s| s < min), false)),
        };
        if !go_on {
            break;
        }
        last_processed = i;
    }
    out
}

/// sort_gp_asc / sort_gp_desc as C comparators.
fn compare(a: &GeoPoint, b: &GeoPoint, desc: bool) -> i32 {
    let c = if a.dist > b.dist {
        1
    } else if a.dist == b.dist {
        0
    } else {
        -1
    };
    if desc {
        -c
    } else {
        c
    }
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> i32) -> usize {
    if cmp(&v[a], &v[b]) < 0 {
        if cmp(&v[b], &v[c]) < 0 {
            b
        } else if cmp(&v[a], &v[c]) < 0 {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) > 0 {
        b
    } else if cmp(&v[a], &v[c]) < 0 {
        a
    } else {
        c
    }
}

fn insertion_sort<T>(v: &mut [T], a: usize, n: usize, cmp: &impl Fn(&T, &T) -> i32) {
    for pm in a + 1..a + n {
        let mut pl = pm;
        while pl > a && cmp(&v[pl - 1], &v[pl]) > 0 {
            v.swap(pl, pl - 1);
            pl -= 1;
        }
    }
}

fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Redis's pqsort (NetBSD's qsort, sorting only what the element range
/// `lrange..=rrange` needs), with element indexes for pointers; as in
/// Redis 7.0, without the switch to insertion sort after a partition that
/// swapped nothing. Not stable: equal distances come out in this
/// algorithm's order, as in Redis.
pub(crate) fn pqsort<T>(v: &mut [T], cmp: &impl Fn(&T, &T) -> i32, lrange: usize, rrange: usize) {
    pqsort_part(v, 0, v.len(), cmp, lrange, rrange);
}

fn pqsort_part<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> i32,
    lrange: usize,
    rrange: usize,
) {
    // Whether the sub-array a..a+n lies entirely outside the wanted range.
    let outside = |a: usize, n: usize| {
        let last = a + n - 1;
        (lrange < a && rrange < a) || (lrange > last && rrange > last)
    };
    loop {
        if n < 7 {
            insertion_sort(v, a, n, cmp);
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let r = cmp(&v[pb], &v[a]);
                if r > 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let r = cmp(&v[pc], &v[a]);
                if r < 0 {
                    break;
                }
                if r == 0 {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && !outside(a, r) {
            pqsort_part(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if !outside(a, n) {
                continue;
            }
        }
        return;
    }
}

// ---------------------------------------------------------------------------
// Argument helpers and replies
// ---------------------------------------------------------------------------

/// A float argument as Redis's getDoubleFromObject: also refuses values
/// strtod reports as out of range (`1e400`, `1e-400`).
fn parse_double(b: &[u8]) -> Result<f64, CmdError> {
    let v = parse_f64(b)?;
    let text = std::str::from_utf8(b).map_err(|_| CmdError::NotFloat)?;
    let mantissa = text.split(['e', 'E']).next().unwrap_or("");
    let literal_inf = text.to_ascii_lowercase().contains("inf");
    let overflow = v.is_infinite() && !literal_inf;
    let underflow = v == 0.0 && mantissa.bytes().any(|c| (b'1'..=b'9').contains(&c));
    if overflow || underflow {
        return Err(CmdError::NotFloat);
    }
    Ok(v)
}

/// As parse_double, with the custom message Redis gives some arguments.
fn parse_double_msg(b: &[u8], msg: &'static str) -> Result<f64, CmdError> {
    parse_double(b).map_err(|_| CmdError::other(msg))
}

/// extractLongLatOrReply.
fn parse_lon_lat(lon: &[u8], lat: &[u8]) -> Result<[f64; 2], CmdError> {
    let (x, y) = (parse_double(lon)?, parse_double(lat)?);
    if !(GEO_LONG_MIN..=GEO_LONG_MAX).contains(&x) || !(GEO_LAT_MIN..=GEO_LAT_MAX).contains(&y) {
        return Err(CmdError::other(format!(
            "ERR invalid longitude,latitude pair {},{}",
            c_fixed(x, 6),
            c_fixed(y, 6)
        )));
    }
    Ok([x, y])
}

/// C's `%.<prec>f`.
fn c_fixed(v: f64, prec: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    format!("{v:.prec$}")
}

/// extractUnitOrReply: metres per unit.
fn parse_unit(u: &[u8]) -> Result<f64, CmdError> {
    if eq_ic(u, "m") {
        Ok(1.0)
    } else if eq_ic(u, "km") {
        Ok(1000.0)
    } else if eq_ic(u, "ft") {
        Ok(0.3048)
    } else if eq_ic(u, "mi") {
        Ok(1609.34)
    } else {
        Err(CmdError::other(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

/// extractDistanceOrReply: (radius in the unit, metres per unit).
fn parse_radius(r: &[u8], unit: &[u8]) -> Result<(f64, f64), CmdError> {
    let d = parse_double_msg(r, "ERR need numeric radius")?;
    if d < 0.0 {
        return Err(CmdError::other("ERR radius cannot be negative"));
    }
    Ok((d, parse_unit(unit)?))
}

/// extractBoxOrReply: (width, height, metres per unit).
fn parse_box(w: &[u8], h: &[u8], unit: &[u8]) -> Result<(f64, f64, f64), CmdError> {
    let w = parse_double_msg(w, "ERR need numeric width")?;
    let h = parse_double_msg(h, "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(CmdError::other("ERR height or width cannot be negative"));
    }
    Ok((w, h, parse_unit(unit)?))
}

/// The decoded position of `member` (longLatFromMember).
fn member_pos(z: &impl ZSetOps, member: &[u8]) -> Option<[f64; 2]> {
    z.score(member).and_then(decode_score)
}

/// addReplyDoubleDistance: `%.4f` as a bulk string.
fn distance_reply(d: f64) -> Reply {
    Reply::bulk_str(&c_fixed(d, 4))
}

/// ld2string(LD_STR_HUMAN): `%.17Lf` without trailing zeros (the value is a
/// double, so the long double formatting prints the same digits).
fn human_double(d: f64) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let mut s = c_fixed(d, 17);
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    if s == "-0" {
        s = "0".to_string();
    }
    s
}

/// addReplyHumanLongDouble: a bulk string in RESP2, a double in RESP3.
fn coord_reply(d: f64) -> Reply {
    Reply::DoubleText(Bytes::from(human_double(d)))
}

// ---------------------------------------------------------------------------
// GEOADD GEODIST GEOHASH GEOPOS
// ---------------------------------------------------------------------------

/// GEOADD key [NX|XX] [CH] lon lat member ...: turned into a ZADD with the
/// geohash scores, exactly as Redis does.
fn geoadd<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let (mut xx, mut nx) = (false, false);
    let mut longidx = 2;
    while longidx < args.len() {
        let opt = &args[longidx];
        if eq_ic(opt, "nx") {
            nx = true;
        } else if eq_ic(opt, "xx") {
            xx = true;
        } else if !eq_ic(opt, "ch") {
            break;
        }
        longidx += 1;
    }
    let rest = &args[longidx..];
    if !rest.len().is_multiple_of(3) || (xx && nx) {
        return Err(CmdError::Syntax);
    }
    let mut zargs: Vec<Bytes> = Vec::with_capacity(longidx + rest.len() / 3 * 2);
    zargs.push(Bytes::from_static(b"zadd"));
    zargs.extend(args[1..longidx].iter().cloned());
    for t in rest.chunks(3) {
        let [lon, lat] = parse_lon_lat(&t[0], &t[1])?;
        let score = encode_score(lon, lat).ok_or_else(|| {
            CmdError::other(format!(
                "ERR invalid longitude,latitude pair {},{}",
                c_fixed(lon, 6),
                c_fixed(lat, 6)
            ))
        })?;
        zargs.push(Bytes::from(score.to_string()));
        zargs.push(t[2].clone());
    }
    crate::zset::zadd(store, db, &zargs, ctx)
}

/// GEODIST key member1 member2 [unit].
fn geodist<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let to_meter = match args.len() {
        5 => parse_unit(&args[4])?,
        n if n > 5 => return Err(CmdError::Syntax),
        _ => 1.0,
    };
    let Some(z) = read_zset(store, db, &args[1], ctx)? else {
        return Ok(Reply::Nil);
    };
    let (Some(s1), Some(s2)) = (z.score(&args[2]), z.score(&args[3])) else {
        return Ok(Reply::Nil);
    };
    match (decode_score(s1), decode_score(s2)) {
        (Some(a), Some(b)) => Ok(distance_reply(distance(a[0], a[1], b[0], b[1]) / to_meter)),
        _ => Ok(Reply::Nil),
    }
}

/// GEOHASH key member...: standard 11-character geohashes (re-encoded over
/// the -90..90 latitude range; the 11th character is always '0').
fn geohash<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let z = read_zset(store, db, &args[1], ctx)?;
    let out = args[2..]
        .iter()
        .map(|m| {
            let Some(xy) = z.and_then(|z| member_pos(z, m)) else {
                return Reply::Nil;
            };
            let lat_r = Range {
                min: -90.0,
                max: 90.0,
            };
            let hash = encode(LONG_RANGE, lat_r, xy[0], xy[1], 26).unwrap_or_default();
            let buf: Vec<u8> = (0..11)
                .map(|i| {
                    let idx = if i == 10 {
                        0
                    } else {
                        (hash.bits >> (52 - (i + 1) * 5)) & 0x1f
                    };
                    ALPHABET[idx as usize]
                })
                .collect();
            Reply::Bulk(Bytes::from(buf))
        })
        .collect();
    Ok(Reply::Array(out))
}

/// GEOPOS key member...: [lon, lat] or a nil array per member.
fn geopos<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let z = read_zset(store, db, &args[1], ctx)?;
    let out = args[2..]
        .iter()
        .map(|m| match z.and_then(|z| member_pos(z, m)) {
            Some([lon, lat]) => Reply::Array(vec![coord_reply(lon), coord_reply(lat)]),
            None => Reply::NilArray,
        })
        .collect();
    Ok(Reply::Array(out))
}

// ---------------------------------------------------------------------------
// GEOSEARCH GEOSEARCHSTORE GEORADIUS GEORADIUSBYMEMBER (georadiusGeneric)
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// GEORADIUS / GEORADIUS_RO: centre and radius are positional.
    Radius {
        store_allowed: bool,
    },
    /// GEORADIUSBYMEMBER / GEORADIUSBYMEMBER_RO.
    ByMember {
        store_allowed: bool,
    },
    GeoSearch,
    GeoSearchStore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// What a search produced: a reply, or members to store at a key.
enum Outcome {
    Reply(Reply),
    Store {
        dest: Bytes,
        items: Vec<(Vec<u8>, f64)>,
    },
}

/// Redis's georadiusGeneric up to the point of writing: parses, checks,
/// searches, sorts and either shapes the reply or the items to store.
fn search<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    variant: Variant,
) -> Result<Outcome, CmdError> {
    let src_index = if variant == Variant::GeoSearchStore {
        2
    } else {
        1
    };
    let z = read_zset(store, db, &args[src_index], ctx)?;
    let mut store_key: Option<Bytes> = None;
    let mut storedist = false;
    let mut shape = Shape {
        xy: [0.0, 0.0],
        conversion: 0.0,
        kind: ShapeKind::Circle(0.0),
    };
    let (base_args, store_allowed, is_search) = match variant {
        Variant::Radius { store_allowed } => {
            shape.xy = parse_lon_lat(&args[2], &args[3])?;
            let (r, conv) = parse_radius(&args[4], &args[5])?;
            shape.kind = ShapeKind::Circle(r);
            shape.conversion = conv;
            (6, store_allowed, false)
        }
        Variant::ByMember { store_allowed } => {
            if let Some(z) = z {
                shape.xy = member_pos(z, &args[2])
                    .ok_or_else(|| CmdError::other("ERR could not decode requested zset member"))?;
                let (r, conv) = parse_radius(&args[3], &args[4])?;
                shape.kind = ShapeKind::Circle(r);
                shape.conversion = conv;
            }
            (5, store_allowed, false)
        }
        Variant::GeoSearch => (2, false, true),
        Variant::GeoSearchStore => {
            store_key = Some(args[1].clone());
            (3, false, true)
        }
    };

    let (mut withdist, mut withhash, mut withcoords) = (false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut any = false;
    let mut count: i64 = 0;
    let opts = args.get(base_args..).unwrap_or_default();
    let remaining = opts.len();
    let mut i = 0;
    while i < remaining {
        let arg = &opts[i];
        if eq_ic(arg, "withdist") {
            withdist = true;
        } else if eq_ic(arg, "withhash") {
            withhash = true;
        } else if eq_ic(arg, "withcoord") {
            withcoords = true;
        } else if eq_ic(arg, "any") {
            any = true;
        } else if eq_ic(arg, "asc") {
            sort = Sort::Asc;
        } else if eq_ic(arg, "desc") {
            sort = Sort::Desc;
        } else if eq_ic(arg, "count") && i + 1 < remaining {
            count = parse_i64(&opts[i + 1])?;
            if count <= 0 {
                return Err(CmdError::other("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (eq_ic(arg, "store") || eq_ic(arg, "storedist"))
            && i + 1 < remaining
            && store_allowed
        {
            store_key = Some(opts[i + 1].clone());
            storedist = eq_ic(arg, "storedist");
            i += 1;
        } else if eq_ic(arg, "storedist") && variant == Variant::GeoSearchStore {
            storedist = true;
        } else if eq_ic(arg, "frommember") && i + 1 < remaining && is_search && !fromloc {
            if let Some(z) = z {
                shape.xy = member_pos(z, &opts[i + 1])
                    .ok_or_else(|| CmdError::other("ERR could not decode requested zset member"))?;
            }
            frommember = true;
            i += 1;
        } else if eq_ic(arg, "fromlonlat") && i + 2 < remaining && is_search && !frommember {
            shape.xy = parse_lon_lat(&opts[i + 1], &opts[i + 2])?;
            fromloc = true;
            i += 2;
        } else if eq_ic(arg, "byradius") && i + 2 < remaining && is_search && !bybox {
            let (r, conv) = parse_radius(&opts[i + 1], &opts[i + 2])?;
            shape.kind = ShapeKind::Circle(r);
            shape.conversion = conv;
            byradius = true;
            i += 2;
        } else if eq_ic(arg, "bybox") && i + 3 < remaining && is_search && !byradius {
            let (w, h, conv) = parse_box(&opts[i + 1], &opts[i + 2], &opts[i + 3])?;
            shape.kind = ShapeKind::Rect(w, h);
            shape.conversion = conv;
            bybox = true;
            i += 3;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }

    if store_key.is_some() && (withdist || withhash || withcoords) {
        let what = if variant == Variant::GeoSearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(CmdError::other(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&args[0]);
    if is_search && !(frommember || fromloc) {
        return Err(CmdError::other(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if is_search && !(byradius || bybox) {
        return Err(CmdError::other(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(CmdError::other(
            "ERR the ANY argument requires COUNT argument",
        ));
    }

    let Some(z) = z else {
        return Ok(match store_key {
            Some(dest) => Outcome::Store {
                dest,
                items: Vec::new(),
            },
            None => Outcome::Reply(Reply::Array(Vec::new())),
        });
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut points = points_in_shape(z, &shape, if any { count } else { 0 });
    let returned = if count == 0 {
        points.len()
    } else {
        points.len().min(count)
    };
    if sort != Sort::None {
        let desc = sort == Sort::Desc;
        if returned == points.len() {
            // glibc's qsort (a merge sort here): stable.
            points.sort_by(|a, b| compare(a, b, desc).cmp(&0));
        } else {
            pqsort(&mut points, &|a, b| compare(a, b, desc), 0, returned - 1);
        }
    }
    points.truncate(returned);

    if let Some(dest) = store_key {
        let items = points
            .into_iter()
            .map(|p| {
                let score = if storedist {
                    p.dist / shape.conversion
                } else {
                    p.score
                };
                (p.member, score)
            })
            .collect();
        return Ok(Outcome::Store { dest, items });
    }
    let with_any = withdist || withhash || withcoords;
    let out = points
        .into_iter()
        .map(|p| {
            let member = Reply::Bulk(Bytes::from(p.member));
            if !with_any {
                return member;
            }
            let mut item = vec![member];
            if withdist {
                item.push(distance_reply(p.dist / shape.conversion));
            }
            if withhash {
                item.push(Reply::Int(p.score as i64));
            }
            if withcoords {
                item.push(Reply::Array(vec![coord_reply(p.lon), coord_reply(p.lat)]));
            }
            Reply::Array(item)
        })
        .collect();
    Ok(Outcome::Reply(Reply::Array(out)))
}

fn search_read<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    variant: Variant,
) -> CmdResult {
    match search(store, db, args, ctx, variant)? {
        Outcome::Reply(r) => Ok(r),
        // Read variants never accept a destination.
        Outcome::Store { .. } => Err(CmdError::Syntax),
    }
}

fn search_write<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
    variant: Variant,
) -> CmdResult {
    let src = if variant == Variant::GeoSearchStore {
        2
    } else {
        1
    };
    store.expire_if_needed(db, &args[src], ctx);
    match search(store, db, args, ctx, variant)? {
        Outcome::Reply(r) => Ok(r),
        Outcome::Store { dest, items } => {
            let n = store_result(store, db, &dest, &items, Build::Whole, ctx);
            Ok(Reply::Int(n as i64))
        }
    }
}

fn geosearch<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    search_read(store, db, args, ctx, Variant::GeoSearch)
}

fn geosearchstore<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    search_write(store, db, args, ctx, Variant::GeoSearchStore)
}

fn georadius<K: Keyspace>(store: &mut Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let variant = Variant::Radius {
        store_allowed: true,
    };
    search_write(store, db, args, ctx, variant)
}

fn georadius_ro<K: Keyspace>(store: &Store<K>, db: usize, args: &[Bytes], ctx: &Ctx) -> CmdResult {
    let variant = Variant::Radius {
        store_allowed: false,
    };
    search_read(store, db, args, ctx, variant)
}

fn georadiusbymember<K: Keyspace>(
    store: &mut Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let variant = Variant::ByMember {
        store_allowed: true,
    };
    search_write(store, db, args, ctx, variant)
}

fn georadiusbymember_ro<K: Keyspace>(
    store: &Store<K>,
    db: usize,
    args: &[Bytes],
    ctx: &Ctx,
) -> CmdResult {
    let variant = Variant::ByMember {
        store_allowed: false,
    };
    search_read(store, db, args, ctx, variant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(parts: &[&str]) -> Vec<Bytes> {
        parts
            .iter()
            .map(|p| Bytes::copy_from_slice(p.as_bytes()))
            .collect()
    }

    fn ctx() -> Ctx {
        Ctx { now_ms: 1, seed: 0 }
    }

    fn write(store: &mut Store, parts: &[&str]) -> Reply {
        store
            .apply(0, &args(parts), &ctx())
            .unwrap_or_else(|e| e.to_reply())
    }

    fn read(store: &Store, parts: &[&str]) -> Reply {
        store
            .read(0, &args(parts), &ctx())
            .unwrap_or_else(|e| e.to_reply())
    }

    fn text(r: &Reply) -> String {
        match r {
            Reply::Bulk(b) | Reply::DoubleText(b) => String::from_utf8_lossy(b).into_owned(),
            Reply::Error(e) => e.to_string(),
            Reply::Int(i) => i.to_string(),
            Reply::Array(items) => {
                format!("[{}]", items.iter().map(text).collect::<Vec<_>>().join(","))
            }
            Reply::Nil | Reply::NilArray => "nil".to_string(),
            other => format!("{other:?}"),
        }
    }

    fn sicily() -> Store {
        let mut s = Store::default();
        let r = write(
            &mut s,
            &[
                "GEOADD",
                "Sicily",
                "13.361389",
                "38.115556",
                "Palermo",
                "15.087269",
                "37.502669",
                "Catania",
            ],
        );
        assert_eq!(text(&r), "2");
        s
    }

    #[test]
    fn scores_and_decoding_match_redis() {
        assert_eq!(encode_score(13.361389, 38.115556), Some(3479099956230698));
        assert_eq!(encode_score(15.087269, 37.502669), Some(3479447370796909));
        let [lon, lat] = decode_score(3479099956230698.0).unwrap_or_default();
        assert_eq!(human_double(lon), "13.36138933897018433");
        assert_eq!(human_double(lat), "38.11555639549629859");
        assert_eq!(human_double(-0.0), "0");
        assert_eq!(human_double(2.5), "2.5");
        assert_eq!(
            deinterleave64(interleave64(0x3ff_ffff, 0x155_5555)),
            0x155_5555 << 32 | 0x3ff_ffff
        );
        // Scores that are not geohashes still decode, clamped like Redis.
        assert!(decode_score(-1.0).is_some());
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
    }

    #[test]
    fn geodist_geohash_geopos() {
        let s = sicily();
        let d = |unit: &str| {
            text(&read(
                &s,
                &["GEODIST", "Sicily", "Palermo", "Catania", unit],
            ))
        };
        assert_eq!(d("m"), "166274.1516");
        assert_eq!(d("KM"), "166.2742");
        assert_eq!(d("mi"), "103.3182");
        assert_eq!(
            d("yd"),
            "ERR unsupported unit provided. please use M, KM, FT, MI"
        );
        assert_eq!(
            text(&read(&s, &["GEOHASH", "Sicily", "Palermo", "Catania", "x"])),
            "[sqc8b49rny0,sqdtr74hyu0,nil]"
        );
        assert_eq!(
            text(&read(&s, &["GEOPOS", "Sicily", "Palermo", "x"])),
            "[[13.36138933897018433,38.11555639549629859],nil]"
        );
        // RESP3 sends the coordinates as doubles with the same text, byte
        // for byte what redis-server 7.0.15 sends after HELLO 3.
        let pos = read(&s, &["GEOPOS", "Sicily", "Palermo"]);
        let mut wire = bytes::BytesMut::new();
        kvasir_resp::encode(&pos, kvasir_resp::Protocol::Resp3, &mut wire);
        assert_eq!(
            &wire[..],
            b"*1\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n"
        );
        assert_eq!(text(&read(&s, &["GEOPOS", "nokey", "a"])), "[nil]");
        assert_eq!(text(&read(&s, &["GEODIST", "nokey", "a", "b"])), "nil");
    }

    #[test]
    fn geoadd_options_and_errors() {
        let mut s = sicily();
        assert_eq!(
            text(&write(&mut s, &["GEOADD", "Sicily", "200", "100", "x"])),
            "ERR invalid longitude,latitude pair 200.000000,100.000000"
        );
        assert_eq!(
            text(&write(
                &mut s,
                &["GEOADD", "Sicily", "XX", "NX", "1", "1", "x"]
            )),
            "ERR syntax error"
        );
        assert_eq!(
            text(&write(&mut s, &["GEOADD", "Sicily", "1", "1"])),
            "ERR wrong number of arguments for 'geoadd' command"
        );
        assert_eq!(
            text(&write(&mut s, &["GEOADD", "Sicily", "x", "1", "m"])),
            "ERR value is not a valid float"
        );
        let r = write(
            &mut s,
            &[
                "GEOADD", "Sicily", "XX", "CH", "1", "1", "Palermo", "2", "2", "New",
            ],
        );
        assert_eq!(text(&r), "1");
        let r = write(
            &mut s,
            &[
                "GEOADD", "Sicily", "NX", "3", "3", "Palermo", "2", "2", "New",
            ],
        );
        assert_eq!(text(&r), "1");
        write(&mut s, &["SET", "str", "v"]);
        assert!(text(&write(&mut s, &["GEOADD", "str", "1", "1", "m"])).starts_with("WRONGTYPE"));
    }

    #[test]
    fn searches() {
        let mut s = sicily();
        let r = read(
            &s,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "ASC",
                "WITHDIST",
                "WITHHASH",
            ],
        );
        assert_eq!(
            text(&r),
            "[[Catania,56.4413,3479447370796909],[Palermo,190.4424,3479099956230698]]"
        );
        let r = read(
            &s,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYBOX",
                "400",
                "400",
                "km",
                "DESC",
                "COUNT",
                "1",
            ],
        );
        assert_eq!(text(&r), "[Palermo]");
        let r = read(
            &s,
            &["GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "100", "km"],
        );
        assert_eq!(text(&r), "[Palermo]");
        let r = read(
            &s,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMMEMBER",
                "nobody",
                "BYRADIUS",
                "1",
                "m",
            ],
        );
        assert_eq!(text(&r), "ERR could not decode requested zset member");
        let r = read(
            &s,
            &["GEOSEARCH", "Sicily", "BYRADIUS", "1", "m", "ASC", "ANY"],
        );
        assert_eq!(
            text(&r),
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
        );
        let r = write(
            &mut s,
            &[
                "GEORADIUS",
                "Sicily",
                "15",
                "37",
                "200",
                "km",
                "STOREDIST",
                "d",
                "WITHDIST",
            ],
        );
        assert_eq!(
            text(&r),
            "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        );
        let r = write(
            &mut s,
            &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d"],
        );
        assert_eq!(text(&r), "2");
        assert_eq!(
            text(&read(&s, &["ZSCORE", "d", "Palermo"])),
            format!("{:?}", Reply::Double(3479099956230698.0))
        );
        let r = write(
            &mut s,
            &[
                "GEOSEARCHSTORE",
                "d",
                "Sicily",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "1",
                "km",
            ],
        );
        assert_eq!(text(&r), "0");
        assert_eq!(text(&read(&s, &["EXISTS", "d"])), "0");
    }

    #[test]
    fn pqsort_matches_redis() {
        // Checked against Redis 7.0's pqsort.c compiled as is.
        let d = [
            1539.0, 0., 0., 0., 0., 0., 0., 0., 1268., 1247., 2039., 4556., 5174., 7265., 7537.,
            5128., 2245., 7939.,
        ];
        let mut v: Vec<(f64, usize)> = d.iter().copied().zip(0..).collect();
        let cmp = |a: &(f64, usize), b: &(f64, usize)| {
            if a.0 > b.0 {
                1
            } else if a.0 == b.0 {
                0
            } else {
                -1
            }
        };
        pqsort(&mut v, &cmp, 0, 2);
        let order: Vec<usize> = v.iter().map(|x| x.1).collect();
        assert_eq!(
            order,
            [3, 1, 2, 7, 4, 5, 6, 9, 8, 0, 10, 11, 12, 13, 14, 15, 16, 17]
        );
    }

    #[test]
    fn key_positions() {
        let keys = |parts: &[&str]| {
            crate::table::lookup(parts[0].as_bytes()).map(|c| c.keys_of(&args(parts)))
        };
        assert_eq!(
            keys(&[
                "GEORADIUS",
                "src",
                "0",
                "0",
                "1",
                "km",
                "STORE",
                "a",
                "STOREDIST",
                "b"
            ]),
            Some(vec![1, 9])
        );
        assert_eq!(
            keys(&["GEORADIUSBYMEMBER", "src", "m", "1", "km", "COUNT", "3"]),
            Some(vec![1])
        );
        assert_eq!(
            keys(&[
                "GEOSEARCHSTORE",
                "dst",
                "src",
                "FROMMEMBER",
                "m",
                "BYRADIUS",
                "1",
                "m"
            ]),
            Some(vec![1, 2])
        );
        assert_eq!(
            keys(&["GEOSEARCH", "src", "FROMMEMBER", "m", "BYRADIUS", "1", "m"]),
            Some(vec![1])
        );
    }
}
