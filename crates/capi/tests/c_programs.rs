//! The C programs under `tests/c`, compiled by the system C compiler exactly as a user's program
//! would be (`-I crates/capi/include -L target/release -lkvssd -pthread`), with AddressSanitizer
//! and UndefinedBehaviorSanitizer (any report is fatal), warnings as errors, and run as real
//! processes against real files and simulated devices:
//!
//! * `abi`: struct sizes, offsets, enum values and limits of the headers;
//! * `api_sync` and `api_async`: every function with valid and invalid arguments, on a file image
//!   and on a simulated card;
//! * `pacing`: no paced command completes before its simulated latency;
//! * `sample`: a program written like Samsung's samples, on a file (its data read back by a
//!   second process after reopening) and on a simulated card, linked dynamically and statically.
//!
//! They need the release library: `cargo build --release -p kvssd-capi` (`scripts/test.sh` builds
//! it before `cargo test`). A missing or stale library fails with that instruction.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root exists")
}

fn release_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir).join("release"),
        None => workspace().join("target/release"),
    }
}

fn newest_source(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return newest;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let modified = if path.is_dir() {
            newest_source(&path)
        } else {
            entry
                .metadata()
                .and_then(|meta| meta.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        newest = newest.max(modified);
    }
    newest
}

/// The release library, checked to exist and to be newer than the sources it is built from.
fn library() -> PathBuf {
    let library = release_dir().join("libkvssd.so");
    let built = std::fs::metadata(&library)
        .and_then(|meta| meta.modified())
        .unwrap_or_else(|_| {
            panic!(
                "{} is missing: build it with `cargo build --release -p kvssd-capi` (scripts/test.sh does)",
                library.display()
            )
        });
    let root = workspace();
    for sources in [
        "crates/capi/src",
        "crates/device/src",
        "crates/engine/src",
        "crates/space/src",
        "crates/flash/src",
    ] {
        let newest = newest_source(&root.join(sources));
        assert!(
            newest <= built,
            "{} is older than {sources}: rebuild it with `cargo build --release -p kvssd-capi` (scripts/test.sh does)",
            library.display()
        );
    }
    library
}

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

const SANITIZE: [&str; 3] = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

/// Compiles `tests/c/NAME.c` into a fresh directory; `static_link` links `libkvssd.a` instead.
fn compile(name: &str, output: &Path, static_link: bool) {
    let library = library();
    let root = workspace();
    let mut command = Command::new(compiler());
    command
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-g",
        ])
        .args(SANITIZE)
        .arg("-I")
        .arg(root.join("crates/capi/include"))
        .arg(root.join(format!("crates/capi/tests/c/{name}.c")))
        .arg("-o")
        .arg(output);
    if static_link {
        command
            .arg(library.with_file_name("libkvssd.a"))
            .args(["-pthread", "-ldl", "-lm"]);
    } else {
        command
            .arg("-L")
            .arg(release_dir())
            .args(["-lkvssd", "-pthread"]);
    }
    let result = command.output().unwrap_or_else(|error| {
        panic!(
            "cannot run the C compiler `{}` ({error}): install one (scripts/test.sh does: apt-get install gcc)",
            compiler()
        )
    });
    assert!(
        result.status.success(),
        "compiling {name}.c failed:\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// Runs a compiled program; it must exit 0 with no sanitizer report. Returns its standard output.
fn run(program: &Path, arguments: &[&str]) -> String {
    let result = Command::new(program)
        .args(arguments)
        .env("LD_LIBRARY_PATH", release_dir())
        .env(
            "ASAN_OPTIONS",
            "abort_on_error=0:halt_on_error=1:detect_leaks=1",
        )
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .output()
        .expect("the compiled program runs");
    let stdout = String::from_utf8_lossy(&result.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&result.stderr);
    for report in [
        "AddressSanitizer",
        "LeakSanitizer",
        "runtime error:",
        "UndefinedBehavior",
    ] {
        assert!(
            !stderr.contains(report),
            "{} {arguments:?}: sanitizer report:\n{stderr}",
            program.display()
        );
    }
    assert!(
        result.status.success(),
        "{} {arguments:?} failed ({}):\n{stdout}\n{stderr}",
        program.display(),
        result.status
    );
    stdout
}

fn built(name: &str, static_link: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temporary directory");
    let program = dir.path().join(name);
    compile(name, &program, static_link);
    (dir, program)
}

#[test]
fn c_abi_matches_openmpdk() {
    let (_dir, program) = built("abi", false);
    let out = run(&program, &[]);
    assert!(out.contains("0 failed"), "{out}");
}

#[test]
fn c_api_sync_on_a_file_image() {
    let (dir, program) = built("api_sync", false);
    let image = dir.path().join("sync.img");
    let uri = format!("{}?create&blocks-per-die=4", image.display());
    let out = run(&program, &[&uri]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn c_api_sync_on_a_simulated_card() {
    let (_dir, program) = built("api_sync", false);
    let out = run(&program, &["sim:pink?blocks-per-die=4"]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn c_api_async_on_a_file_image() {
    let (dir, program) = built("api_async", false);
    let image = dir.path().join("async.img");
    let uri = format!("{}?create&blocks-per-die=4&queue-depth=4", image.display());
    let out = run(&program, &[&uri]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn c_api_async_on_a_paced_simulated_card() {
    let (_dir, program) = built("api_async", false);
    let out = run(
        &program,
        &["sim:pink?blocks-per-die=4&queue-depth=4&pacing"],
    );
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn c_pacing_never_completes_early() {
    let (_dir, program) = built("pacing", false);
    let out = run(&program, &[]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn c_sample_data_survives_reopening_the_file() {
    let (dir, program) = built("sample", false);
    let image = dir.path().join("sample.img");
    let create = format!("{}?create&blocks-per-die=4", image.display());
    let path = image.display().to_string();
    let written = run(&program, &[&create, "write", "500"]);
    assert!(written.contains("write 500: ok"), "{written}");
    // A second process opens the same image and finds every pair.
    let checked = run(&program, &[&path, "check", "500"]);
    assert!(checked.contains("check 500: ok"), "{checked}");
}

#[test]
fn c_sample_runs_unchanged_on_a_simulated_card_linked_statically() {
    let (_dir, program) = built("sample", true);
    let out = run(&program, &["sim:pink?blocks-per-die=4", "all", "2000"]);
    assert!(out.contains("all 2000: ok"), "{out}");
}
