//! The command table and what each command does on the device (see `docs/server.md`).
//!
//! Reads of keys the device cannot hold (empty, or longer than 255 bytes) answer as for an
//! absent key; writes of them are refused with the device's message. Every device refusal is an
//! `ERR` reply with the device's one-line message, and a refused command changed nothing.

use kvssd_device::{
    BatchOp, ByteRange, DeviceError, IterOptions, IterStart, NamespaceId, StoreMode, KEY_BYTES_MAX,
};

use crate::glob;
use crate::info;
use crate::resp::Reply;
use crate::server::Shared;
use crate::REPLY_BYTES_MAX;

/// What a connection keeps between its requests.
pub(crate) struct Session {
    pub(crate) id: u64,
    pub(crate) db: u32,
    pub(crate) authenticated: bool,
    pub(crate) name: Option<Vec<u8>>,
}

impl Session {
    pub(crate) fn new(id: u64, authenticated: bool) -> Session {
        Session {
            id,
            db: 0,
            authenticated,
            name: None,
        }
    }
}

/// What the connection must do after a command. (Whether a reply waits for a sync is not the
/// command's to say: the connection waits for whatever its replies could depend on.)
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Outcome {
    /// Close the connection after sending the replies.
    pub(crate) close: bool,
}

const DONE: Outcome = Outcome { close: false };

/// One command: name, arity (as Redis counts it: the name included; negative is a minimum),
/// flags, first key, last key and key step (for COMMAND's answers).
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) arity: i64,
    pub(crate) flags: &'static [&'static str],
    pub(crate) first_key: i64,
    pub(crate) last_key: i64,
    pub(crate) step: i64,
}

const fn spec(
    name: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    keys: (i64, i64, i64),
) -> Spec {
    Spec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
    }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);

/// Every command the server knows.
pub(crate) const COMMANDS: [Spec; 25] = [
    spec("ping", -1, &["fast", "stale"], NO_KEYS),
    spec("echo", 2, &["fast", "stale"], NO_KEYS),
    spec("quit", -1, &["fast", "noauth", "allow_busy"], NO_KEYS),
    spec("select", 2, &["loading", "stale", "fast"], NO_KEYS),
    spec(
        "auth",
        -2,
        &["noscript", "loading", "stale", "fast", "noauth"],
        NO_KEYS,
    ),
    spec(
        "hello",
        -1,
        &["noscript", "loading", "stale", "fast", "noauth"],
        NO_KEYS,
    ),
    spec(
        "client",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
    ),
    spec("command", -1, &["loading", "stale"], NO_KEYS),
    spec(
        "config",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
    ),
    spec("info", -1, &["loading", "stale"], NO_KEYS),
    spec("dbsize", 1, &["readonly"], NO_KEYS),
    spec("get", 2, &["readonly", "fast"], (1, 1, 1)),
    spec("set", -3, &["write", "denyoom"], (1, 1, 1)),
    spec("setnx", 3, &["write", "denyoom", "fast"], (1, 1, 1)),
    spec("getrange", 4, &["readonly"], (1, 1, 1)),
    spec("substr", 4, &["readonly"], (1, 1, 1)),
    spec("strlen", 2, &["readonly", "fast"], (1, 1, 1)),
    spec("del", -2, &["write"], (1, -1, 1)),
    spec("unlink", -2, &["write", "fast"], (1, -1, 1)),
    spec("exists", -2, &["readonly", "fast"], (1, -1, 1)),
    spec("mget", -2, &["readonly", "fast"], (1, -1, 1)),
    spec("mset", -3, &["write", "denyoom"], (1, -1, 2)),
    spec("msetnx", -3, &["write", "denyoom"], (1, -1, 2)),
    spec("scan", -2, &["readonly"], NO_KEYS),
    spec("type", 2, &["readonly", "fast"], (1, 1, 1)),
];

fn find(name: &str) -> Option<&'static Spec> {
    COMMANDS.iter().find(|spec| spec.name == name)
}

fn arity_ok(spec: &Spec, args: usize) -> bool {
    if spec.arity >= 0 {
        args as i64 == spec.arity
    } else {
        args as i64 >= -spec.arity
    }
}

fn lossy(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(128)]);
    text.replace(['\r', '\n'], " ")
}

