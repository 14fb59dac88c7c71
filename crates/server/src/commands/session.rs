//! Connection commands: AUTH, HELLO and CLIENT.

use super::Session;
use super::{lossy, parse_i64};
use crate::info;
use crate::resp::Reply;
use crate::server::Shared;

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

pub(super) fn auth(
    shared: &Shared,
    session: &mut Session,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
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

pub(super) fn hello(
    shared: &Shared,
    session: &mut Session,
    args: &[Vec<u8>],
    reply: &mut Reply<'_>,
) {
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

pub(super) fn client(session: &mut Session, args: &[Vec<u8>], reply: &mut Reply<'_>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_secrets_compare_whole() {
        assert!(same_secret(b"hunter2", b"hunter2"));
        assert!(!same_secret(b"hunter", b"hunter2"));
        assert!(!same_secret(b"hunter22", b"hunter2"));
        assert!(!same_secret(b"", b"x"));
    }
}
