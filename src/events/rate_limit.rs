//! Rate limits in the CLIs' own words: whether an error is one, and when it
//! lifts when the CLI says so (an absolute time or a delay).
//!
//! The CLIs pass on what the provider answered in different shapes, recorded
//! from the real CLIs in tests/fixtures/streams/<cli>/{rate-limit,usage-limit}
//! and described in tests/e2e/README.md ("Rate limits"): a delay in the
//! provider's text (Gemini, OpenCode, Copilot), the provider's headers
//! (OpenCode), an exact time (Claude's rate_limit_event, read by its
//! adapter) or a wall-clock time in the CLI's zone (Codex, Claude's text).
//! Adapters and the stderr path share this one reading.

use std::time::Duration;

use serde::Serialize;

/// A rate limit a CLI reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "reset", rename_all = "snake_case")]
pub enum RateLimit {
    /// No reset time given.
    Unknown,
    /// Lifts at this time (Unix milliseconds).
    At { unix_ms: u64 },
    /// Lifts at about this time: a wall-clock time printed to the minute
    /// (the minute's end).
    Around { unix_ms: u64 },
    /// Lifts this long after the message was seen.
    After { ms: u64 },
}

/// The furthest reset orch believes: a week's limit and a day. A reset
/// further away is a misreading (milliseconds given as seconds, a year
/// read as seconds) and counts as none.
const FURTHEST_MS: u64 = 8 * 86_400_000;

impl RateLimit {
    /// When the limit lifts (Unix milliseconds), for a message seen at
    /// `seen_ms`; `None` when the CLI did not say, or said something beyond
    /// belief.
    pub(crate) fn lifts_at(self, seen_ms: u64) -> Option<u64> {
        let at = match self {
            RateLimit::Unknown => return None,
            RateLimit::At { unix_ms } | RateLimit::Around { unix_ms } => unix_ms,
            RateLimit::After { ms } => seen_ms.saturating_add(ms),
        };
        (at <= seen_ms.saturating_add(FURTHEST_MS)).then_some(at)
    }

    /// Whether the reset is given to the second or better.
    pub(crate) fn exact(self) -> bool {
        matches!(self, RateLimit::At { .. } | RateLimit::After { .. })
    }

    fn after(d: Duration) -> RateLimit {
        RateLimit::After {
            ms: u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Unix seconds, when they are plausibly Unix seconds (2001 to 5138).
    fn at_unix_seconds(n: f64) -> Option<RateLimit> {
        (1e9..1e11).contains(&n).then_some(RateLimit::At {
            unix_ms: (n * 1000.0) as u64,
        })
    }
}

/// Whether an error message looks like a rate limit.
pub(crate) fn looks_rate_limited(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("rate limit")
        || m.contains("rate_limit")
        || m.contains("ratelimit")
        || has_number(&m, "429")
        || m.contains("too many requests")
        // Gemini: "You exceeded your current quota", "You have exhausted
        // your daily quota"; OpenAI: insufficient_quota.
        || m.contains("exceeded your current quota")
        || (m.contains("exhausted your") && m.contains("quota"))
        || m.contains("insufficient_quota")
        || m.contains("resource_exhausted")
        || m.contains("usage limit")
        || m.contains("usage_limit")
        || m.contains("overloaded")
        // Claude: "You've hit your limit", "... your session limit".
        || (m.contains("hit your") && m.contains("limit"))
}

/// Whether `number` stands in `text` as a number of its own (not inside a
/// longer number or word: `line 1429`, `chunk.js:307429` are not 429).
fn has_number(text: &str, number: &str) -> bool {
    let bytes = text.as_bytes();
    text.match_indices(number).any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| bytes[j]);
        let after = bytes.get(i + number.len()).copied();
        !before.is_some_and(|b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|b| b.is_ascii_alphanumeric())
    })
}

