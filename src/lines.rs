//! Reading lines from a process orch does not trust (an agent's output, a
//! client's messages): each at most a given length, the rest of a longer
//! one read and dropped, so that one runaway line cannot eat memory.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// One line into `buf` (cleared first; without its newline or a `\r`
/// before it), at most `max` bytes of it. Returns the bytes consumed (0 at
/// the end of the stream) and whether the line was cut. A last line
/// without a newline counts as a line.
pub(crate) async fn read_capped<R: AsyncBufRead + Unpin>(
    r: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<(usize, bool)> {
    buf.clear();
    let mut consumed = 0;
    let mut cut = false;
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok((consumed, cut));
        }
        let (used, end) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let take = &chunk[..if end { used - 1 } else { used }];
        let room = max.saturating_sub(buf.len());
        if take.len() > room {
            buf.extend_from_slice(&take[..room]);
            cut = true;
        } else {
            buf.extend_from_slice(take);
        }
        r.consume(used);
        consumed += used;
        if end {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok((consumed, cut));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_capped_and_the_rest_dropped() {
        let mut r = tokio::io::BufReader::with_capacity(4, &b"ab\r\n0123456789\nlast"[..]);
        let mut buf = Vec::new();
        assert_eq!(read_capped(&mut r, &mut buf, 5).await.unwrap(), (4, false));
        assert_eq!(buf, b"ab");
        assert_eq!(read_capped(&mut r, &mut buf, 5).await.unwrap(), (11, true));
        assert_eq!(buf, b"01234");
        assert_eq!(read_capped(&mut r, &mut buf, 5).await.unwrap(), (4, false));
        assert_eq!(buf, b"last");
        assert_eq!(read_capped(&mut r, &mut buf, 5).await.unwrap().0, 0);
    }
}
