//! `kvssd`: the command-line program.

fn main() {}