/// The rate limit an error message reports, with its reset when the message
/// gives one; `None` when the message is not a rate limit.
pub(crate) fn read(message: &str) -> Option<RateLimit> {
    // Every stderr line comes here: the clock only for rate limits.
    read_at(message, jiff::Zoned::now)
}

/// [`read`] as of `now()` (whose zone is the one the CLI printed clock times
/// in: orch hands its agents its own `TZ`).
fn read_at(message: &str, now: impl FnOnce() -> jiff::Zoned) -> Option<RateLimit> {
    if !looks_rate_limited(message) {
        return None;
    }
    Some(reset(message, &now()).unwrap_or(RateLimit::Unknown))
}

/// The reset a message names, in any of the forms the CLIs print.
fn reset(message: &str, now: &jiff::Zoned) -> Option<RateLimit> {
    let lower = message.to_ascii_lowercase();
    // Keys are found in the lowered text and values read from the original
    // (ASCII lowering keeps every byte offset).
    let after = |key: &str| lower.find(key).map(|i| &message[i + key.len()..]);
    // Delays: "Please retry in 30s." (Gemini), "Suggested retry after 30s."
    // (Gemini), "Please try again in 30s." (OpenAI, via OpenCode, Copilot,
    // Codex), "retryDelay": "20s" (Google RetryInfo), retry-after headers.
    for key in [
        "retry in ",
        "try again in ",
        "retry after ",
        "retrydelay\": \"",
        "retrydelay\":\"",
        "retry-after: ",
        "resets in ",
    ] {
        if let Some(d) = after(key).and_then(delay) {
            return Some(RateLimit::after(d));
        }
    }
    // Absolute times: "resets_at": 1795318713 (Codex's usage-limit body),
    // RFC 3339 times, wall-clock times.
    for key in ["resets_at\":", "resets_at\": "] {
        if let Some(at) = after(key)
            .and_then(leading_number)
            .and_then(RateLimit::at_unix_seconds)
        {
            return Some(at);
        }
    }
    for key in [
        "resets at ",
        "reset at ",
        "try again at ",
        "retry at ",
        "retry after ",
        "resets ",
    ] {
        if let Some(text) = after(key)
            && let Some(at) = rfc3339(text)
                .map(|unix_ms| RateLimit::At { unix_ms })
                .or_else(|| clock(text, now).map(|unix_ms| RateLimit::Around { unix_ms }))
        {
            return Some(at);
        }
    }
    None
}

/// The reset a provider's HTTP response headers give (OpenCode passes them
/// on): `retry-after-ms`, `retry-after` (seconds or an HTTP date),
/// `x-ratelimit-reset-requests` (`30s`, `1m0s`), `x-codex-primary-reset-at`
/// (Unix seconds), `anthropic-ratelimit-requests-reset` (RFC 3339).
pub(crate) fn from_headers(headers: &serde_json::Value) -> Option<RateLimit> {
    let get = |name: &str| {
        headers
            .as_object()?
            .iter()
            .find_map(|(k, v)| k.eq_ignore_ascii_case(name).then(|| v.as_str()).flatten())
    };
    if let Some(d) = get("retry-after-ms")
        .and_then(leading_number)
        .and_then(|ms| seconds(ms / 1000.0))
    {
        return Some(RateLimit::after(d));
    }
    if let Some(v) = get("retry-after") {
        if let Some(d) = leading_number(v).and_then(seconds) {
            return Some(RateLimit::after(d));
        }
        if let Ok(t) = jiff::fmt::rfc2822::parse(v) {
            return u64::try_from(t.timestamp().as_millisecond())
                .ok()
                .map(|unix_ms| RateLimit::At { unix_ms });
        }
    }
    if let Some(d) = get("x-ratelimit-reset-requests").and_then(delay) {
        return Some(RateLimit::after(d));
    }
    if let Some(at) = get("x-codex-primary-reset-at")
        .and_then(leading_number)
        .and_then(RateLimit::at_unix_seconds)
    {
        return Some(at);
    }
    get("anthropic-ratelimit-requests-reset")
        .and_then(rfc3339)
        .map(|unix_ms| RateLimit::At { unix_ms })
}

