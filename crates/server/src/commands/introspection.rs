//! What the server says of itself to tools: COMMAND (the command table) and CONFIG GET.

use super::{find, lossy, Spec, COMMANDS};
use crate::glob;
use crate::info;
use crate::resp::Reply;
use crate::server::Shared;

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

pub(super) fn command(args: &[Vec<u8>], reply: &mut Reply<'_>) {
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

pub(super) fn config(shared: &Shared, args: &[Vec<u8>], reply: &mut Reply<'_>) {
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