/// Redis's unknown-command error, naming the first arguments.
fn unknown_command(request: &[Vec<u8>]) -> String {
    let mut message = format!(
        "ERR unknown command '{}', with args beginning with: ",
        lossy(&request[0])
    );
    for arg in request.iter().skip(1).take(8) {
        message.push_str(&format!("'{}' ", lossy(arg)));
    }
    message
}

fn device_error(error: &DeviceError) -> String {
    format!("ERR {error}")
}

/// A key the device could hold (reads of any other answer as for an absent key).
fn valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= KEY_BYTES_MAX
}

fn parse_i64(bytes: &[u8]) -> Option<i64> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

/// Runs one request (non-empty), appending its reply to `out`.
pub(crate) fn execute(
    shared: &Shared,
    session: &mut Session,
    request: &[Vec<u8>],
    out: &mut Vec<u8>,
) -> Outcome {
    let mut reply = Reply(out);
    let name = String::from_utf8_lossy(&request[0]).to_ascii_lowercase();
    let Some(spec) = find(&name) else {
        reply.error(&unknown_command(request));
        return DONE;
    };
    if !arity_ok(spec, request.len()) {
        reply.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            spec.name
        ));
        return DONE;
    }
    if !session.authenticated && !spec.flags.contains(&"noauth") {
        reply.error("NOAUTH Authentication required.");
        return DONE;
    }
    let args = &request[1..];
    let namespace = shared.namespace_of(session.db);
    match spec.name {
        "ping" => {
            match args.first() {
                Some(message) => reply.bulk(message),
                None => reply.simple("PONG"),
            }
            DONE
        }
        "echo" => {
            reply.bulk(&args[0]);
            DONE
        }
        "quit" => {
            reply.ok();
            Outcome { close: true }
        }
        "select" => {
            match parse_i64(&args[0]) {
                Some(db) if db >= 0 && db < i64::from(shared.config.databases) => {
                    session.db = db as u32;
                    reply.ok();
                }
                Some(_) => reply.error("ERR DB index is out of range"),
                None => reply.error(NOT_INTEGER),
            }
            DONE
        }
        "auth" => {
            auth(shared, session, args, &mut reply);
            DONE
        }
        "hello" => {
            hello(shared, session, args, &mut reply);
            DONE
        }
        "client" => {
            client(session, args, &mut reply);
            DONE
        }
        "command" => {
            command(args, &mut reply);
            DONE
        }
        "config" => {
            config(shared, args, &mut reply);
            DONE
        }
        "info" => {
            let text = info::info(shared, args.first().map(|section| lossy(section)));
            reply.bulk(text.as_bytes());
            DONE
        }
        "dbsize" => {
            match count_keys(shared, namespace) {
                Ok(count) => reply.integer(count as i64),
                Err(message) => reply.error(&message),
            }
            DONE
        }
        "get" => {
            get(shared, namespace, &args[0], &mut reply);
            DONE
        }
        "set" => set(shared, namespace, args, &mut reply),
        "setnx" => {
            let stored =
                shared
                    .device
                    .store(0, namespace, &args[0], &args[1], StoreMode::InsertOnly);
            match stored {
                Ok(_) => {
                    reply.integer(1);
                    DONE
                }
                Err(DeviceError::KeyExists) => {
                    reply.integer(0);
                    DONE
                }
                Err(error) => {
                    reply.error(&device_error(&error));
                    DONE
                }
            }
        }
        "getrange" | "substr" => {
            getrange(shared, namespace, args, &mut reply);
            DONE
        }
        "strlen" => {
            strlen(shared, namespace, &args[0], &mut reply);
            DONE
        }
        "del" | "unlink" => delete(shared, namespace, args, &mut reply),
        "exists" => {
            exists(shared, namespace, args, &mut reply);
            DONE
        }
        "mget" => {
            mget(shared, namespace, args, &mut reply);
            DONE
        }
        "mset" | "msetnx" => mset(shared, namespace, args, spec.name == "msetnx", &mut reply),
        "scan" => {
            scan(shared, namespace, args, &mut reply);
            DONE
        }
        "type" => {
            match present(shared, namespace, &args[0]) {
                Ok(true) => reply.simple("string"),
                Ok(false) => reply.simple("none"),
                Err(message) => reply.error(&message),
            }
            DONE
        }
        _ => {
            reply.error(&unknown_command(request));
            DONE
        }
    }
}