/// A wall-clock reset as the CLIs print it: `3:38 AM` and
/// `Nov 24th, 2026 3:38 AM` (Codex), `3:38am (UTC)`, `3am (UTC)` and
/// `Nov 25, 3:40am (UTC)` (Claude). The zone is the one named, else `now`'s.
/// The next such time after `now` (a time in the current minute is now: the
/// CLIs print minutes truncated), plus a minute.
fn clock(text: &str, now: &jiff::Zoned) -> Option<u64> {
    use jiff::civil::{Date, Time};
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let mut words = text
        .split_whitespace()
        .map(|w| w.trim_end_matches([',', '.']))
        .take(6)
        .peekable();
    let mut date: Option<(i8, i8, Option<i16>)> = None;
    let first = words.peek()?.to_ascii_lowercase();
    if let Some(m) = MONTHS.iter().position(|m| first.starts_with(m)) {
        words.next();
        let day: i8 = words
            .next()?
            .trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .ok()?;
        let year = words
            .peek()
            .filter(|w| w.len() == 4)
            .and_then(|w| w.parse::<i16>().ok());
        if year.is_some() {
            words.next();
        }
        date = Some((m as i8 + 1, day, year));
    }
    // The time: `3:38`, `3:38am`, `3am`, `3:38 AM`.
    let word = words.next()?.to_ascii_lowercase();
    let (digits, mut half) = match word.strip_suffix("am").or(word.strip_suffix("pm")) {
        Some(d) => (d.to_string(), Some(word.ends_with("pm"))),
        None => (word.clone(), None),
    };
    if half.is_none()
        && let Some(w) = words.peek()
        && matches!(w.to_ascii_lowercase().as_str(), "am" | "pm")
    {
        half = Some(w.eq_ignore_ascii_case("pm"));
        words.next();
    }
    let digit_string =
        |t: &str| !t.is_empty() && t.len() <= 2 && t.bytes().all(|b| b.is_ascii_digit());
    let (h, m) = match digits.split_once(':') {
        Some((h, m)) if digit_string(h) && digit_string(m) => {
            (h.parse::<i8>().ok()?, m.parse::<i8>().ok()?)
        }
        // A bare hour needs am/pm to be a time.
        None if digit_string(&digits) && half.is_some() => (digits.parse::<i8>().ok()?, 0),
        _ => return None,
    };
    let hour = match half {
        Some(pm) if (1..=12).contains(&h) => h % 12 + if pm { 12 } else { 0 },
        Some(_) => return None,
        None => h,
    };
    let time = Time::new(hour, m, 0, 0).ok()?;
    let zone = match words.next() {
        Some(w) if w.starts_with('(') => {
            jiff::tz::TimeZone::get(w.trim_matches(['(', ')'])).ok()?
        }
        _ => now.time_zone().clone(),
    };
    let now = now.with_time_zone(zone.clone());
    let minute = jiff::Span::new().minutes(1);
    // Past (this minute included): the next day (or year) it comes round.
    let passed = |at: &jiff::Zoned| at.checked_add(minute).map_or(true, |end| end <= now);
    let at = match date {
        Some((month, day, year)) => {
            let at = Date::new(year.unwrap_or(now.year()), month, day)
                .ok()?
                .to_datetime(time)
                .to_zoned(zone)
                .ok()?;
            if year.is_none() && passed(&at) {
                at.checked_add(jiff::Span::new().years(1)).ok()?
            } else {
                at
            }
        }
        None => {
            let at = now.date().to_datetime(time).to_zoned(zone).ok()?;
            if passed(&at) {
                at.checked_add(jiff::Span::new().days(1)).ok()?
            } else {
                at
            }
        }
    };
    u64::try_from(at.checked_add(minute).ok()?.timestamp().as_millisecond()).ok()
}

