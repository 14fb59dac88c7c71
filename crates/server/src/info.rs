//! INFO's text (server, clients, stats, persistence, and the device's own figures: flash
//! counters by purpose, write amplification, free space, and per namespace its levels, DRAM and
//! activity) and the parameters CONFIG GET answers.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use kvssd_flash::Purpose;

use crate::commit::SyncMode;
use crate::server::{Shared, Source};

/// The Redis version the server says it speaks like (clients and tools look at it to decide which
/// commands to send; kvssd answers as a Redis 7.0 would to those it knows).
pub(crate) const REDIS_VERSION: &str = "7.0.0";

/// Sections printed by INFO without an argument (or with `all`, `default`, `everything`).
const SECTIONS: [&str; 6] = [
    "server",
    "clients",
    "stats",
    "persistence",
    "device",
    "namespaces",
];

/// INFO [section].
pub(crate) fn info(shared: &Shared, section: Option<String>) -> String {
    let wanted = section.map(|section| section.to_ascii_lowercase());
    let all = matches!(
        wanted.as_deref(),
        None | Some("all" | "default" | "everything")
    );
    let mut text = String::new();
    for name in SECTIONS {
        if !all && wanted.as_deref() != Some(name) {
            continue;
        }
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        match name {
            "server" => server(shared, &mut text),
            "clients" => clients(shared, &mut text),
            "stats" => stats(shared, &mut text),
            "persistence" => persistence(shared, &mut text),
            "device" => device(shared, &mut text),
            _ => namespaces(shared, &mut text),
        }
    }
    text
}

fn line(text: &mut String, name: &str, value: impl std::fmt::Display) {
    let _ = write!(text, "{name}:{value}\r\n");
}

fn server(shared: &Shared, text: &mut String) {
    text.push_str("# Server\r\n");
    line(text, "redis_version", REDIS_VERSION);
    line(text, "kvssd_version", env!("CARGO_PKG_VERSION"));
    line(text, "redis_mode", "standalone");
    line(text, "os", std::env::consts::OS);
    line(text, "arch_bits", usize::BITS);
    line(text, "multiplexing_api", "threads");
    line(text, "process_id", std::process::id());
    line(text, "tcp_port", shared.local.port());
    let uptime = shared.started.elapsed().as_secs();
    line(text, "uptime_in_seconds", uptime);
    line(text, "uptime_in_days", uptime / 86_400);
}

fn clients(shared: &Shared, text: &mut String) {
    text.push_str("# Clients\r\n");
    line(
        text,
        "connected_clients",
        shared.clients.load(Ordering::Relaxed),
    );
    line(text, "maxclients", shared.config.clients_max);
    line(
        text,
        "client_buffer_bytes",
        shared.config.client_buffer_bytes,
    );
}

fn stats(shared: &Shared, text: &mut String) {
    text.push_str("# Stats\r\n");
    line(
        text,
        "total_connections_received",
        shared.connections_total.load(Ordering::Relaxed),
    );
    line(
        text,
        "rejected_connections",
        shared.connections_rejected.load(Ordering::Relaxed),
    );
    line(
        text,
        "total_commands_processed",
        shared.commands_total.load(Ordering::Relaxed),
    );
    line(
        text,
        "protocol_errors",
        shared.protocol_errors.load(Ordering::Relaxed),
    );
    line(text, "scan_cursors_open", shared.cursors.open());
    line(text, "scan_cursors_max", shared.cursors.cursors_max());
}

fn persistence(shared: &Shared, text: &mut String) {
    text.push_str("# Persistence\r\n");
    let simulated = matches!(shared.config.source, Source::Simulated { .. });
    line(text, "aof_enabled", u8::from(!simulated));
    line(text, "kvssd_sync", shared.config.sync.name());
    line(text, "group_commit_syncs", shared.commit.syncs());
    if let Ok(counts) = shared.device.durability_counts() {
        line(text, "checkpoints_written", counts.checkpoints_written);
        line(text, "log_pages_written", counts.log_pages_written);
        line(text, "media_syncs", counts.media_syncs);
    }
}

