//! Great-circle distance between two points on the Earth and the
//! propagation delay of a fibre along it.

/// Mean Earth radius used for distances, km (the IUGG mean radius).
pub const EARTH_RADIUS_KM: f64 = 6371.0;

/// A point given as latitude and longitude in degrees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatLon {
    /// Degrees north, -90 ..= 90.
    pub lat: f64,
    /// Degrees east, -180 ..= 180.
    pub lon: f64,
}

/// Great-circle distance in km by the haversine formula on a sphere of
/// radius [`EARTH_RADIUS_KM`] (the haversine form stays accurate for the
/// short distances between neighbouring PoPs, where the spherical law of
/// cosines loses precision).
pub fn haversine_km(a: LatLon, b: LatLon) -> f64 {
    let (phi1, phi2) = (a.lat.to_radians(), b.lat.to_radians());
    let dphi = phi2 - phi1;
    let dlambda = (b.lon - a.lon).to_radians();
    let h = (dphi / 2.0).sin().powi(2) + phi1.cos() * phi2.cos() * (dlambda / 2.0).sin().powi(2);
    // Rounding can push h a hair above 1 for antipodal points.
    2.0 * EARTH_RADIUS_KM * h.sqrt().min(1.0).asin()
}

/// One-way delay over `km` at `ns_per_km`, rounded to the nearest whole
/// microsecond: the data's coordinates are city centres, far coarser than
/// a microsecond (200 m of fibre), and whole microseconds keep the file
/// readable.
pub fn delay_ns(km: f64, ns_per_km: u64) -> u64 {
    let us = (km * ns_per_km as f64 / 1_000.0).round();
    us as u64 * 1_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_degree_on_the_equator() {
        // 2 * pi * 6371 km / 360 = 111.1949 km.
        let d = haversine_km(LatLon { lat: 0.0, lon: 0.0 }, LatLon { lat: 0.0, lon: 1.0 });
        assert!((d - 111.1949).abs() < 1e-3, "{d}");
        // 111.1949 km * 5000 ns/km = 555_975 ns -> 556 us.
        assert_eq!(delay_ns(d, 5_000), 556_000);
    }

    #[test]
    fn antipodes_and_same_point() {
        // Half the circumference: pi * 6371 km = 20015.087 km.
        let d = haversine_km(
            LatLon { lat: 0.0, lon: 0.0 },
            LatLon {
                lat: 0.0,
                lon: 180.0,
            },
        );
        assert!((d - 20_015.087).abs() < 1e-2, "{d}");
        let p = LatLon {
            lat: 52.37,
            lon: 4.89,
        };
        assert_eq!(haversine_km(p, p), 0.0);
        assert_eq!(delay_ns(0.0, 5_000), 0);
    }
}
