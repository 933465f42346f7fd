//! `HELD_READ_CONCURRENCY`, `HELD_READ_HEADROOM` and `HELD_READS_PER_TENANT`: the seats held
//! reads may take, checked against each other (so they are read together).

use super::{ConfigError, at_most, number};
use crate::store::SeatCaps;

/// `HELD_READ_CONCURRENCY` (1–200, default 50) less `HELD_READ_HEADROOM` (default 0): on AWS
/// the first is the read function's reserved concurrency and the second what of it is kept for
/// reads that answer at once (plain reads, refusals), so that a held read beyond the seats is
/// answered 429 by the function rather than throttled by Lambda (which HTTP API answers 500).
/// At most 200: the seats are one item, and each of its writes costs write units in proportion
/// to the leases it holds (200 × ~37 bytes: 8 units), one item taking at most 1,000 a second.
pub(super) fn held_read_seats(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<SeatCaps, ConfigError> {
    let concurrency = at_most(
        number(get, "HELD_READ_CONCURRENCY", 50, 1)?,
        200,
        "HELD_READ_CONCURRENCY",
    )?;
    let headroom = number(get, "HELD_READ_HEADROOM", 0, 0)?;
    if headroom >= concurrency {
        return Err(ConfigError::new(
            "HELD_READ_HEADROOM",
            format!("must be less than HELD_READ_CONCURRENCY ({concurrency})"),
        ));
    }
    let all = u32::try_from(concurrency - headroom)
        .map_err(|_| ConfigError::new("HELD_READ_CONCURRENCY", "must be at most 200"))?;
    let per_tenant = number(get, "HELD_READS_PER_TENANT", all.div_ceil(2), 1)?;
    if per_tenant > all {
        return Err(ConfigError::new(
            "HELD_READS_PER_TENANT",
            format!(
                "must be at most the seats ({all}: HELD_READ_CONCURRENCY less HELD_READ_HEADROOM)"
            ),
        ));
    }
    Ok(SeatCaps { all, per_tenant })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{KEYS, TARGETS, config};
    use super::*;

    #[test]
    fn held_reads_get_their_concurrency_less_its_headroom() {
        let caps = |all, per_tenant| SeatCaps { all, per_tenant };
        assert_eq!(
            config(&[KEYS, TARGETS]).unwrap().held_read_seats,
            caps(50, 25)
        );
        let seats = |pairs: &[(&str, &str)]| {
            let mut all = vec![KEYS, TARGETS];
            all.extend_from_slice(pairs);
            config(&all).map(|c| c.held_read_seats)
        };
        assert_eq!(
            seats(&[("HELD_READ_CONCURRENCY", "21")]).unwrap(),
            caps(21, 11),
            "half the seats, rounded up"
        );
        assert_eq!(
            seats(&[
                ("HELD_READ_CONCURRENCY", "50"),
                ("HELD_READ_HEADROOM", "10"),
                ("HELD_READS_PER_TENANT", "40")
            ])
            .unwrap(),
            caps(40, 40)
        );
        for (pairs, variable) in [
            (
                &[
                    ("HELD_READ_CONCURRENCY", "10"),
                    ("HELD_READ_HEADROOM", "10"),
                ][..],
                "HELD_READ_HEADROOM",
            ),
            (
                &[("HELD_READ_CONCURRENCY", "0")][..],
                "HELD_READ_CONCURRENCY",
            ),
            (
                &[("HELD_READ_CONCURRENCY", "201")][..],
                "HELD_READ_CONCURRENCY",
            ),
            (&[("HELD_READ_HEADROOM", "-1")][..], "HELD_READ_HEADROOM"),
            (
                &[("HELD_READS_PER_TENANT", "51")][..],
                "HELD_READS_PER_TENANT",
            ),
            (
                &[("HELD_READS_PER_TENANT", "0")][..],
                "HELD_READS_PER_TENANT",
            ),
        ] {
            assert_eq!(seats(pairs).unwrap_err().variable, variable, "{pairs:?}");
        }
    }
}
