//! `kvssd serve` as clients see it: real server processes on real sockets.
//!
//! * a Rust Redis client (the `redis` crate) runs every command the server knows, and checks
//!   the answers against what Redis would say;
//! * authentication, the connection limit and the client buffer limit;
//! * seeded random and truncated frames from many connections while another client keeps being
//!   served;
//! * SIGTERM: the server finishes, checkpoints, exits 0, and the next start sees every write;
//! * SIGKILL during a pipelined multi-client write load under group commit: after restart every
//!   answered write is there (or a later write of its key that was sent and not yet answered);
//! * `redis-benchmark` (when installed; `scripts/test.sh` installs it) runs SET and GET with
//!   pipelining and reports no error.
//!
//! Servers run on the `test_min` profile (256 KiB) in temporary directories, on ports the
//! kernel picks. Seeded: `KVSSD_SEED=<n>` replays the random parts.

mod common;

use common::Rng;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A `kvssd serve` child; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_kvssd"))
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("kvssd serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("kvssd serve prints its address");
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Server { child, port }
    }

    fn image(path: &Path, extra: &[&str]) -> Server {
        let path = path.to_str().expect("utf-8 path");
        let mut args = vec![path, "--profile", "test_min"];
        args.extend_from_slice(extra);
        Server::start(&args)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection_with_timeout(Duration::from_secs(10)))
            .expect("connects")
    }

    fn socket(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connects");
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        stream
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Sends SIGTERM and returns the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        self.signal("-TERM");
        let status = self.child.wait().expect("the server exits");
        std::mem::forget(self);
        status
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::forget(self);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn seed() -> u64 {
    std::env::var("KVSSD_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0x5e4e)
}

fn frame(words: &[&[u8]]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", words.len()).into_bytes();
    for word in words {
        bytes.extend_from_slice(format!("${}\r\n", word.len()).as_bytes());
        bytes.extend_from_slice(word);
        bytes.extend_from_slice(b"\r\n");
    }
    bytes
}

/// Reads until `expected` bytes arrived, or the connection ends.
fn read_reply(stream: &mut TcpStream, expected: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; expected];
    let mut have = 0;
    while have < expected {
        match stream.read(&mut bytes[have..]) {
            Ok(0) | Err(_) => break,
            Ok(read) => have += read,
        }
    }
    bytes.truncate(have);
    bytes
}

fn ping(server: &Server) {
    let mut conn = server.connection();
    let pong: String = redis::cmd("PING").query(&mut conn).expect("PING");
    assert_eq!(pong, "PONG");
}

#[test]
fn serve_answers_every_command_like_redis() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &["--databases", "2"]);
    let mut conn = server.connection();
    let q = |conn: &mut redis::Connection, args: &[&str]| -> redis::Value {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd.query(conn)
            .unwrap_or_else(|error| panic!("{args:?}: {error}"))
    };
    let err = |conn: &mut redis::Connection, args: &[&str]| -> String {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        match cmd.query::<redis::Value>(conn) {
            Ok(value) => panic!("{args:?} answered {value:?}, not an error"),
            Err(error) => error.to_string(),
        }
    };
    use redis::Value::{Array, BulkString, Int, Nil, Okay, SimpleString};
    let bulk = |text: &str| BulkString(text.as_bytes().to_vec());

    assert_eq!(q(&mut conn, &["PING"]), SimpleString("PONG".into()));
    assert_eq!(q(&mut conn, &["PING", "hi"]), bulk("hi"));
    assert_eq!(q(&mut conn, &["ECHO", "x y"]), bulk("x y"));
    // SET and its conditions: NX is insert-only, XX update-only; a refused condition is nil.
    assert_eq!(q(&mut conn, &["SET", "k1", "v1"]), Okay);
    assert_eq!(q(&mut conn, &["SET", "k1", "v2", "NX"]), Nil);
    assert_eq!(q(&mut conn, &["SET", "k2", "v2", "XX"]), Nil);
    assert_eq!(q(&mut conn, &["SET", "k1", "v3", "XX"]), Okay);
    assert_eq!(q(&mut conn, &["SET", "k2", "v2", "NX"]), Okay);
    assert_eq!(q(&mut conn, &["SETNX", "k2", "x"]), Int(0));
    assert!(err(&mut conn, &["SET", "k1", "v", "EX", "10"]).contains("expiry"));
    assert!(err(&mut conn, &["SET", "k1", "v", "NX", "XX"]).contains("syntax"));
    assert!(err(&mut conn, &["SET", "", "v"]).contains("keys are 1 to 255 bytes"));
    let too_long = "k".repeat(256);
    assert!(err(&mut conn, &["SET", &too_long, "v"]).contains("keys are 1 to 255 bytes"));
    let too_large = "v".repeat(8192);
    assert!(err(&mut conn, &["SET", "big", &too_large]).contains("more than"));
    assert_eq!(q(&mut conn, &["GET", "k1"]), bulk("v3"));
    assert_eq!(q(&mut conn, &["GET", "nope"]), Nil);
    assert_eq!(q(&mut conn, &["GET", &too_long]), Nil);
    assert_eq!(q(&mut conn, &["TYPE", "k1"]), SimpleString("string".into()));
    assert_eq!(q(&mut conn, &["TYPE", "nope"]), SimpleString("none".into()));
    // Partial retrieves.
    assert_eq!(q(&mut conn, &["SET", "s", "This is a string"]), Okay);
    assert_eq!(q(&mut conn, &["STRLEN", "s"]), Int(16));
    assert_eq!(q(&mut conn, &["STRLEN", "nope"]), Int(0));
    assert_eq!(q(&mut conn, &["GETRANGE", "s", "0", "3"]), bulk("This"));
    assert_eq!(q(&mut conn, &["GETRANGE", "s", "-3", "-1"]), bulk("ing"));
    assert_eq!(
        q(&mut conn, &["GETRANGE", "s", "10", "100"]),
        bulk("string")
    );
    assert_eq!(q(&mut conn, &["GETRANGE", "nope", "0", "1"]), bulk(""));
    // Multi-key commands; MSET and MSETNX are atomic batches.
    assert_eq!(q(&mut conn, &["MSET", "a", "1", "b", "2", "c", "3"]), Okay);
    assert_eq!(
        q(&mut conn, &["MGET", "a", "nope", "c"]),
        Array(vec![bulk("1"), Nil, bulk("3")])
    );
    assert_eq!(q(&mut conn, &["MSETNX", "x", "1", "a", "9"]), Int(0));
    assert_eq!(q(&mut conn, &["EXISTS", "x"]), Int(0));
    assert_eq!(q(&mut conn, &["GET", "a"]), bulk("1"));
    assert_eq!(q(&mut conn, &["MSETNX", "x", "1", "y", "2"]), Int(1));
    assert_eq!(q(&mut conn, &["EXISTS", "a", "b", "nope", "a"]), Int(3));
    assert_eq!(q(&mut conn, &["DEL", "a", "b", "nope", "a"]), Int(2));
    assert_eq!(q(&mut conn, &["UNLINK", "x"]), Int(1));
    assert_eq!(q(&mut conn, &["EXISTS", "a", "b", "x"]), Int(0));
    assert!(err(&mut conn, &["MSET", "a"]).contains("wrong number of arguments"));
    // SCAN over a snapshot, with a prefix pattern and COUNT.
    for index in 0..30 {
        let key = format!("user:{index:02}");
        assert_eq!(q(&mut conn, &["SET", &key, "u"]), Okay);
    }
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    let mut rounds = 0;
    loop {
        let Array(parts) = q(
            &mut conn,
            &["SCAN", &cursor, "MATCH", "user:*", "COUNT", "7"],
        ) else {
            panic!("SCAN answers an array");
        };
        let [BulkString(next), Array(keys)] = parts.as_slice() else {
            panic!("SCAN answers a cursor and keys: {parts:?}");
        };
        for key in keys {
            let BulkString(key) = key else {
                panic!("a key")
            };
            seen.push(String::from_utf8(key.clone()).expect("utf-8"));
        }
        rounds += 1;
        cursor = String::from_utf8(next.clone()).expect("utf-8");
        if cursor == "0" {
            break;
        }
        assert!(rounds < 20, "SCAN never ended");
    }
    assert!(rounds >= 4, "COUNT 7 over 30 keys took {rounds} rounds");
    let expected: Vec<String> = (0..30).map(|index| format!("user:{index:02}")).collect();
    assert_eq!(seen, expected);
    let scanned: (String, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("user:1?")
        .arg("COUNT")
        .arg(1000)
        .query(&mut conn)
        .expect("SCAN");
    assert_eq!(scanned.0, "0");
    assert_eq!(scanned.1.len(), 10);
    assert!(err(&mut conn, &["SCAN", "12345"]).contains("invalid cursor"));
    // DBSIZE counts keys: c, k1, k2, s, y and the 30 users.
    assert_eq!(q(&mut conn, &["DBSIZE"]), Int(35));
    // Databases are namespaces.
    assert_eq!(q(&mut conn, &["SELECT", "1"]), Okay);
    assert_eq!(q(&mut conn, &["GET", "k1"]), Nil);
    assert_eq!(q(&mut conn, &["SET", "k1", "other"]), Okay);
    assert_eq!(q(&mut conn, &["DBSIZE"]), Int(1));
    assert!(err(&mut conn, &["SELECT", "2"]).contains("out of range"));
    assert_eq!(q(&mut conn, &["SELECT", "0"]), Okay);
    assert_eq!(q(&mut conn, &["GET", "k1"]), bulk("v3"));
    // Connection commands.
    assert_eq!(q(&mut conn, &["CLIENT", "SETNAME", "tester"]), Okay);
    assert_eq!(q(&mut conn, &["CLIENT", "GETNAME"]), bulk("tester"));
    let Array(hello) = q(&mut conn, &["HELLO", "2"]) else {
        panic!("HELLO answers an array");
    };
    assert_eq!(hello[4], bulk("proto"));
    assert_eq!(hello[5], Int(2));
    assert!(err(&mut conn, &["HELLO", "3"]).contains("NOPROTO"));
    assert!(err(&mut conn, &["AUTH", "secret"]).contains("without any password"));
    // Introspection, as redis-cli and redis-benchmark use it.
    let Int(count) = q(&mut conn, &["COMMAND", "COUNT"]) else {
        panic!("COMMAND COUNT answers an integer");
    };
    let Array(all) = q(&mut conn, &["COMMAND"]) else {
        panic!("COMMAND answers an array");
    };
    assert_eq!(all.len() as i64, count);
    let Array(get_info) = q(&mut conn, &["COMMAND", "INFO", "get"]) else {
        panic!("COMMAND INFO answers an array");
    };
    let Array(get_info) = &get_info[0] else {
        panic!("one entry per command");
    };
    assert_eq!(get_info[0], bulk("get"));
    assert_eq!(get_info[1], Int(2));
    let config: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .query(&mut conn)
        .expect("CONFIG GET");
    assert_eq!(config, ["appendonly", "yes", "appendfsync", "always"]);
    let info: String = redis::cmd("INFO").query(&mut conn).expect("INFO");
    for field in [
        "redis_version:",
        "flash_user:reads=",
        "write_amplification:",
        "free_blocks:",
        "namespace1:database=db0,preset=pink",
        "levels=",
        "dram_bytes=",
        "kvssd_sync:group",
    ] {
        assert!(info.contains(field), "INFO lacks {field}:\n{info}");
    }
    let persistence: String = redis::cmd("INFO")
        .arg("persistence")
        .query(&mut conn)
        .expect("INFO persistence");
    assert!(persistence.starts_with("# Persistence") && !persistence.contains("# Server"));
    // Anything else is the standard unknown-command error.
    let unknown = err(&mut conn, &["FLUSHDB"]);
    assert!(unknown.contains("unknown command 'FLUSHDB'"), "{unknown}");
    assert!(err(&mut conn, &["GET"]).contains("wrong number of arguments for 'get'"));
    // QUIT answers, then closes.
    assert_eq!(q(&mut conn, &["QUIT"]), Okay);
    // Inline requests, as typed into telnet.
    let mut raw = server.socket();
    raw.write_all(b"PING\r\nset 'a b' \"c d\"\r\nGET \"a b\"\r\n")
        .expect("send");
    let reply = read_reply(&mut raw, 7 + 5 + 9);
    assert_eq!(reply, b"+PONG\r\n+OK\r\n$3\r\nc d\r\n");
    assert_eq!(server.terminate().code(), Some(0));
}

