//! The command table and what each command does on the device (see `docs/server.md`).
//!
//! Reads of keys the device cannot hold (empty, or longer than 255 bytes) answer as for an
//! absent key; writes of them are refused with the device's message. Every device refusal is an
//! `ERR` reply with the device's one-line message, and a refused command changed nothing.

mod introspection;
mod scan;
mod session;
mod strings;

use kvssd_device::{DeviceError, StoreMode, KEY_BYTES_MAX};

use crate::info;
use crate::resp::Reply;
use crate::server::Shared;
use introspection::{command, config};
use scan::{count_keys, scan};
use session::{auth, client, hello};
use strings::{delete, exists, get, getrange, mget, mset, present, set, strlen};

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