fn device(shared: &Shared, text: &mut String) {
    text.push_str("# Device\r\n");
    let geometry = &shared.geometry;
    line(text, "geometry", geometry);
    line(text, "capacity_bytes", geometry.capacity_bytes());
    line(text, "value_bytes_max", shared.value_bytes_max);
    let Ok(stats) = shared.device.stats() else {
        line(text, "error", "device statistics unavailable");
        return;
    };
    line(text, "free_blocks", stats.free_blocks);
    line(text, "blocks_total", geometry.blocks_total());
    line(
        text,
        "free_bytes",
        stats.free_blocks * geometry.block_bytes(),
    );
    line(text, "namespaces", stats.namespaces);
    line(text, "iterators_open", stats.iterators_open);
    line(text, "device_gc_victims", stats.device_gc_victims);
    for purpose in Purpose::ALL {
        let counts = stats.flash.of(purpose);
        let _ = write!(
            text,
            "flash_{}:reads={},programs={},erases={}\r\n",
            purpose.name(),
            counts.reads,
            counts.programs,
            counts.erases
        );
    }
    match stats.flash.write_amplification() {
        Some(waf) => line(text, "write_amplification", format!("{waf:.3}")),
        None => line(text, "write_amplification", "n/a"),
    }
}

fn namespaces(shared: &Shared, text: &mut String) {
    text.push_str("# Namespaces\r\n");
    let Ok(list) = shared.device.list_namespaces() else {
        return;
    };
    for namespace in list {
        let database = namespace
            .id
            .0
            .checked_sub(crate::server::FIRST_NAMESPACE)
            .filter(|&db| db < shared.config.databases)
            .map_or_else(|| "none".to_string(), |db| format!("db{db}"));
        let _ = write!(
            text,
            "namespace{}:database={},preset={},l0_entries={},levels={},blocks={},valid_bytes={},dram_bytes={},dram_budget_bytes={},flushes={},compactions={},gc_victims={},iterators_open={}\r\n",
            namespace.id.0,
            database,
            namespace.spec.preset.name(),
            namespace.l0_entries,
            namespace.levels,
            namespace.blocks,
            namespace.valid_bytes,
            namespace.dram.total(),
            namespace.dram.budget,
            namespace.flushes,
            namespace.compactions,
            namespace.gc_victims,
            namespace.iterators_open
        );
    }
}

/// What CONFIG GET answers: the Redis names tools ask for, then kvssd's own.
pub(crate) fn parameters(shared: &Shared) -> Vec<(String, String)> {
    let config = &shared.config;
    let simulated = matches!(config.source, Source::Simulated { .. });
    let appendfsync = match config.sync {
        _ if simulated => "no",
        SyncMode::Every | SyncMode::Group => "always",
        SyncMode::None => "no",
    };
    let idle = config.idle_timeout.map_or(0, |idle| idle.as_secs());
    [
        ("save", String::new()),
        (
            "appendonly",
            if simulated { "no" } else { "yes" }.to_string(),
        ),
        ("appendfsync", appendfsync.to_string()),
        ("databases", config.databases.to_string()),
        ("maxclients", config.clients_max.to_string()),
        ("port", shared.local.port().to_string()),
        ("bind", config.bind.to_string()),
        ("timeout", idle.to_string()),
        (
            "client-query-buffer-limit",
            config.client_buffer_bytes.to_string(),
        ),
        ("proto-max-bulk-len", config.client_buffer_bytes.to_string()),
        ("maxmemory", "0".to_string()),
        ("kvssd-sync", config.sync.name().to_string()),
        ("kvssd-value-bytes-max", shared.value_bytes_max.to_string()),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value))
    .collect()
}