/// A number at the start of `text` (after spaces or a quote).
fn leading_number(text: &str) -> Option<f64> {
    let t = text.trim_start_matches([' ', '"']);
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    t[..end].trim_end_matches('.').parse().ok()
}

/// A number of seconds as a Duration, when it is one (not negative, not
/// overflowing).
fn seconds(n: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(n).ok()
}

/// A delay at the start of `text`: `20s`, `20.5s`, `1m30s`, `2h 5m`,
/// `30 seconds`, `500ms`, or a bare number of seconds (not the start of a
/// time or date: `5:00`, `2026-11-22`).
fn delay(text: &str) -> Option<Duration> {
    let mut rest = text.trim_start_matches([' ', '"']);
    let mut total = 0f64;
    let mut any = false;
    loop {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let Ok(n) = rest[..end].trim_end_matches('.').parse::<f64>() else {
            break;
        };
        let after_number = rest[end..].trim_start();
        let unit_end = after_number
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after_number.len());
        let unit = after_number[..unit_end].to_ascii_lowercase();
        if unit.is_empty() && rest[end..].starts_with([':', '-', '/']) {
            return None;
        }
        let factor = match unit.as_str() {
            "ms" | "millisecond" | "milliseconds" => 0.001,
            "" | "s" | "sec" | "secs" | "second" | "seconds" => 1.0,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3600.0,
            "d" | "day" | "days" => 86_400.0,
            _ => break,
        };
        total += n * factor;
        any = true;
        rest = after_number[unit_end..].trim_start_matches([' ', ',']);
        if unit.is_empty() {
            break;
        }
    }
    any.then(|| seconds(total)).flatten()
}