#[test]
fn serve_requires_a_password_beyond_loopback_and_checks_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("image");
    let image_arg = image.to_str().expect("utf-8");
    let refused = Command::new(env!("CARGO_BIN_EXE_kvssd"))
        .args([
            "serve",
            image_arg,
            "--profile",
            "test_min",
            "--bind",
            "0.0.0.0",
        ])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--password"));
    let server = Server::image(&image, &["--password", "s3cret", "--max-clients", "2"]);
    let mut raw = server.socket();
    raw.write_all(&frame(&[b"GET", b"k"])).expect("send");
    assert!(read_reply(&mut raw, 8).starts_with(b"-NOAUTH"));
    let wrong = redis::Client::open(format!("redis://:nope@127.0.0.1:{}/", server.port))
        .and_then(|client| client.get_connection());
    assert!(wrong.is_err());
    // The refused connection's slot frees once the server has seen it close: retry until then.
    let url = format!("redis://:s3cret@127.0.0.1:{}/", server.port);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut conn = loop {
        match redis::Client::open(url.as_str()).and_then(|client| client.get_connection()) {
            Ok(conn) => break conn,
            Err(error) if Instant::now() < deadline => {
                eprintln!("retrying: {error}");
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => panic!("the right password is refused: {error}"),
        }
    };
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut conn)
        .expect("SET");
    // Two clients are connected (raw and conn): a third is refused with an error.
    let mut third = server.socket();
    third
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let refusal = read_reply(&mut third, 64);
    assert!(
        String::from_utf8_lossy(&refusal).contains("max number of clients"),
        "{refusal:?}"
    );
    let value: String = redis::cmd("GET").arg("k").query(&mut conn).expect("GET");
    assert_eq!(value, "v");
}