/// Compares without stopping at the first difference, so the time taken tells nothing of where
/// a guess went wrong.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (index, &byte) in expected.iter().enumerate() {
        difference |= byte ^ given.get(index).copied().unwrap_or(0);
    }
    difference == 0
}

/// Checks a user and password; `Err` is the reply.
fn check_password(shared: &Shared, user: &[u8], password: &[u8]) -> Result<(), &'static str> {
    let Some(expected) = &shared.config.password else {
        return Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    };
    if user == b"default" && same_secret(password, expected.as_bytes()) {
        Ok(())
    } else {
        Err("WRONGPASS invalid username-password pair or user is disabled.")
    }
}

fn auth(shared: &Shared, session: &mut Session, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let (user, password) = match args {
        [password] => (&b"default"[..], password),
        [user, password] => (user.as_slice(), password),
        _ => {
            reply.error("ERR syntax error");
            return;
        }
    };
    match check_password(shared, user, password) {
        Ok(()) => {
            session.authenticated = true;
            reply.ok();
        }
        Err(message) => reply.error(message),
    }
}

fn hello(shared: &Shared, session: &mut Session, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let mut at = 0;
    if let Some(version) = args.first() {
        match parse_i64(version) {
            Some(2) => {}
            Some(_) => {
                reply.error("NOPROTO sorry, this protocol version is not supported");
                return;
            }
            None => {
                reply.error("ERR Protocol version is not an integer or out of range");
                return;
            }
        }
        at = 1;
    }
    let mut name = None;
    while at < args.len() {
        let option = args[at].to_ascii_lowercase();
        if option == b"auth" && at + 2 < args.len() {
            if let Err(message) = check_password(shared, &args[at + 1], &args[at + 2]) {
                reply.error(message);
                return;
            }
            session.authenticated = true;
            at += 3;
        } else if option == b"setname" && at + 1 < args.len() {
            name = Some(args[at + 1].clone());
            at += 2;
        } else {
            reply.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                lossy(&args[at])
            ));
            return;
        }
    }
    if !session.authenticated {
        reply.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return;
    }
    if let Some(name) = name {
        session.name = Some(name);
    }
    reply.array(14);
    reply.bulk(b"server");
    reply.bulk(b"redis");
    reply.bulk(b"version");
    reply.bulk(info::REDIS_VERSION.as_bytes());
    reply.bulk(b"proto");
    reply.integer(2);
    reply.bulk(b"id");
    reply.integer(session.id as i64);
    reply.bulk(b"mode");
    reply.bulk(b"standalone");
    reply.bulk(b"role");
    reply.bulk(b"master");
    reply.bulk(b"modules");
    reply.array(0);
}

fn client(session: &mut Session, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let sub = args[0].to_ascii_lowercase();
    match (sub.as_slice(), &args[1..]) {
        (b"setname", [name]) => {
            if name.iter().any(|&byte| byte <= b' ' || byte > b'~') {
                reply.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            } else {
                session.name = (!name.is_empty()).then(|| name.clone());
                reply.ok();
            }
        }
        (b"getname", []) => match &session.name {
            Some(name) => reply.bulk(name),
            None => reply.null(),
        },
        (b"id", []) => reply.integer(session.id as i64),
        // Client libraries announce themselves; there is nothing to keep.
        (b"setinfo", [_, _]) => reply.ok(),
        (b"info", []) | (b"list", _) => {
            let name = session.name.as_deref().map(lossy).unwrap_or_default();
            let line = format!("id={} name={} db={}\n", session.id, name, session.db);
            reply.bulk(line.as_bytes());
        }
        _ => reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
            lossy(&args[0])
        )),
    }
}

fn command_info(spec: &Spec, reply: &mut Reply<'_>) {
    reply.array(10);
    reply.bulk(spec.name.as_bytes());
    reply.integer(spec.arity);
    reply.array(spec.flags.len());
    for flag in spec.flags {
        reply.simple(flag);
    }
    reply.integer(spec.first_key);
    reply.integer(spec.last_key);
    reply.integer(spec.step);
    // ACL categories, tips, key specifications, subcommands: none given.
    for _ in 0..4 {
        reply.array(0);
    }
}

