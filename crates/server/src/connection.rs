//! One connection: read requests into a bounded buffer, run every complete one, and send the
//! replies once the writes among them are durable.
//!
//! Pipelining costs one sync, not one per write: the replies of every request that arrived
//! together are gathered, the writes among them are made durable together (under group commit,
//! together with other connections' writes too), then the replies go out in one write. A
//! connection's memory is its request buffer (at most [`crate::Config::client_buffer_bytes`]),
//! the request being run and its replies (sent whenever they pass [`crate::REPLY_FLUSH_BYTES`]).
//! A request that cannot fit the buffer, or a framing error, is answered with an error and the
//! connection is closed; a silent client is closed after the idle timeout, if one is set, and
//! one that stops in the middle of a request after [`PARTIAL_REQUEST_TIMEOUT`]; a client that
//! stops reading its replies is closed when a send has waited [`WRITE_TIMEOUT`].

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::commands::{self, Session};
use crate::resp::{self, Limits};
use crate::server::Shared;
use crate::{ARGUMENTS_MAX, INLINE_BYTES_MAX, REPLY_FLUSH_BYTES};

/// How long a read waits before the thread looks at the shutdown flag again.
const READ_POLL: Duration = Duration::from_millis(100);
/// How long a client may leave a request half-sent before the connection is closed.
pub const PARTIAL_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a send may wait for a client to read.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// Buffer capacity a connection keeps between requests.
const INPUT_KEEP_BYTES: usize = 64 << 10;
/// Bytes read from the socket at a time.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Answers a connection the server will not serve with one error, and closes it.
pub(crate) fn refuse(mut stream: TcpStream, message: &str) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(format!("-{message}\r\n").as_bytes());
    let _ = stream.shutdown(Shutdown::Both);
}

/// Replies waiting to be sent.
struct Output {
    bytes: Vec<u8>,
}

impl Output {
    /// Makes what the replies depend on durable, then sends them. `Err` closes the connection
    /// (without sending replies whose durability failed).
    fn send(&mut self, shared: &Shared, stream: &mut TcpStream) -> Result<(), ()> {
        if self.bytes.is_empty() {
            return Ok(());
        }
        if let Err(message) = shared.commit.wait_durable(&shared.device) {
            eprintln!("kvssd serve: {message}");
            return Err(());
        }
        stream.write_all(&self.bytes).map_err(drop)?;
        self.bytes.clear();
        Ok(())
    }
}

/// Serves one connection until it quits, fails, idles out or the server shuts down.
pub(crate) fn serve(shared: &Shared, mut stream: TcpStream) {
    let configured = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_nodelay(true))
        .and_then(|()| stream.set_read_timeout(Some(READ_POLL)))
        .and_then(|()| stream.set_write_timeout(Some(WRITE_TIMEOUT)));
    if configured.is_err() {
        return;
    }
    let buffer_max = shared.config.client_buffer_bytes;
    let limits = Limits {
        arguments_max: ARGUMENTS_MAX,
        bulk_bytes_max: buffer_max,
        inline_bytes_max: INLINE_BYTES_MAX.min(buffer_max),
    };
    let mut session = Session::new(
        shared.next_client_id.fetch_add(1, Ordering::Relaxed),
        shared.config.password.is_none(),
    );
    let mut input: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; READ_CHUNK_BYTES];
    let mut output = Output {
        bytes: Vec::with_capacity(16 << 10),
    };
    let mut last_heard = Instant::now();
    loop {
        // Run every complete request received.
        let mut consumed = 0;
        loop {
            match resp::parse(&input[consumed..], &limits) {
                Ok(Some((request, used))) => {
                    consumed += used;
                    if request.is_empty() {
                        continue;
                    }
                    shared.commands_total.fetch_add(1, Ordering::Relaxed);
                    let outcome =
                        commands::execute(shared, &mut session, &request, &mut output.bytes);
                    if outcome.close {
                        let _ = output.send(shared, &mut stream);
                        let _ = stream.shutdown(Shutdown::Both);
                        return;
                    }
                    if output.bytes.len() >= REPLY_FLUSH_BYTES
                        && output.send(shared, &mut stream).is_err()
                    {
                        return;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
                    resp::Reply(&mut output.bytes).error(&format!("ERR Protocol error: {error}"));
                    let _ = output.send(shared, &mut stream);
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
        input.drain(..consumed);
        // A large request's buffer is given back once it is done with, so an idle connection
        // holds little whatever it sent before.
        if input.capacity() > INPUT_KEEP_BYTES && input.len() <= INPUT_KEEP_BYTES {
            input.shrink_to(INPUT_KEEP_BYTES);
        }
        if output.bytes.capacity() > INPUT_KEEP_BYTES && output.bytes.is_empty() {
            output.bytes.shrink_to(INPUT_KEEP_BYTES);
        }
        if output.send(shared, &mut stream).is_err() {
            return;
        }
        if shared.shutdown.load(Ordering::SeqCst) {
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        if input.len() >= buffer_max {
            shared.protocol_errors.fetch_add(1, Ordering::Relaxed);
            resp::Reply(&mut output.bytes).error(&format!(
                "ERR Protocol error: request larger than the client buffer ({buffer_max} bytes)"
            ));
            let _ = output.send(shared, &mut stream);
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
        let room = (buffer_max - input.len()).min(chunk.len());
        match stream.read(&mut chunk[..room]) {
            Ok(0) => return,
            Ok(read) => {
                input.extend_from_slice(&chunk[..read]);
                last_heard = Instant::now();
            }
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                let silent = last_heard.elapsed();
                // A client silent between requests may stay (unless --timeout says otherwise);
                // one silent in the middle of a request holds buffer and a connection slot for
                // nothing, and is closed.
                let stalled = !input.is_empty() && silent >= PARTIAL_REQUEST_TIMEOUT;
                if stalled
                    || shared
                        .config
                        .idle_timeout
                        .is_some_and(|idle| silent >= idle)
                {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
            }
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