/// A declared length beyond the buffer limit and a request that outgrows it are refused and the
/// connection closed, at once, without the bytes being buffered.
#[test]
fn serve_refuses_requests_beyond_the_client_buffer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(
        &dir.path().join("image"),
        &["--client-buffer-bytes", "4096"],
    );
    let mut raw = server.socket();
    raw.write_all(b"*2\r\n$3\r\nGET\r\n$999999999999\r\n")
        .expect("send");
    let mut reply = Vec::new();
    let _ = raw.read_to_end(&mut reply);
    assert!(
        String::from_utf8_lossy(&reply).starts_with("-ERR Protocol error: invalid bulk length"),
        "{reply:?}"
    );
    // A request of small arguments that together outgrow the buffer: refused once the buffer
    // is full. The client may see the error or, as it is still sending, a reset.
    let mut raw = server.socket();
    let mut huge = b"*1001\r\n$4\r\nMSET\r\n".to_vec();
    for _ in 0..1000 {
        huge.extend_from_slice(b"$10\r\n0123456789\r\n");
    }
    let _ = raw.write_all(&huge);
    let mut reply = Vec::new();
    let _ = raw.read_to_end(&mut reply);
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.is_empty() || reply.contains("larger than the client buffer"),
        "{reply:?}"
    );
    let mut conn = server.connection();
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut conn)
        .expect("INFO");
    assert!(info.contains("protocol_errors:2"), "{info}");
    ping(&server);
}