fn command(args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let Some(sub) = args.first() else {
        reply.array(COMMANDS.len());
        for spec in &COMMANDS {
            command_info(spec, reply);
        }
        return;
    };
    match sub.to_ascii_lowercase().as_slice() {
        b"count" => reply.integer(COMMANDS.len() as i64),
        b"list" => {
            reply.array(COMMANDS.len());
            for spec in &COMMANDS {
                reply.bulk(spec.name.as_bytes());
            }
        }
        b"info" => {
            let names = &args[1..];
            if names.is_empty() {
                reply.array(COMMANDS.len());
                for spec in &COMMANDS {
                    command_info(spec, reply);
                }
                return;
            }
            reply.array(names.len());
            for name in names {
                match find(&String::from_utf8_lossy(name).to_ascii_lowercase()) {
                    Some(spec) => command_info(spec, reply),
                    None => reply.null(),
                }
            }
        }
        // No documentation is served: an empty map (clients fall back to their own).
        b"docs" => reply.array(0),
        _ => reply.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            lossy(sub)
        )),
    }
}

fn config(shared: &Shared, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let sub = args[0].to_ascii_lowercase();
    if sub != b"get" {
        reply.error(&format!(
            "ERR CONFIG {} is not supported: kvssd's configuration is set on its command line",
            lossy(&args[0]).to_ascii_uppercase()
        ));
        return;
    }
    if args.len() < 2 {
        reply.error("ERR wrong number of arguments for 'config|get' command");
        return;
    }
    let parameters = info::parameters(shared);
    let mut matched: Vec<&(String, String)> = Vec::new();
    for pattern in &args[1..] {
        let pattern = pattern.to_ascii_lowercase();
        for pair in &parameters {
            if glob::matches(&pattern, pair.0.as_bytes())
                && !matched.iter().any(|seen| seen.0 == pair.0)
            {
                matched.push(pair);
            }
        }
    }
    reply.array(2 * matched.len());
    for (name, value) in matched {
        reply.bulk(name.as_bytes());
        reply.bulk(value.as_bytes());
    }
}

fn get(shared: &Shared, namespace: NamespaceId, key: &[u8], reply: &mut Reply<'_>) {
    if !valid_key(key) {
        reply.null();
        return;
    }
    match shared.device.retrieve(0, namespace, key, None) {
        Ok((Some(found), _)) => reply.bulk(&found.value),
        Ok((None, _)) => reply.null(),
        Err(error) => reply.error(&device_error(&error)),
    }
}

/// MGET: `retrieve` per key. The reply is built whole before it is sent, so it is bounded: a
/// client naming one large value a thousand times gets an error, not gigabytes of server memory.
fn mget(shared: &Shared, namespace: NamespaceId, keys: &[Vec<u8>], reply: &mut Reply<'_>) {
    let mut body = Vec::new();
    for key in keys {
        get(shared, namespace, key, &mut Reply(&mut body));
        if body.len() > REPLY_BYTES_MAX {
            reply.error(&format!(
                "ERR the MGET reply would exceed {REPLY_BYTES_MAX} bytes: ask for fewer keys"
            ));
            return;
        }
    }
    reply.array(keys.len());
    reply.0.extend_from_slice(&body);
}

fn present(shared: &Shared, namespace: NamespaceId, key: &[u8]) -> Result<bool, String> {
    if !valid_key(key) {
        return Ok(false);
    }
    let (answers, _) = shared
        .device
        .exist(0, namespace, &[key])
        .map_err(|error| device_error(&error))?;
    Ok(answers.first().copied().unwrap_or(false))
}