/// An RFC 3339 time at the start of `text` (`Z` or an offset), as Unix
/// milliseconds.
fn rfc3339(text: &str) -> Option<u64> {
    let word = text
        .trim_start_matches([' ', '"'])
        .split(|c: char| c.is_whitespace() || c == '"' || c == ',' || c == ')')
        .next()?
        .trim_end_matches('.');
    let t: jiff::Timestamp = word.parse().ok()?;
    u64::try_from(t.as_millisecond()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-22 03:38:07.5 UTC, in the zone named.
    fn now(zone: &str) -> jiff::Zoned {
        jiff::Timestamp::from_millisecond(1_795_318_687_500)
            .unwrap()
            .in_tz(zone)
            .unwrap()
    }

    fn at(zone: &str, text: &str) -> u64 {
        jiff::civil::DateTime::strptime("%Y-%m-%d %H:%M", text)
            .unwrap()
            .in_tz(zone)
            .unwrap()
            .timestamp()
            .as_millisecond() as u64
    }

    fn read_utc(m: &str) -> Option<RateLimit> {
        read_at(m, || now("UTC"))
    }

    fn after_ms(m: &str) -> Option<u64> {
        match read_utc(m) {
            Some(RateLimit::After { ms }) => Some(ms),
            _ => None,
        }
    }

    #[test]
    fn delays_in_the_forms_the_clis_pass_on() {
        // Gemini (from Google's RetryInfo).
        assert_eq!(
            after_ms(
                "[API Error: You exceeded your current quota ... Please retry in 30s.\nSuggested retry after 30s.]"
            ),
            Some(30_000)
        );
        assert_eq!(
            after_ms("429 Too Many Requests. Please retry in 20.5s."),
            Some(20_500)
        );
        // OpenAI's text (via OpenCode, Copilot, Codex).
        assert_eq!(
            after_ms("Rate limit reached for requests. Please try again in 1m30s. Visit"),
            Some(90_000)
        );
        assert_eq!(after_ms("rate limit; try again in 500ms"), Some(500));
        assert_eq!(
            after_ms("rate_limit_error: retry after 30 seconds"),
            Some(30_000)
        );
        assert_eq!(
            after_ms(r#"{"code":429,"details":[{"retryDelay": "7s"}]}"#),
            Some(7_000)
        );
        assert_eq!(after_ms("HTTP 429, retry-after: 12"), Some(12_000));
    }

    #[test]
    fn absolute_resets() {
        assert_eq!(
            read_utc(r#"{"type":"usage_limit_reached","resets_at":1795318713}"#),
            Some(RateLimit::At {
                unix_ms: 1_795_318_713_000
            })
        );
        assert_eq!(
            read_utc("Rate limit exceeded; resets at 2026-11-22T04:00:00Z."),
            Some(RateLimit::At {
                unix_ms: at("UTC", "2026-11-22 04:00")
            })
        );
    }

    #[test]
    fn wall_clock_resets_in_the_zone_the_cli_printed_them() {
        let codex = |time: &str| {
            format!(
                "You\u{2019}ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), \
                 visit https://chatgpt.com/settings/usage to purchase more credits or try again at {time}."
            )
        };
        let berlin = now("Europe/Berlin"); // 04:38:07 local
        // (message, zone the expected time is in, expected) with a minute's
        // slack: the CLIs print minutes truncated.
        let cases = [
            // Later today...
            (codex("5:27 PM"), "Europe/Berlin", "2026-11-22 17:28"),
            // ...within the current minute: a time seconds away...
            (codex("4:38 AM"), "Europe/Berlin", "2026-11-22 04:39"),
            // ...or tomorrow, when that time of day has passed.
            (codex("3:38 AM"), "Europe/Berlin", "2026-11-23 03:39"),
            (
                codex("Nov 24th, 2026 3:38 AM"),
                "Europe/Berlin",
                "2026-11-24 03:39",
            ),
            // Claude names the zone.
            (
                "You've hit your limit \u{b7} resets 3am (UTC)".into(),
                "UTC",
                "2026-11-23 03:01",
            ),
            (
                "You've hit your weekly limit \u{b7} resets Nov 25, 3:40am (America/New_York)"
                    .into(),
                "America/New_York",
                "2026-11-25 03:41",
            ),
            (
                "You've hit your session limit \u{b7} resets 12:05pm (UTC)".into(),
                "UTC",
                "2026-11-22 12:06",
            ),
            // A dated time within its minute is now, not next year.
            (
                "You've hit your weekly limit \u{b7} resets Nov 22, 4:38am (Europe/Berlin)".into(),
                "Europe/Berlin",
                "2026-11-22 04:39",
            ),
            (
                "Rate limited. Retry after 5:00 PM".into(),
                "Europe/Berlin",
                "2026-11-22 17:01",
            ),
        ];
        for (message, zone, expected) in cases {
            assert_eq!(
                read_at(&message, || berlin.clone()),
                Some(RateLimit::Around {
                    unix_ms: at(zone, expected)
                }),
                "{message}"
            );
        }
        // Not a time (and never a panic).
        for message in [
            "rate limited; resets soon",
            "rate limited; resets 3 (UTC)",
            "rate limited; try again at 13pm",
            "rate limited; try again at 25:00",
            "rate limited; retry at 24:00",
            "rate limited; resets 3:75pm",
            "rate limited; resets -3:00",
            "rate limited; resets 3:7:5",
            "rate limited; resets Feb 30, 3am (UTC)",
            "rate limited; resets Nov 0, 3am",
            "rate limited; resets Jan 45th 3am",
            "rate limited; resets Nov 3, 3am (Not/AZone)",
            "rate limited; resets Nov 3 99999 3am",
        ] {
            assert_eq!(read_utc(message), Some(RateLimit::Unknown), "{message}");
        }
    }

    #[test]
    fn headers() {
        let h = |v: serde_json::Value| from_headers(&v);
        assert_eq!(
            h(serde_json::json!({"retry-after": "30", "retry-after-ms": "30000"})),
            Some(RateLimit::After { ms: 30_000 })
        );
        assert_eq!(
            h(serde_json::json!({"Retry-After": "Sun, 22 Nov 2026 04:00:00 GMT"})),
            Some(RateLimit::At {
                unix_ms: at("UTC", "2026-11-22 04:00")
            })
        );
        assert_eq!(
            h(serde_json::json!({"x-ratelimit-reset-requests": "1m0s"})),
            Some(RateLimit::After { ms: 60_000 })
        );
        assert_eq!(
            h(serde_json::json!({"x-codex-primary-reset-at": "1795318940"})),
            Some(RateLimit::At {
                unix_ms: 1_795_318_940_000
            })
        );
        assert_eq!(
            h(serde_json::json!({"content-type": "application/json"})),
            None
        );
        assert_eq!(h(serde_json::Value::Null), None);
    }

    #[test]
    fn numbers_beyond_belief_are_no_reset_and_no_panic() {
        let now = 1_795_318_687_500;
        for message in [
            "429 Too Many Requests; retry in 99999999999999999999999s",
            "rate limited; retry in 1e400s",
            "rate limited; retry in 18446744073709552 s",
            "rate limited; retry in 100000000000000000 s",
            "rate limited; retry in 30 days",
        ] {
            let r = read_utc(message);
            assert!(r.is_some(), "{message}");
            assert_eq!(r.unwrap().lifts_at(now), None, "{message}: {r:?}");
        }
        for headers in [
            serde_json::json!({"retry-after-ms": "99999999999999999999999999"}),
            serde_json::json!({"retry-after": "1".repeat(400)}),
            serde_json::json!({"x-codex-primary-reset-at": "1795318940000"}),
        ] {
            let r = from_headers(&headers);
            assert_eq!(r.and_then(|r| r.lifts_at(now)), None, "{headers}: {r:?}");
        }
        // A date or a time after "retry after" is not a number of seconds.
        assert_eq!(
            read_utc("Rate limit exceeded, retry after 2026-11-22T04:00:00Z"),
            Some(RateLimit::At {
                unix_ms: at("UTC", "2026-11-22 04:00")
            })
        );
        assert_eq!(
            read_utc("rate limited; resets at 2026-11-22T05:00:00+01:00"),
            Some(RateLimit::At {
                unix_ms: at("UTC", "2026-11-22 04:00")
            })
        );
    }

    #[test]
    fn ordinary_errors_are_not_rate_limits() {
        for message in [
            "error at line 1429: syntax error; retry in 5m",
            "TypeError at chunk.js:307429: retry in 5s",
            "request id req_4291: failed",
            "disk quota exceeded; will retry in 10 minutes",
        ] {
            assert_eq!(read_utc(message), None, "{message}");
        }
        for message in [
            "HTTP 429: slow down",
            "last status: 429 Too Many Requests",
            "(429) rate",
            "You exceeded your current quota, please check your plan",
            "You have exhausted your daily quota on this model.",
        ] {
            assert!(read_utc(message).is_some(), "{message}");
        }
    }

    #[test]
    fn not_a_rate_limit_or_no_reset() {
        assert_eq!(read_utc("connection refused"), None);
        assert_eq!(read_utc("Please try again in 20s"), None);
        assert_eq!(read_utc("429 Too Many Requests"), Some(RateLimit::Unknown));
        assert_eq!(
            read_utc("exceeded retry limit, last status: 429 Too Many Requests, request id: req_1"),
            Some(RateLimit::Unknown)
        );
        assert_eq!(RateLimit::After { ms: 5 }.lifts_at(10), Some(15));
        assert_eq!(RateLimit::At { unix_ms: 7 }.lifts_at(10), Some(7));
        assert_eq!(RateLimit::Unknown.lifts_at(10), None);
    }
}