/// Random and truncated frames from many connections, one after another and several at once;
/// a well-behaved client is served throughout, and the server is still up at the end.
#[test]
fn serve_survives_random_and_truncated_frames() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &[]);
    let seed = seed();
    let stop = Arc::new(AtomicBool::new(false));
    let port = server.port;
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|client| client.get_connection())
                .expect("connects");
            let mut served = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let _: () = redis::cmd("SET")
                    .arg("watch")
                    .arg(served)
                    .query(&mut conn)
                    .expect("the other client is served");
                let value: u64 = redis::cmd("GET")
                    .arg("watch")
                    .query(&mut conn)
                    .expect("GET");
                assert_eq!(value, served);
                served += 1;
            }
            served
        })
    };
    let valid: [&[&[u8]]; 5] = [
        &[b"SET", b"fuzz", b"value"],
        &[b"GET", b"fuzz"],
        &[b"MSET", b"a", b"1", b"b", b"2"],
        &[b"SCAN", b"0", b"COUNT", b"3"],
        &[b"PING"],
    ];
    let mut rng = Rng::new(seed);
    for round in 0..300 {
        let mut bytes = Vec::new();
        for _ in 0..1 + rng.below(4) {
            let mut one = frame(valid[rng.below(valid.len() as u64) as usize]);
            match rng.below(5) {
                // Truncated.
                0 => one.truncate(rng.below(one.len() as u64) as usize),
                // Bytes flipped.
                1 => {
                    for _ in 0..1 + rng.below(3) {
                        let at = rng.below(one.len() as u64) as usize;
                        one[at] = rng.next() as u8;
                    }
                }
                // Random garbage, sometimes with a protocol marker first.
                2 => {
                    one = (0..rng.below(200)).map(|_| rng.next() as u8).collect();
                    if rng.below(2) == 0 {
                        one.insert(0, b'*');
                    }
                }
                // Huge declared lengths.
                3 => {
                    one = format!("*{}\r\n$%{}\r\n", rng.next(), rng.next()).into_bytes();
                }
                _ => {}
            }
            bytes.extend_from_slice(&one);
        }
        let mut raw = server.socket();
        raw.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let _ = raw.write_all(&bytes);
        if round % 3 == 0 {
            // Half-sent: hang up without waiting.
            continue;
        }
        let mut sink = [0u8; 4096];
        let _ = raw.read(&mut sink);
    }
    stop.store(true, Ordering::SeqCst);
    let served = watcher.join().expect("the other client never failed");
    assert!(served > 0);
    ping(&server);
    let mut conn = server.connection();
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query(&mut conn)
        .expect("INFO");
    let errors: u64 = info
        .lines()
        .find_map(|line| line.strip_prefix("protocol_errors:"))
        .and_then(|count| count.trim().parse().ok())
        .expect("INFO reports protocol errors");
    assert!(
        errors > 10,
        "only {errors} protocol errors seen (seed {seed})"
    );
}

