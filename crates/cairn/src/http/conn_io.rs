//! The socket under hyper: it reports arriving bytes (for the idle accounting of
//! [`super::conn`]) and turns hyper's own empty error answers into problems.
//!
//! hyper answers a request head it cannot parse by itself (a target over 64 KiB: 414, more
//! than 100 headers or a head over its buffer: 431, anything else malformed: 400) with an empty
//! body, `connection: close` and `content-length: 0` as its only headers, and closes. That
//! answer is recognised by exactly that shape (no response of the router has it: every error of
//! the router is a problem with a content type) and replaced, byte for byte, by the same status
//! with a problem body. Writes are not vectored, so an answer reaches this socket in one write.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::error::{Problem, codes};

/// A TCP stream that calls `on_read` whenever bytes arrive.
pub(crate) struct Socket<F> {
    inner: TcpStream,
    on_read: F,
    rewrite: Option<Rewrite>,
}

/// A replacement answer being written in place of hyper's.
struct Rewrite {
    bytes: Vec<u8>,
    written: usize,
    /// How many of hyper's bytes it stands for.
    replaces: usize,
}

impl<F: Fn() + Unpin> Socket<F> {
    pub(crate) fn new(inner: TcpStream, on_read: F) -> Self {
        Self {
            inner,
            on_read,
            rewrite: None,
        }
    }
}

/// The status of hyper's own error answer, when `head` is one.
fn hyper_error(head: &[u8]) -> Option<u16> {
    let rest = head.strip_prefix(b"HTTP/1.1 ")?;
    let status: u16 = std::str::from_utf8(rest.get(..3)?).ok()?.parse().ok()?;
    let line_end = rest.windows(2).position(|pair| pair == b"\r\n")?;
    let shape = b"\r\nconnection: close\r\ncontent-length: 0\r\n";
    (rest[line_end..].starts_with(shape) && matches!(status, 400 | 414 | 431)).then_some(status)
}

/// The problem answer that replaces hyper's empty one.
fn problem_answer(status: u16) -> Vec<u8> {
    let (kind, title, reason, detail) = match status {
        414 => (
            codes::URI_TOO_LONG,
            "URI too long",
            "URI Too Long",
            "the request target is longer than the server accepts",
        ),
        431 => (
            codes::HEADERS_TOO_LARGE,
            "Request headers too large",
            "Request Header Fields Too Large",
            "the request head has more or larger header fields than the server accepts",
        ),
        _ => (
            codes::BAD_REQUEST,
            "Bad request",
            "Bad Request",
            "the request is not valid HTTP/1.1",
        ),
    };
    let problem = Problem {
        kind: kind.into(),
        title: title.into(),
        status,
        detail: detail.into(),
        errors: None,
    };
    let body = serde_json::to_string(&problem).unwrap_or_default();
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/problem+json\r\n\
         x-content-type-options: nosniff\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl<F: Fn() + Unpin> AsyncRead for Socket<F> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            (this.on_read)();
        }
        polled
    }
}

impl<F: Fn() + Unpin> AsyncWrite for Socket<F> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.rewrite.is_none()
            && let Some(status) = hyper_error(buf)
        {
            this.rewrite = Some(Rewrite {
                bytes: problem_answer(status),
                written: 0,
                replaces: buf.len(),
            });
        }
        let Some(rewrite) = this.rewrite.as_mut() else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        if rewrite.written == rewrite.bytes.len() {
            // Already answered; hyper closes next, so anything more is passed on as it is.
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        }
        while rewrite.written < rewrite.bytes.len() {
            let rest = &rewrite.bytes[rewrite.written..];
            match Pin::new(&mut this.inner).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => rewrite.written += n,
                other => return other,
            }
        }
        Poll::Ready(Ok(rewrite.replaces.min(buf.len())))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        // One write per answer, so hyper's own error answer can be recognised whole.
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_empty_error_answers_are_recognised() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\
                      content-length: 0\r\ndate: Tue, 01 Dec 2026 16:27:29 GMT\r\n\r\n";
        assert_eq!(hyper_error(hyper), Some(431));
        let ours = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: \
                     application/problem+json\r\ncontent-length: 90\r\n\r\n{}";
        assert_eq!(hyper_error(ours), None);
        let ok = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(hyper_error(ok), None);
        let answer = String::from_utf8(problem_answer(414)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let problem: Problem = serde_json::from_str(body).unwrap();
        assert_eq!(
            (problem.status, problem.kind.as_str()),
            (414, codes::URI_TOO_LONG)
        );
    }
}