fn set(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) -> Outcome {
    let mut mode = StoreMode::Upsert;
    for option in &args[2..] {
        let upper = option.to_ascii_uppercase();
        match upper.as_slice() {
            b"NX" if mode != StoreMode::UpdateOnly => mode = StoreMode::InsertOnly,
            b"XX" if mode != StoreMode::InsertOnly => mode = StoreMode::UpdateOnly,
            // There is no expiry to keep.
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                reply.error(&format!(
                    "ERR SET {} is not supported: kvssd keeps no expiry times",
                    lossy(&upper)
                ));
                return DONE;
            }
            b"GET" => {
                reply.error("ERR SET GET is not supported: kvssd cannot read and write a key in one command");
                return DONE;
            }
            _ => {
                reply.error("ERR syntax error");
                return DONE;
            }
        }
    }
    match shared.device.store(0, namespace, &args[0], &args[1], mode) {
        Ok(_) => {
            reply.ok();
            DONE
        }
        // NX on a present key, XX on an absent one: nothing stored, the null reply.
        Err(DeviceError::KeyExists | DeviceError::KeyMissing) => {
            reply.null();
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

/// The byte range `start..=end` (Redis indexes: negative counts from the end) of a value of
/// `len` bytes, clamped; `None` if empty.
fn clamp_range(start: i64, end: i64, len: usize) -> Option<ByteRange> {
    let len = len as i64;
    let start = if start < 0 {
        (len + start).max(0)
    } else {
        start
    };
    let end = if end < 0 { len + end } else { end.min(len - 1) };
    if len == 0 || start > end || start >= len {
        return None;
    }
    Some(ByteRange {
        offset: start as usize,
        len: (end - start + 1) as usize,
    })
}

fn getrange(shared: &Shared, namespace: NamespaceId, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let (Some(start), Some(end)) = (parse_i64(&args[1]), parse_i64(&args[2])) else {
        reply.error(NOT_INTEGER);
        return;
    };
    let key = &args[0];
    if !valid_key(key) {
        reply.bulk(b"");
        return;
    }
    // The value's length first (a range of nothing transfers no value bytes), then the range.
    let len = match shared
        .device
        .retrieve(0, namespace, key, Some(ByteRange { offset: 0, len: 0 }))
    {
        Ok((Some(found), _)) => found.value_len,
        Ok((None, _)) => {
            reply.bulk(b"");
            return;
        }
        Err(error) => {
            reply.error(&device_error(&error));
            return;
        }
    };
    let Some(range) = clamp_range(start, end, len) else {
        reply.bulk(b"");
        return;
    };
    match shared.device.retrieve(0, namespace, key, Some(range)) {
        Ok((Some(found), _)) => reply.bulk(&found.value),
        // Deleted between the two reads.
        Ok((None, _)) => reply.bulk(b""),
        // Overwritten by a shorter value between the two reads: answer from the new value.
        Err(DeviceError::RangeOutsideValue { .. }) => {
            match shared.device.retrieve(0, namespace, key, None) {
                Ok((Some(found), _)) => match clamp_range(start, end, found.value.len()) {
                    Some(range) => reply.bulk(&found.value[range.offset..range.offset + range.len]),
                    None => reply.bulk(b""),
                },
                Ok((None, _)) => reply.bulk(b""),
                Err(error) => reply.error(&device_error(&error)),
            }
        }
        Err(error) => reply.error(&device_error(&error)),
    }
}

fn strlen(shared: &Shared, namespace: NamespaceId, key: &[u8], reply: &mut Reply<'_>) {
    if !valid_key(key) {
        reply.integer(0);
        return;
    }
    match shared
        .device
        .retrieve(0, namespace, key, Some(ByteRange { offset: 0, len: 0 }))
    {
        Ok((Some(found), _)) => reply.integer(found.value_len as i64),
        Ok((None, _)) => reply.integer(0),
        Err(error) => reply.error(&device_error(&error)),
    }
}

fn exists(shared: &Shared, namespace: NamespaceId, keys: &[Vec<u8>], reply: &mut Reply<'_>) {
    let valid: Vec<&[u8]> = keys
        .iter()
        .map(Vec::as_slice)
        .filter(|key| valid_key(key))
        .collect();
    match shared.device.exist(0, namespace, &valid) {
        Ok((answers, _)) => {
            reply.integer(answers.iter().filter(|&&present| present).count() as i64)
        }
        Err(error) => reply.error(&device_error(&error)),
    }
}

/// DEL: the keys present are deleted in one atomic batch; the reply counts them.
fn delete(
    shared: &Shared,
    namespace: NamespaceId,
    keys: &[Vec<u8>],
    reply: &mut Reply<'_>,
) -> Outcome {
    let mut unique: Vec<&[u8]> = keys
        .iter()
        .map(Vec::as_slice)
        .filter(|key| valid_key(key))
        .collect();
    unique.sort_unstable();
    unique.dedup();
    let answers = match shared.device.exist(0, namespace, &unique) {
        Ok((answers, _)) => answers,
        Err(error) => {
            reply.error(&device_error(&error));
            return DONE;
        }
    };
    let operations: Vec<BatchOp> = unique
        .iter()
        .zip(answers)
        .filter(|(_, present)| *present)
        .map(|(key, _)| BatchOp::Delete {
            namespace,
            key: key.to_vec(),
        })
        .collect();
    if operations.is_empty() {
        reply.integer(0);
        return DONE;
    }
    match shared.device.batch(0, &operations) {
        Ok(_) => {
            reply.integer(operations.len() as i64);
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

/// MSET and MSETNX: one atomic batch (upserts, or insert-only stores all of which must succeed).
fn mset(
    shared: &Shared,
    namespace: NamespaceId,
    args: &[Vec<u8>],
    insert_only: bool,
    reply: &mut Reply<'_>,
) -> Outcome {
    if args.len() % 2 != 0 {
        let name = if insert_only { "msetnx" } else { "mset" };
        reply.error(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
        return DONE;
    }
    let mode = if insert_only {
        StoreMode::InsertOnly
    } else {
        StoreMode::Upsert
    };
    // A key given twice in MSETNX: Redis checks presence before setting any, so the second
    // occurrence is not refused for the first. Insert-only applies to the first; later ones of
    // the same key overwrite it.
    let mut seen: std::collections::BTreeSet<&[u8]> = std::collections::BTreeSet::new();
    let operations: Vec<BatchOp> = args
        .chunks_exact(2)
        .map(|pair| {
            let first = seen.insert(pair[0].as_slice());
            BatchOp::Store {
                namespace,
                key: pair[0].clone(),
                value: pair[1].clone(),
                mode: if first { mode } else { StoreMode::Upsert },
            }
        })
        .collect();
    let unwrap = |error: DeviceError| match error {
        DeviceError::BatchOperation { source, .. } => *source,
        other => other,
    };
    match shared.device.batch(0, &operations).map_err(unwrap) {
        Ok(_) => {
            if insert_only {
                reply.integer(1);
            } else {
                reply.ok();
            }
            DONE
        }
        Err(DeviceError::KeyExists) if insert_only => {
            reply.integer(0);
            DONE
        }
        Err(error) => {
            reply.error(&device_error(&error));
            DONE
        }
    }
}

/// Keys in the namespace, counted on a keys-only snapshot iterator (exact, O(keys)).
fn count_keys(shared: &Shared, namespace: NamespaceId) -> Result<u64, String> {
    shared.cursors.make_room(&shared.device);
    let options = IterOptions {
        start: IterStart::Key(Vec::new()),
        keys_only: true,
        prefetch_degree: 0,
        index_prefetch: true,
    };
    let (iterator, _) = shared
        .device
        .iter_open(0, namespace, options)
        .map_err(|error| device_error(&error))?;
    let mut count = 0u64;
    let result = loop {
        match shared.device.iter_next(0, iterator, 256 << 10) {
            Ok((batch, _)) => {
                count += batch.entries.len() as u64;
                if batch.end {
                    break Ok(count);
                }
            }
            Err(error) => break Err(device_error(&error)),
        }
    };
    let _ = shared.device.iter_close(iterator);
    result
}

/// Keys a SCAN returns at most, whatever COUNT asks.
const SCAN_COUNT_MAX: usize = 10_000;
/// Bytes of keys asked of the iterator per key a SCAN still wants.
const SCAN_BYTES_PER_KEY: usize = 32;
/// Most bytes of keys asked of the iterator at once.
const SCAN_BATCH_BYTES_MAX: usize = 256 << 10;

fn scan(shared: &Shared, namespace: NamespaceId, args: &[Vec<u8>], reply: &mut Reply<'_>) {
    let Some(cursor) = std::str::from_utf8(&args[0])
        .ok()
        .and_then(|text| text.parse::<u64>().ok())
    else {
        reply.error("ERR invalid cursor");
        return;
    };
    let mut pattern: Vec<u8> = b"*".to_vec();
    let mut count = 10usize;
    let mut strings_only = true;
    let mut at = 1;
    while at < args.len() {
        let option = args[at].to_ascii_uppercase();
        let Some(value) = args.get(at + 1) else {
            reply.error("ERR syntax error");
            return;
        };
        match option.as_slice() {
            b"MATCH" => pattern = value.clone(),
            b"COUNT" => match parse_i64(value) {
                Some(n) if n >= 1 => count = (n as usize).min(SCAN_COUNT_MAX),
                Some(_) => {
                    reply.error("ERR syntax error");
                    return;
                }
                None => {
                    reply.error(NOT_INTEGER);
                    return;
                }
            },
            // Every value is a string: any other type matches nothing.
            b"TYPE" => strings_only = value.eq_ignore_ascii_case(b"string"),
            _ => {
                reply.error("ERR syntax error");
                return;
            }
        }
        at += 2;
    }
    // The iterator walks the pattern's literal prefix; the rest of the pattern filters.
    let (id, open) = if cursor == 0 {
        shared.cursors.make_room(&shared.device);
        let options = IterOptions {
            start: IterStart::Prefix(glob::literal_prefix(&pattern).to_vec()),
            keys_only: true,
            prefetch_degree: 0,
            index_prefetch: true,
        };
        let iterator = match shared.device.iter_open(0, namespace, options) {
            Ok((iterator, _)) => iterator,
            Err(error) => {
                reply.error(&device_error(&error));
                return;
            }
        };
        let Some(id) = shared.cursors.insert(iterator, namespace) else {
            let _ = shared.device.iter_close(iterator);
            reply.error("ERR the cursor table is unusable");
            return;
        };
        match shared.cursors.take(id) {
            Some(open) => (id, open),
            None => {
                reply.error("ERR the cursor was closed at once: too many scans at the same time");
                return;
            }
        }
    } else {
        match shared.cursors.take(cursor) {
            Some(open) if open.namespace == namespace => (cursor, open),
            Some(open) => {
                shared.cursors.put_back(cursor, open);
                reply.error("ERR the cursor belongs to another database");
                return;
            }
            None => {
                reply.error("ERR invalid cursor: unknown or expired (idle scans are closed); start again from 0");
                return;
            }
        }
    };
    // Exactly COUNT keys are walked (fewer at the end); what the iterator returned beyond them
    // waits in the cursor for the next SCAN.
    let mut open = open;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut walked = 0usize;
    while walked < count {
        let Some(key) = open.buffered.pop_front() else {
            if open.end {
                break;
            }
            let budget = ((count - walked) * SCAN_BYTES_PER_KEY).min(SCAN_BATCH_BYTES_MAX);
            match shared.device.iter_next(0, open.iterator, budget) {
                Ok((batch, _)) => {
                    open.end = batch.end;
                    open.buffered
                        .extend(batch.entries.into_iter().map(|entry| entry.key));
                }
                Err(error) => {
                    let _ = shared.device.iter_close(open.iterator);
                    reply.error(&device_error(&error));
                    return;
                }
            }
            continue;
        };
        walked += 1;
        if strings_only && glob::matches(&pattern, &key) {
            keys.push(key);
        }
    }
    let end = open.end && open.buffered.is_empty();
    reply.array(2);
    if end {
        let _ = shared.device.iter_close(open.iterator);
        reply.bulk(b"0");
    } else {
        shared.cursors.put_back(id, open);
        reply.bulk(id.to_string().as_bytes());
    }
    reply.array(keys.len());
    for key in &keys {
        reply.bulk(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_getrange_clamps_like_redis() {
        // "This is a string" (16 bytes), the examples of Redis's GETRANGE page.
        let range = |start, end| clamp_range(start, end, 16).map(|r| (r.offset, r.len));
        assert_eq!(range(0, 3), Some((0, 4)));
        assert_eq!(range(-3, -1), Some((13, 3)));
        assert_eq!(range(0, -1), Some((0, 16)));
        assert_eq!(range(10, 100), Some((10, 6)));
        assert_eq!(range(5, 3), None);
        assert_eq!(range(20, 30), None);
        assert_eq!(range(-100, 2), Some((0, 3)));
        assert_eq!(clamp_range(0, -1, 0), None);
    }

    #[test]
    fn commands_secrets_compare_whole() {
        assert!(same_secret(b"hunter2", b"hunter2"));
        assert!(!same_secret(b"hunter", b"hunter2"));
        assert!(!same_secret(b"hunter22", b"hunter2"));
        assert!(!same_secret(b"", b"x"));
    }
}