#[test]
fn serve_sigterm_checkpoints_and_keeps_every_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = dir.path().join("image");
    let server = Server::image(&image, &["--sync", "none"]);
    {
        let mut conn = server.connection();
        for index in 0..50 {
            let _: () = redis::cmd("SET")
                .arg(format!("key{index}"))
                .arg(format!("value{index}"))
                .query(&mut conn)
                .expect("SET");
        }
    }
    // An idle client and one that sent half a request do not hold the shutdown up.
    let idle = server.connection();
    let mut half = server.socket();
    half.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk").expect("send");
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    assert_eq!(server.terminate().code(), Some(0));
    assert!(started.elapsed() < Duration::from_secs(5));
    drop((idle, half));
    let server = Server::image(&image, &[]);
    let mut conn = server.connection();
    for index in 0..50 {
        let value: String = redis::cmd("GET")
            .arg(format!("key{index}"))
            .query(&mut conn)
            .expect("GET");
        assert_eq!(value, format!("value{index}"));
    }
}

/// What one writer knows of its keys: per key, the last answered value's sequence number and
/// the ones sent after it that were not answered.
#[derive(Default)]
struct Shadow {
    answered: BTreeMap<String, u64>,
    pending: BTreeMap<String, Vec<u64>>,
}

/// Pipelined SETs of the writer's own keys until the connection dies; returns the SETs
/// answered and those sent but not answered when it died.
fn write_load(
    port: u16,
    writer: usize,
    keys: u64,
    shadow: &Mutex<Shadow>,
    seed: u64,
) -> (u64, u64) {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, 0);
    };
    let mut answered_total = 0u64;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(20)));
    let mut rng = Rng::new(seed ^ (writer as u64) << 32);
    let mut sequence = 0u64;
    loop {
        let depth = 1 + rng.below(16);
        let mut bytes = Vec::new();
        let mut sent = Vec::new();
        for _ in 0..depth {
            sequence += 1;
            let key = format!("w{writer}:k{}", rng.below(keys));
            let value = format!("{writer}:{sequence}");
            bytes.extend_from_slice(&frame(&[b"SET", key.as_bytes(), value.as_bytes()]));
            sent.push((key, sequence));
        }
        {
            let mut shadow = shadow.lock().expect("shadow");
            for (key, sequence) in &sent {
                shadow
                    .pending
                    .entry(key.clone())
                    .or_default()
                    .push(*sequence);
            }
        }
        if stream.write_all(&bytes).is_err() {
            return (answered_total, sent.len() as u64);
        }
        let reply = read_reply(&mut stream, 5 * sent.len());
        let answered = reply.len() / 5;
        assert!(
            reply
                .chunks(5)
                .take(answered)
                .all(|chunk| chunk == b"+OK\r\n"),
            "unexpected reply {reply:?}"
        );
        let mut shadow = shadow.lock().expect("shadow");
        for (key, sequence) in sent.iter().take(answered) {
            shadow.answered.insert(key.clone(), *sequence);
            if let Some(pending) = shadow.pending.get_mut(key) {
                pending.retain(|&later| later > *sequence);
            }
        }
        answered_total += answered as u64;
        if answered < sent.len() {
            return (answered_total, (sent.len() - answered) as u64);
        }
    }
}

