//! Durations as people write them on a command line: `90s`, `30m`, `1h30m`, `500ms`, `2d`; a
//! bare number is seconds.

use std::time::Duration;

/// Parses `text` into a duration; the message says what was wrong (clap shows it with the flag).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration: write e.g. 90s, 30m or 1h".to_owned());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(format!(
                "`{text}` is not a duration: write e.g. 90s, 30m or 1h"
            ));
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("`{text}`: the number is too large"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            other => {
                return Err(format!(
                    "`{text}`: unknown unit `{other}` (use ms, s, m, h or d)"
                ));
            }
        };
        rest = &rest[unit_len..];
        let part = u32::try_from(number)
            .ok()
            .and_then(|n| unit.checked_mul(n))
            .ok_or_else(|| format!("`{text}` is too long"))?;
        total = total
            .checked_add(part)
            .ok_or_else(|| format!("`{text}` is too long"))?;
    }
    Ok(total)
}

/// A short human form of a duration: `250ms`, `1.5s`, `45s`, `12m05s`, `2h03m`.
pub fn human(duration: Duration) -> String {
    let seconds = duration.as_secs();
    match seconds {
        0 => format!("{}ms", duration.as_millis()),
        1..10 if duration.subsec_millis() >= 100 => {
            format!("{seconds}.{}s", duration.subsec_millis() / 100)
        }
        1..60 => format!("{seconds}s"),
        60..3600 => format!("{}m{:02}s", seconds / 60, seconds % 60),
        _ => format!("{}h{:02}m", seconds / 3600, (seconds % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_forms_people_write() {
        assert_eq!(parse("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("2d"), Ok(Duration::from_secs(172_800)));
        assert_eq!(parse("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse(" 5m "), Ok(Duration::from_secs(300)));
    }

    #[test]
    fn refuses_what_is_not_a_duration() {
        for bad in [
            "",
            "m",
            "5x",
            "1.5h",
            "h5",
            "-3s",
            "5 m",
            "99999999999999999999s",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn prints_short_forms() {
        assert_eq!(human(Duration::from_millis(250)), "250ms");
        assert_eq!(human(Duration::from_millis(1500)), "1.5s");
        assert_eq!(human(Duration::from_secs(7)), "7s");
        assert_eq!(human(Duration::from_secs(725)), "12m05s");
        assert_eq!(human(Duration::from_secs(7380)), "2h03m");
    }
}
