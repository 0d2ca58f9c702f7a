//! The wall clock, read one way everywhere: milliseconds since the Unix
//! epoch, as the records store them; and shown one way everywhere: times
//! and durations as every command and report writes them (jiff).

use jiff::fmt::friendly::{Designator, FractionalUnit, Spacing, SpanPrinter};
use jiff::{SignedDuration, Timestamp};

/// Now, in milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A Unix-millisecond time, or `None` past what a date can say.
fn timestamp(ms: u64) -> Option<Timestamp> {
    Timestamp::from_millisecond(i64::try_from(ms).ok()?).ok()
}

/// A Unix-millisecond time as an RFC 3339 date and time (UTC), to the
/// second: `2024-05-01T12:00:00Z`.
pub(crate) fn date_time(ms: u64) -> String {
    timestamp(ms).map_or_else(|| beyond(ms), |t| format!("{t:.0}"))
}

/// The time of day (UTC) of a Unix-millisecond time: `12:00:00.250`.
pub(crate) fn time_of_day(ms: u64) -> String {
    timestamp(ms).map_or_else(|| beyond(ms), |t| t.strftime("%H:%M:%S%.3f").to_string())
}

/// A time no date can show: still a line, never a panic.
fn beyond(ms: u64) -> String {
    format!("{ms} ms after 1970")
}

/// A duration of `ms` milliseconds, compact, to the unit below its
/// largest (truncated): `850ms`, `3.2s`, `2m5s`, `1h2m`.
pub(crate) fn duration(ms: u64) -> String {
    const SECOND: u64 = 1000;
    const MINUTE: u64 = 60 * SECOND;
    const HOUR: u64 = 60 * MINUTE;
    let printer = SpanPrinter::new()
        .designator(Designator::Compact)
        .spacing(Spacing::None);
    let (printer, shown) = if ms < SECOND {
        (printer, ms)
    } else if ms < MINUTE {
        let tenths = printer
            .fractional(Some(FractionalUnit::Second))
            .precision(Some(1));
        (tenths, ms)
    } else if ms < HOUR {
        (printer, ms - ms % SECOND)
    } else {
        (printer, ms - ms % MINUTE)
    };
    let shown = i64::try_from(shown).unwrap_or(i64::MAX);
    printer.duration_to_string(&SignedDuration::from_millis(shown))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_shown() {
        assert_eq!(time_of_day(1_795_318_687_500), "03:38:07.500");
        assert_eq!(time_of_day(1_714_564_800_005), "12:00:00.005");
        assert_eq!(date_time(1_795_318_687_500), "2026-11-22T03:38:07Z");
        assert_eq!(date_time(1_714_564_800_000), "2024-05-01T12:00:00Z");
        // Beyond what a date can show: still a line, never a panic.
        assert_eq!(date_time(u64::MAX), format!("{} ms after 1970", u64::MAX));
        assert_eq!(time_of_day(u64::MAX), format!("{} ms after 1970", u64::MAX));
        assert!(!date_time(400_000_000_000_000).is_empty());
    }

    #[test]
    fn durations_are_compact() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(3_250), "3.2s");
        assert_eq!(duration(59_999), "59.9s");
        assert_eq!(duration(125_999), "2m5s");
        assert_eq!(duration(3_720_000), "1h2m");
        assert_eq!(duration(3_779_999), "1h2m");
        assert!(!duration(u64::MAX).is_empty());
    }
}