/// Runs `kills` rounds: writers load the server, it is killed with SIGKILL after a seeded
/// while, restarted, and every writer's keys are checked.
fn sigkill_rounds(kills: u64, writers: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    let image: PathBuf = dir.path().join("image");
    let seed = seed();
    let mut rng = Rng::new(seed);
    let keys = 40;
    let shadows: Vec<Arc<Mutex<Shadow>>> = (0..writers)
        .map(|_| Arc::new(Mutex::new(Shadow::default())))
        .collect();
    let mut checked_total = 0usize;
    let (mut answered_total, mut in_flight_total) = (0u64, 0u64);
    for round in 0..kills {
        let server = Server::image(&image, &["--sync", "group"]);
        // Check the previous round's writes before writing more.
        let mut conn = server.connection();
        for (writer, shadow) in shadows.iter().enumerate() {
            let mut shadow = shadow.lock().expect("shadow");
            let Shadow { answered, pending } = &mut *shadow;
            for index in 0..keys {
                let key = format!("w{writer}:k{index}");
                let found: Option<String> =
                    redis::cmd("GET").arg(&key).query(&mut conn).expect("GET");
                let found = found.map(|value| {
                    value
                        .rsplit(':')
                        .next()
                        .and_then(|sequence| sequence.parse::<u64>().ok())
                        .expect("a value the test wrote")
                });
                let last = answered.get(&key).copied();
                let later = pending.get(&key).cloned().unwrap_or_default();
                let ok = match (found, last) {
                    (None, None) => true,
                    (None, Some(_)) => false,
                    (Some(found), last) => Some(found) == last || later.contains(&found),
                };
                assert!(
                    ok,
                    "round {round}: {key} holds {found:?}, answered {last:?}, pending {later:?} (KVSSD_SEED={seed})"
                );
                // What is there now is the key's value: the answered one from here on.
                match found {
                    Some(found) => {
                        answered.insert(key.clone(), found);
                    }
                    None => {
                        answered.remove(&key);
                    }
                }
                pending.remove(&key);
            }
            checked_total += answered.len();
        }
        drop(conn);
        let port = server.port;
        let threads: Vec<_> = shadows
            .iter()
            .enumerate()
            .map(|(writer, shadow)| {
                let shadow = Arc::clone(shadow);
                let seed = seed.wrapping_add(round);
                std::thread::spawn(move || write_load(port, writer, keys, &shadow, seed))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100 + rng.below(400)));
        server.kill();
        for thread in threads {
            let (answered, in_flight) = thread.join().expect("writer");
            answered_total += answered;
            in_flight_total += in_flight;
        }
    }
    // The last round's writes are checked by one more start.
    let server = Server::image(&image, &["--sync", "group"]);
    let mut conn = server.connection();
    for (writer, shadow) in shadows.iter().enumerate() {
        let shadow = shadow.lock().expect("shadow");
        for (key, &sequence) in &shadow.answered {
            let found: Option<String> = redis::cmd("GET").arg(key).query(&mut conn).expect("GET");
            let found = found.and_then(|value| {
                value
                    .rsplit(':')
                    .next()
                    .and_then(|sequence| sequence.parse::<u64>().ok())
            });
            let later = shadow.pending.get(key).cloned().unwrap_or_default();
            assert!(
                found == Some(sequence) || found.is_some_and(|found| later.contains(&found)),
                "after the last kill: writer {writer} {key} holds {found:?}, answered {sequence} (KVSSD_SEED={seed})"
            );
            checked_total += 1;
        }
    }
    assert!(answered_total > 0, "no write was ever answered");
    assert!(
        in_flight_total > 0,
        "no kill landed while writes were in flight"
    );
    eprintln!(
        "{kills} kills: {answered_total} SETs answered, {in_flight_total} sent and unanswered at the kills, {checked_total} keys checked against their last answered value after restarts, none lost (KVSSD_SEED={seed})"
    );
}

#[test]
fn serve_sigkill_loses_no_answered_write_under_group_commit() {
    sigkill_rounds(3, 4);
}

/// The longer run: 20 kills under an eight-writer load.
#[test]
#[ignore = "about a minute; run with --ignored"]
fn serve_sigkill_twenty_times() {
    sigkill_rounds(20, 8);
}

#[test]
fn serve_redis_benchmark_reports_no_error() {
    if Command::new("redis-benchmark")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("redis-benchmark is not installed; scripts/test.sh installs it");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &[]);
    let started = Instant::now();
    let output = Command::new("redis-benchmark")
        .args(["-p", &server.port.to_string()])
        .args(["-t", "set,get", "-n", "20000", "-P", "16", "-c", "10", "-q"])
        .output()
        .expect("redis-benchmark runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        !stdout.contains("ERR") && !stderr.contains("ERR") && !stderr.contains("Error"),
        "{stdout}\n{stderr}"
    );
    // -q prints one summary per test, ending with its requests per second.
    let last_lines: Vec<&str> = stdout
        .split(['\r', '\n'])
        .filter(|line| line.contains("requests per second"))
        .collect();
    assert!(
        last_lines.iter().any(|line| line.starts_with("SET"))
            && last_lines
                .iter()
                .any(|line| line.trim_start().starts_with("GET")),
        "{stdout}"
    );
    eprintln!("{} in {:?}", last_lines.join(" | "), started.elapsed());
    ping(&server);
}

/// The server's resident memory now, in KiB (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Sends `frames` malformed or truncated frames, each on its own connection, from `senders`
/// threads at once, while another client is served throughout; samples the server's RSS.
/// Returns (RSS before, peak RSS during, requests the other client made, its slowest one).
fn bad_frames(frames: u64, senders: u64) -> (u64, u64, u64, Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &[]);
    let pid = server.child.id();
    let port = server.port;
    ping(&server);
    let before = rss_kib(pid).unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(Mutex::new(before));
    let sampler = {
        let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Some(rss) = rss_kib(pid) {
                    let mut peak = peak.lock().expect("peak");
                    *peak = (*peak).max(rss);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let watcher = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .and_then(|client| client.get_connection())
                .expect("connects");
            let mut served = 0u64;
            let mut slowest = Duration::ZERO;
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let _: () = redis::cmd("SET")
                    .arg("watch")
                    .arg(served)
                    .query(&mut conn)
                    .expect("the other client is served");
                slowest = slowest.max(started.elapsed());
                served += 1;
            }
            (served, slowest)
        })
    };
    let seed = seed();
    let per_sender = frames / senders;
    let senders: Vec<_> = (0..senders)
        .map(|sender| {
            std::thread::spawn(move || {
                let mut rng = Rng::new(seed ^ (sender << 40));
                for _ in 0..per_sender {
                    let bytes: Vec<u8> = match rng.below(4) {
                        // A huge declared argument, partly sent: the server buffers up to its
                        // client buffer, no more.
                        0 => {
                            let mut bytes = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000000\r\n".to_vec();
                            bytes.extend(std::iter::repeat_n(b'v', rng.below(1 << 20) as usize));
                            bytes
                        }
                        // A length beyond any limit.
                        1 => format!("*2\r\n$3\r\nGET\r\n${}\r\n", rng.next()).into_bytes(),
                        // A truncated valid frame.
                        2 => {
                            let mut bytes = frame(&[b"MSET", b"a", b"1", b"b", b"2"]);
                            bytes.truncate(rng.below(bytes.len() as u64) as usize);
                            bytes
                        }
                        // Garbage.
                        _ => (0..1 + rng.below(300)).map(|_| rng.next() as u8).collect(),
                    };
                    let Ok(mut raw) = TcpStream::connect(("127.0.0.1", port)) else {
                        continue;
                    };
                    let _ = raw.write_all(&bytes);
                }
            })
        })
        .collect();
    for sender in senders {
        sender.join().expect("sender");
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    sampler.join().expect("sampler");
    let (served, slowest) = watcher
        .join()
        .expect("the other client was served throughout");
    ping(&server);
    let peak = *peak.lock().expect("peak");
    (before, peak, served, slowest)
}

#[test]
fn serve_bad_frames_keep_memory_bounded() {
    let (before, peak, served, slowest) = bad_frames(400, 4);
    eprintln!("400 bad frames: RSS {before} KiB before, peak {peak} KiB; other client served {served} requests, the slowest in {slowest:?}");
    assert!(
        slowest < Duration::from_secs(5),
        "the other client waited {slowest:?}"
    );
    assert!(
        peak <= before + (64 << 10),
        "peak RSS {peak} KiB, {before} KiB before"
    );
    assert!(served > 0);
}

/// The full measure: 10,000 bad frames.
#[test]
#[ignore = "about half a minute; run with --ignored"]
fn serve_ten_thousand_bad_frames() {
    let (before, peak, served, slowest) = bad_frames(10_000, 4);
    eprintln!("10000 bad frames: RSS {before} KiB before, peak {peak} KiB; other client served {served} requests, the slowest in {slowest:?}");
    assert!(
        slowest < Duration::from_secs(5),
        "the other client waited {slowest:?}"
    );
    assert!(
        peak <= before + (64 << 10),
        "peak RSS {peak} KiB, {before} KiB before"
    );
    assert!(served > 0);
}

/// `--timeout`: a client silent for that long is closed; one that keeps talking is not.
#[test]
fn serve_closes_silent_clients_after_the_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &["--timeout", "1"]);
    let mut silent = server.socket();
    let mut talking = server.socket();
    for _ in 0..6 {
        talking.write_all(b"PING\r\n").expect("send");
        assert_eq!(read_reply(&mut talking, 7), b"+PONG\r\n");
        std::thread::sleep(Duration::from_millis(400));
    }
    let mut byte = [0u8; 1];
    assert_eq!(
        silent.read(&mut byte).ok(),
        Some(0),
        "the silent client was closed"
    );
}

/// A hash namespace keeps no key order: SCAN and DBSIZE answer the device's error, point
/// commands work.
#[test]
fn serve_hash_namespaces_refuse_scan_with_the_devices_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::image(&dir.path().join("image"), &["--preset", "kaml"]);
    let mut conn = server.connection();
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut conn)
        .expect("SET");
    let value: String = redis::cmd("GET").arg("k").query(&mut conn).expect("GET");
    assert_eq!(value, "v");
    for command in ["SCAN", "DBSIZE"] {
        let mut cmd = redis::cmd(command);
        if command == "SCAN" {
            cmd.arg(0);
        }
        let error = cmd
            .query::<redis::Value>(&mut conn)
            .expect_err("no key order");
        assert!(
            error.to_string().contains("do not support iterators"),
            "{command}: {error}"
        );
    }
}
